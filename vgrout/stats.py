"""Statistics for the artifacts: Wilson intervals for rates, mean ± SEM over seeds, the
paired test against the `none` arm, and the gate's classification metrics (AUROC,
precision/recall at a cut, F-beta).

Seeds are the unit of replication: a rate is one number per run, and intervals over
arms are mean ± SEM of those per-seed numbers. Wilson intervals describe one run's rate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as sps

MIN_SEEDS_FOR_TEST = 3
FEWER_THAN_3_SEEDS = "fewer than 3 seeds: no p-value"


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for k successes out of n; (0, 1) when n == 0 (no information)."""
    if not (0 <= k <= n):
        raise ValueError(f"wilson: need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At k = 0 (k = n) the lower (upper) bound is exactly 0 (1); float rounding misses it.
    lo = 0.0 if k == 0 else centre - half
    hi = 1.0 if k == n else centre + half
    return lo, hi


def mean_sem(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and standard error of the mean (sample sd / sqrt(n)); SEM is None for n < 2."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("mean_sem: no values")
    if x.size < 2:
        return float(x[0]), None
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size))


@dataclass(frozen=True)
class PairedTest:
    """Paired difference a - b over seeds. t and p are None below MIN_SEEDS_FOR_TEST seeds."""
    n: int
    mean_diff: float
    sem: float | None
    t: float | None
    p: float | None

    @property
    def statement(self) -> str:
        """One line for a table cell: the test result, or why there is none."""
        if self.p is None:
            return f"n={self.n} seed{'' if self.n == 1 else 's'}, {FEWER_THAN_3_SEEDS}"
        return f"t({self.n - 1})={self.t:.2f}, p={self.p:.3g}"


def paired_t(a: Sequence[float], b: Sequence[float]) -> PairedTest:
    """Two-sided paired t-test of a vs b (same seeds, same order).

    With fewer than 3 seeds a t-test has at most 1 degree of freedom and its p-value says
    nothing useful, so we report the difference without one.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired_t: need two 1-d arrays of equal length, got {a.shape} and {b.shape}")
    mean_diff, sem = mean_sem(a - b)
    if a.size < MIN_SEEDS_FOR_TEST:
        return PairedTest(n=int(a.size), mean_diff=mean_diff, sem=sem, t=None, p=None)
    res = sps.ttest_rel(a, b)
    # A zero-variance difference gives t = ±inf or nan; report it as scipy gives it.
    return PairedTest(n=int(a.size), mean_diff=mean_diff, sem=sem, t=float(res.statistic), p=float(res.pvalue))


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve of `scores` for the positive class (ties count one half).

    Equal to P(score of a random positive > score of a random negative), which is the
    Mann-Whitney U of the positives divided by n_pos * n_neg.
    """
    scores = np.asarray(scores, dtype=float)
    labels = np.asarray(labels, dtype=bool)
    if scores.shape != labels.shape:
        raise ValueError(f"auroc: {scores.shape[0]} scores but {labels.shape[0]} labels")
    pos, neg = scores[labels], scores[~labels]
    if pos.size == 0 or neg.size == 0:
        raise ValueError(f"auroc: undefined with {pos.size} positives and {neg.size} negatives")
    u = sps.mannwhitneyu(pos, neg, alternative="two-sided").statistic
    return float(u / (pos.size * neg.size))


def precision_recall(selected: Sequence[bool], positive: Sequence[bool]) -> tuple[float | None, float | None]:
    """Precision and recall of a selection (e.g. 'routed') for a class (e.g. 'hacked').

    Precision is None when nothing is selected, recall None when there are no positives.
    """
    selected = np.asarray(selected, dtype=bool)
    positive = np.asarray(positive, dtype=bool)
    if selected.shape != positive.shape:
        raise ValueError(f"precision_recall: shapes differ, {selected.shape} vs {positive.shape}")
    tp = int((selected & positive).sum())
    precision = tp / int(selected.sum()) if selected.any() else None
    recall = tp / int(positive.sum()) if positive.any() else None
    return precision, recall


def f_beta(precision: float | None, recall: float | None, beta: float = 0.5) -> float | None:
    """F-beta; beta = 0.5 weighs precision above recall: a wrong pin (a hack kept, a clean
    rollout routed) is the expensive error, a miss into the absorb band the cheap one."""
    if precision is None or recall is None:
        return None
    if precision == 0 and recall == 0:
        return 0.0
    b2 = beta * beta
    return (1 + b2) * precision * recall / (b2 * precision + recall)
