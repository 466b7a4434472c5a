"""Statistics for the artifacts: Wilson intervals for rates, pass@k, mean ± SEM over seeds, the
hierarchical bootstrap over seeds and problems, the paired test across seeds, Holm's
multiplicity correction, and the gate's classification metrics (AUROC, precision/recall at a
cut, F-beta).

Seeds are the unit of replication: a rate is one number per run. The bootstrap adds the
second level, the test problems: every run of an eval samples the same problems with the same
sampling seed, so two arms at one seed are paired by problem as well as by seed. Wilson
intervals describe one run's rate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

# A p-value needs replication: with fewer seeds a t-test's few degrees of freedom make its
# p-value say little, and the design asks for >= 5 seeds per claim.
MIN_SEEDS_FOR_TEST = 5
TOO_FEW_SEEDS = f"fewer than {MIN_SEEDS_FOR_TEST} seeds: no p-value"
ZERO_VARIANCE = "the same difference at every seed: no p-value"


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


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass_at_k: need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod((n - c - i) / (n - i) for i in range(k))


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
    """Paired difference a - b over seeds. t and p are None below MIN_SEEDS_FOR_TEST seeds, and when
    the difference varies neither over seeds nor in its sampling floor (both arms at 0, typically)."""
    n: int
    mean_diff: float
    sem: float | None
    t: float | None
    p: float | None
    floored: bool = False  # sem is the sampling floor, the seeds' own spread being smaller

    @property
    def statement(self) -> str:
        """One line for a table cell: the test result, or why there is none."""
        if self.p is None and self.n >= MIN_SEEDS_FOR_TEST:
            return f"n={self.n} seeds, {ZERO_VARIANCE}"
        if self.p is None:
            return f"n={self.n} seed{'' if self.n == 1 else 's'}, {TOO_FEW_SEEDS}"
        return f"t({self.n - 1})={self.t:.2f}, p={self.p:.3g}" + (" (SEM at its sampling floor)" if self.floored else "")


def paired_t(a: Sequence[float], b: Sequence[float], sampling_var: Sequence[float] | None = None) -> PairedTest:
    """Two-sided paired t-test of a vs b (same seeds, same order).

    sampling_var: per seed, the variance the difference has from sampling alone (binomial:
    p_a(1 − p_a)/n_a + p_b(1 − p_b)/n_b). The SEM is never taken below the SEM sampling alone
    gives, sqrt(Σ sampling_var) / S: seeds that happen to agree (a difference of exactly −0.1 at
    every seed) would otherwise give an SEM of 0 and no test, or an infinite t. Where even the
    floor is 0 (both arms at 0, or at 1, in every seed) there is nothing to test.

    Below MIN_SEEDS_FOR_TEST seeds we report the difference without a p-value: with 2-4
    seeds the t distribution's heavy tails make the test nearly powerless, and a p-value from
    so few runs invites reading noise as an effect.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired_t: need two 1-d arrays of equal length, got {a.shape} and {b.shape}")
    mean_diff, sem = mean_sem(a - b)
    floor = 0.0
    if sampling_var is not None:
        v = np.asarray(sampling_var, dtype=float)
        if v.shape != a.shape or (v < 0).any():
            raise ValueError(f"paired_t: need one non-negative sampling variance per seed, got {v.tolist()}")
        floor = float(math.sqrt(v.sum()) / a.size)
    if a.size < MIN_SEEDS_FOR_TEST:
        return PairedTest(n=int(a.size), mean_diff=mean_diff, sem=sem, t=None, p=None)
    floored = floor > sem
    sem = max(sem, floor)
    if sem <= 1e-12:
        # no spread over seeds and none from sampling: t is ±inf or nan and scipy's p 0 or nan; neither is evidence
        return PairedTest(n=int(a.size), mean_diff=mean_diff, sem=sem, t=None, p=None)
    t = mean_diff / sem
    from scipy import stats as sps  # here, not above: scipy.stats costs an eval stage 0.6 s to import
    p = float(2 * sps.t.sf(abs(t), a.size - 1))
    return PairedTest(n=int(a.size), mean_diff=mean_diff, sem=sem, t=float(t), p=p, floored=floored)


