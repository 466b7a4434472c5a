"""Statistics checked against values computed independently of vgrout.stats."""
import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from vgrout.stats import FEWER_THAN_3_SEEDS, auroc, f_beta, mean_sem, paired_t, precision_recall, wilson


def test_wilson_k0_matches_closed_form():
    # k = 0: lower bound 0, upper bound z^2 / (n + z^2).
    z, n = 1.96, 10
    lo, hi = wilson(0, n, z)
    assert lo == 0.0
    assert hi == pytest.approx(z * z / (n + z * z), rel=1e-12)


def test_wilson_known_value_and_symmetry():
    # 7/20 at z = 1.96, worked by hand from the Wilson formula.
    p, n, z = 0.35, 20, 1.96
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    assert wilson(7, 20) == pytest.approx((centre - half, centre + half), rel=1e-12)
    lo, hi = wilson(13, 20)
    assert (lo, hi) == pytest.approx((1 - (centre + half), 1 - (centre - half)), rel=1e-12)


def test_wilson_contains_rate_and_rejects_bad_counts():
    for k, n in itertools.product(range(0, 12), range(1, 12)):
        if k <= n:
            lo, hi = wilson(k, n)
            assert 0.0 <= lo <= k / n <= hi <= 1.0
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson(5, 3)


def test_mean_sem():
    m, s = mean_sem([0.1, 0.3, 0.2, 0.6])
    x = np.array([0.1, 0.3, 0.2, 0.6])
    assert m == pytest.approx(x.sum() / 4)
    assert s == pytest.approx(math.sqrt(((x - x.mean()) ** 2).sum() / 3) / 2)
    assert mean_sem([0.4]) == (0.4, None)
    with pytest.raises(ValueError):
        mean_sem([])


def test_paired_t_matches_scipy_and_hand_formula():
    a = [0.30, 0.42, 0.25, 0.51, 0.38]
    b = [0.20, 0.45, 0.10, 0.40, 0.30]
    res = paired_t(a, b)
    d = np.subtract(a, b)
    t_hand = d.mean() / (d.std(ddof=1) / math.sqrt(d.size))
    p_hand = 2 * sps.t.sf(abs(t_hand), df=d.size - 1)
    assert res.n == 5
    assert res.mean_diff == pytest.approx(d.mean())
    assert res.t == pytest.approx(t_hand)
    assert res.p == pytest.approx(p_hand)
    assert res.p == pytest.approx(sps.ttest_rel(a, b).pvalue)
    assert "p=" in res.statement


def test_paired_t_fewer_than_3_seeds_has_no_p_value():
    res = paired_t([0.3, 0.4], [0.1, 0.5])
    assert res.p is None and res.t is None
    assert res.mean_diff == pytest.approx(0.05)
    assert res.sem == pytest.approx(abs(0.2 - (-0.1)) / 2)  # sd of 2 values / sqrt 2 = |d1-d2|/2
    assert FEWER_THAN_3_SEEDS in res.statement
    with pytest.raises(ValueError):
        paired_t([1, 2, 3], [1, 2])


def test_auroc_matches_pair_counting():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=60).round(1)  # rounding makes ties, which count one half
    labels = rng.random(60) < 0.3
    pos, neg = scores[labels], scores[~labels]
    by_pairs = np.mean([(p > q) + 0.5 * (p == q) for p in pos for q in neg])
    assert auroc(scores, labels) == pytest.approx(by_pairs)
    assert auroc([1, 2, 3, 4], [0, 0, 1, 1]) == 1.0
    assert auroc([1, 2, 3, 4], [1, 1, 0, 0]) == 0.0
    with pytest.raises(ValueError, match="0 positives"):
        auroc([1, 2], [0, 0])


def test_precision_recall_and_f_half():
    selected = [1, 1, 1, 0, 0, 0, 0, 1]
    positive = [1, 1, 0, 1, 0, 0, 0, 0]
    p, r = precision_recall(selected, positive)
    assert (p, r) == (pytest.approx(2 / 4), pytest.approx(2 / 3))
    f = f_beta(p, r, beta=0.5)
    assert f == pytest.approx(1.25 * 0.5 * (2 / 3) / (0.25 * 0.5 + 2 / 3))
    assert f < 2 * p * r / (p + r) < r  # F0.5 leans toward the lower precision here
    assert precision_recall([0, 0], [1, 0]) == (None, 0.0)
    assert precision_recall([1, 0], [0, 0]) == (0.0, None)
    assert f_beta(None, 0.5) is None
    assert f_beta(0.0, 0.0) == 0.0