def binomial_var(p: float, n: int) -> float:
    """The sampling variance of a rate p measured on n samples: p(1 − p)/n."""
    if n < 1:
        raise ValueError(f"binomial_var: need n >= 1 samples, got {n}")
    return p * (1 - p) / n


N_BOOT = 2000  # resamples: the 2.5/97.5 percentiles of 2,000 move by well under a tenth of the interval


@dataclass(frozen=True)
class Bootstrap:
    """A mean (or a paired difference of means) over seeds and problems, with its percentile interval."""
    estimate: float
    lo: float
    hi: float
    n_seeds: int
    n_problems: int
    n_boot: int
    widened_by: float = 1.0  # the percentile interval's half-widths times this, for few seeds (1 for one seed)
    # Every resample gave the same number (every cell equal: both arms at 0 everywhere, say). The
    # interval is then undefined, not a certainty: the data show no variation to resample.
    degenerate: bool = False

    @property
    def interval(self) -> str:
        return "undefined (no variation to resample)" if self.degenerate else f"[{self.lo:.3f}, {self.hi:.3f}]"


def hierarchical_bootstrap(x, ref=None, n_boot: int = N_BOOT, seed: int = 0, level: float = 0.95,
                           support: tuple[float, float] | None = None) -> Bootstrap:
    """Percentile interval of mean(x) (or of mean(x − ref), paired) over seeds and problems.

    x, ref: [seeds, problems] arrays, each cell a problem's mean over its samples in one run;
    row i of x and of ref is the same seed, column j the same problem. Every seed is evaluated
    on the same problems, so seeds and problems are crossed, not nested: one resample draws
    seeds with replacement and, once for all of them, problems with replacement (the
    two-way, "pigeonhole" bootstrap), and averages the drawn rows' drawn columns. Drawing
    problems afresh within each seed would treat a problem's effect as independent across
    seeds and average it away: intervals too narrow whenever problems differ in how an arm
    changes them. The difference is taken cell by cell before resampling, so both arms see
    the same problem draws: the problems' shared difficulty cancels instead of widening the
    interval (the design is paired; resampling each arm on its own would ignore that).

    Estimate: the mean over seeds of each seed's mean over problems (x's rate, or the Δ).
    With one seed only problems are resampled: the interval then covers problem (and
    sampling) variance, not seed-to-seed variance. With 2 or more, a percentile bootstrap over
    so few seeds under-covers (about 79% at 5 seeds when seeds vary most): the seeds' share of
    the resampled variance, var(seed means) / S, is scaled by f² (f = few_seeds_factor), the
    problems' share left as it is, and each half of the interval scaled about the estimate by
    w = sqrt(1 + (f² − 1) · seed share / total), between 1 and f (Bootstrap.widened_by). This
    gives the t interval over seeds when seeds dominate. It does not repair a skewed seed
    distribution: when only some seeds show an effect (one seed in five hacks) the interval
    still under-covers. The seeds' share holds each seed's sampling noise too, so that is
    widened as well (conservative).

    support: the range the estimand can take ((0, 1) for a rate, (−1, 1) for a difference of
    rates); the widened interval is clipped to it, never to the observed cells' range (which
    would state as certain what only these seeds show).
    """
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or 0 in x.shape:
        raise ValueError(f"hierarchical_bootstrap: need a non-empty [seeds, problems] array, got shape {x.shape}")
    if ref is not None:
        ref = np.asarray(ref, dtype=float)
        if ref.shape != x.shape:
            raise ValueError(f"hierarchical_bootstrap: x {x.shape} and ref {ref.shape} differ in shape")
        x = x - ref
    if not np.isfinite(x).all():
        raise ValueError("hierarchical_bootstrap: non-finite values (a problem with no samples?)")
    if n_boot < 1 or not 0 < level < 1:
        raise ValueError(f"hierarchical_bootstrap: need n_boot >= 1 and 0 < level < 1, got {n_boot}, {level}")
    n_seeds, n_problems = x.shape
    rng = np.random.default_rng(seed)
    stats = np.empty(n_boot)
    chunk = max(1, (1 << 22) // x.size)  # resamples per batch: about 4M gathered cells, bounded memory
    for start in range(0, n_boot, chunk):
        b = min(chunk, n_boot - start)
        seeds = rng.integers(0, n_seeds, size=(b, n_seeds))
        problems = rng.integers(0, n_problems, size=(b, n_problems))  # one draw, shared by the drawn seeds
        stats[start:start + b] = x[seeds[:, :, None], problems[:, None, :]].mean(axis=(1, 2))
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(stats, [tail, 100 - tail])
    estimate = float(x.mean())
    # The seeds' share of the resamples' variance, var(seed means) / S, is too small for few seeds:
    # scale that share by few_seeds_factor² (the problems' share stays), and the interval with it.
    widen = 1.0
    total, seed_part = float(stats.var()), float(x.mean(axis=1).var()) / n_seeds
    if n_seeds > 1 and total > 0:
        f = few_seeds_factor(n_seeds, level)
        widen = min(math.sqrt((total + (f ** 2 - 1) * seed_part) / total), f)
        lo, hi = estimate - widen * (estimate - lo), estimate + widen * (hi - estimate)
    if support is not None:
        lo, hi = max(lo, support[0]), min(hi, support[1])
    return Bootstrap(estimate=estimate, lo=float(lo), hi=float(hi), n_seeds=n_seeds,
                     n_problems=n_problems, n_boot=n_boot, widened_by=widen, degenerate=bool(np.ptp(stats) == 0))


def few_seeds_factor(n_seeds: int, level: float = 0.95) -> float:
    """How much the bootstrap's spread is widened for the few seeds it resamples: t_{S-1} / z, times
    sqrt(S / (S - 1)); 1 for one seed (nothing to widen: seeds are not resampled).

    Resampling S seeds gives their mean a spread of sd·sqrt((S-1)/S)/sqrt(S) (the plug-in variance,
    too small by S/(S-1)), read at normal quantiles where a mean of S draws with an estimated sd
    needs t_{S-1}'s. With 5 seeds and seed-to-seed variance dominating, the plain percentile
    interval covered about 79% of the time instead of 95%; this factor makes it the t interval
    over seeds. hierarchical_bootstrap applies it to the seeds' share of the variance only.
    """
    if n_seeds < 2:
        return 1.0
    q = 0.5 + level / 2
    from scipy import stats as sps
    return float(sps.t.ppf(q, n_seeds - 1) / sps.norm.ppf(q) * math.sqrt(n_seeds / (n_seeds - 1)))


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (family-wise error control under any dependence).

    Sorted ascending, the i-th smallest of m p-values becomes max over j <= i of
    min(1, (m − j + 1) · p_(j)). None and nan (no test: too few seeds, zero variance) stay as
    they are and do not count in m: a claim not tested is not one of the family's tests.
    """
    tested = [i for i, p in enumerate(pvalues) if p is not None and not math.isnan(p)]
    out = list(pvalues)
    m = len(tested)
    running = 0.0
    for rank, i in enumerate(sorted(tested, key=lambda i: pvalues[i])):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))  # monotone: never below a smaller p's
        out[i] = running
    return out


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve of `scores` for the positive class (ties count one half).

    Equal to P(score of a random positive > score of a random negative), which is the
    Mann-Whitney U of the positives divided by n_pos * n_neg.
    """
    scores = np.asarray(scores, dtype=float)
    labels = np.asarray(labels, dtype=bool)
    if scores.shape != labels.shape:
        raise ValueError(f"auroc: {scores.shape[0]} scores but {labels.shape[0]} labels")
    from scipy import stats as sps
    return auroc_of_ranks(sps.rankdata(scores), labels)


def auroc_of_ranks(ranks: np.ndarray, labels: np.ndarray) -> float:
    """auroc from the scores' mid-ranks (scipy.stats.rankdata): U = rank sum of the positives
    less n_pos (n_pos + 1) / 2. A permutation null ranks its scores once and calls this per draw."""
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"auroc: undefined with {n_pos} positives and {n_neg} negatives")
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


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
