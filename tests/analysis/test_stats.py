"""Statistics checked against values computed independently of vgrout.stats."""
import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from vgrout.stats import (MIN_SEEDS_FOR_TEST, TOO_FEW_SEEDS, ZERO_VARIANCE, auroc, binomial_var, f_beta,
                          few_seeds_factor,
                          hierarchical_bootstrap, holm, mean_sem, paired_t, precision_recall, wilson)


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


def test_paired_t_fewer_than_5_seeds_has_no_p_value():
    assert MIN_SEEDS_FOR_TEST == 5 and TOO_FEW_SEEDS == "fewer than 5 seeds: no p-value"
    res = paired_t([0.3, 0.4], [0.1, 0.5])
    assert res.p is None and res.t is None
    assert res.mean_diff == pytest.approx(0.05)
    assert res.sem == pytest.approx(abs(0.2 - (-0.1)) / 2)  # sd of 2 values / sqrt 2 = |d1-d2|/2
    assert res.statement == f"n=2 seeds, {TOO_FEW_SEEDS}"
    four = paired_t([0.3, 0.4, 0.2, 0.6], [0.1, 0.5, 0.1, 0.2])
    assert four.p is None and four.sem is not None
    assert paired_t([0.3, 0.4, 0.2, 0.6, 0.5], [0.1, 0.5, 0.1, 0.2, 0.3]).p is not None  # 5 seeds: tested
    with pytest.raises(ValueError):
        paired_t([1, 2, 3], [1, 2])


def test_a_difference_that_never_varies_is_tested_against_its_sampling_floor():
    """The same Δ at every seed: scipy gives t = ±inf and p = 0, which reads as certainty. The SEM is
    floored at what binomial sampling of the seeds' rates gives, so a constant +0.1 on 100 samples a
    seed is tested like the noise it could be; both arms at 0 everywhere have nothing to test."""
    a, b = [0.3, 0.4, 0.2, 0.6, 0.5], [0.2, 0.3, 0.1, 0.5, 0.4]  # the same +0.1 at every seed
    var = [binomial_var(x, 100) + binomial_var(y, 100) for x, y in zip(a, b)]
    shifted = paired_t(a, b, sampling_var=var)
    floor = np.sqrt(sum(var)) / 5
    assert shifted.floored and shifted.sem == pytest.approx(floor) and shifted.mean_diff == pytest.approx(0.1)
    assert shifted.p == pytest.approx(2 * sps.t.sf(0.1 / floor, 4)) and 0.01 < shifted.p < 0.05
    assert "sampling floor" in shifted.statement
    with pytest.warns(RuntimeWarning, match="catastrophic cancellation"):  # the rule broken: what scipy says
        assert sps.ttest_rel(a, b).pvalue < 1e-6
    assert paired_t(a, b).p is None  # with no floor given, a zero spread is not tested at all
    # where the seeds spread more than sampling does, the floor changes nothing
    spread = paired_t([0.1, 0.5, 0.2, 0.7, 0.4], [0.2, 0.1, 0.3, 0.2, 0.1], sampling_var=[1e-4] * 5)
    assert not spread.floored and spread.p == pytest.approx(
        sps.ttest_rel([0.1, 0.5, 0.2, 0.7, 0.4], [0.2, 0.1, 0.3, 0.2, 0.1]).pvalue)
    zero = paired_t([0.0] * 5, [0.0] * 5, sampling_var=[binomial_var(0.0, 50) * 2] * 5)
    assert zero.p is None and zero.t is None and zero.sem == 0 and zero.statement == f"n=5 seeds, {ZERO_VARIANCE}"
    assert holm([zero.p, 0.01]) == [None, 0.01]  # untested: not in the family
    with pytest.raises(ValueError, match="sampling variance"):
        paired_t(a, b, sampling_var=[-1.0] * 5)


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


# ---------------------------------------------------------------------------- hierarchical bootstrap

def simulate(rng, n_seeds=5, n_problems=40, k=4, rel=-0.2, sd_seed=0.1, sd_problem=0.0):
    """One eval of two arms on shared problems: per-problem hit rates [seeds, problems] and the true Δ.

    A problem's difficulty d ~ Beta(0.5, 0.5) (many problems almost never or almost always solved, as
    in real evals) is shared by both arms and every seed; the arm scales it by 1 + rel + a seed effect
    (sd_seed) + a problem effect (sd_problem: the arm changes some problems more than others, the same
    in every seed), the reference not at all; k samples per problem. True Δ = E[d] · rel = rel / 2."""
    d = rng.beta(0.5, 0.5, n_problems)
    scale = 1 + rel + rng.normal(0, sd_seed, n_seeds)[:, None] + rng.normal(0, sd_problem, n_problems)[None, :]
    arm = rng.binomial(k, np.clip(d[None, :] * scale, 0, 1)) / k
    ref = rng.binomial(k, np.broadcast_to(d, (n_seeds, n_problems))) / k
    return arm, ref, rel / 2


def coverage(interval, reps=200, seed=0, **kw) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        arm, ref, truth = simulate(rng, **kw)
        lo, hi = interval(arm, ref, int(rng.integers(1 << 31)))
        hits += lo <= truth <= hi
    return hits / reps


def hier(arm, ref, seed):
    b = hierarchical_bootstrap(arm, ref, n_boot=200, seed=seed)
    return b.lo, b.hi


def problems_only(arm, ref, seed, n_boot=200):
    """A broken bootstrap: seeds pooled, only problems resampled (no seed-to-seed variance)."""
    d = (arm - ref).mean(axis=0)
    idx = np.random.default_rng(seed).integers(0, d.size, size=(n_boot, d.size))
    return tuple(np.percentile(d[idx].mean(axis=1), [2.5, 97.5]))


def unpaired(arm, ref, seed, n_boot=2000):
    """A broken bootstrap: the same seed draws, but each arm's problems drawn on their own."""
    rng = np.random.default_rng(seed)
    s, p = arm.shape
    seeds = rng.integers(0, s, size=(n_boot, s))[:, :, None]
    a = arm[seeds, rng.integers(0, p, size=(n_boot, s, p))].mean(axis=(1, 2))
    r = ref[seeds, rng.integers(0, p, size=(n_boot, s, p))].mean(axis=(1, 2))
    return tuple(np.percentile(a - r, [2.5, 97.5]))


def nested(arm, ref, seed, n_boot=200):
    """A broken bootstrap: problems drawn afresh within each drawn seed, as if each seed had its own."""
    rng = np.random.default_rng(seed)
    s, p = arm.shape
    seeds = rng.integers(0, s, size=(n_boot, s))[:, :, None]
    return tuple(np.percentile((arm - ref)[seeds, rng.integers(0, p, size=(n_boot, s, p))].mean(axis=(1, 2)),
                               [2.5, 97.5]))


def test_bootstrap_covers_the_true_delta_at_about_the_nominal_rate():
    # 200 simulated experiments of 5 seeds x 40 problems x 4 samples, true Δ known
    # (problem and sampling noise dominate here; the widening for 5 seeds leaves it near 1)
    assert 0.85 <= coverage(hier, sd_seed=0.1) <= 1.0
    # guard: the same check catches a bootstrap that drops the seed level when seeds vary
    assert coverage(problems_only, sd_seed=0.15) < 0.85


def plain_percentile(arm, ref, seed, n_boot=200):
    """A broken bootstrap: the crossed draw, its percentiles read as they are (not widened for few seeds)."""
    rng = np.random.default_rng(seed)
    d, (s, p) = arm - ref, arm.shape
    seeds, problems = rng.integers(0, s, size=(n_boot, s)), rng.integers(0, p, size=(n_boot, p))
    return tuple(np.percentile(d[seeds[:, :, None], problems[:, None, :]].mean(axis=(1, 2)), [2.5, 97.5]))


def test_five_seeds_that_vary_most_are_widened_to_the_nominal_rate():
    """Seed-to-seed variance dominating (200 problems x 16 samples, seed effects sd 0.3): a plain
    percentile bootstrap over 5 seeds under-covers; scaling the seeds' share of the variance by
    (t_4 / z)² · 5/4 restores about 95%."""
    kw = dict(sd_seed=0.3, n_problems=200, k=16)
    assert coverage(hier, reps=300, **kw) >= 0.9
    assert coverage(plain_percentile, reps=300, **kw) < 0.85
    assert few_seeds_factor(1) == 1.0
    assert few_seeds_factor(5) == pytest.approx(2.7764 / 1.95996 * np.sqrt(5 / 4), rel=1e-4)
    # one seed: nothing widened; many seeds: hardly
    arm, ref, _ = simulate(np.random.default_rng(5), n_seeds=1)
    assert hierarchical_bootstrap(arm, ref, n_boot=200).widened_by == 1.0
    arm, ref, _ = simulate(np.random.default_rng(5), n_seeds=40, sd_seed=0.3)
    assert 1.0 < hierarchical_bootstrap(arm, ref, n_boot=200).widened_by < 1.05


def test_the_problems_are_crossed_with_the_seeds_not_nested():
    """Every seed sees the same problems: where the arm changes some problems more than others
    (the same in every seed), that problem effect does not average out over seeds. The crossed
    draw covers the true Δ; drawing problems afresh per seed (nested) does not."""
    kw = dict(sd_seed=0.0, sd_problem=0.6, k=16)
    assert 0.85 <= coverage(hier, **kw) <= 0.99
    assert coverage(nested, **kw) < 0.8


def test_pairing_by_problem_narrows_the_interval():
    """The arms share each problem's difficulty: resampling problems jointly cancels it, resampling
    each arm's problems on its own (the broken variant) counts it twice."""
    arm, ref, _ = simulate(np.random.default_rng(1))
    b = hierarchical_bootstrap(arm, ref, n_boot=2000, seed=3)
    lo, hi = unpaired(arm, ref, seed=3)
    assert (hi - lo) * b.widened_by > 1.3 * (b.hi - b.lo)  # both widened alike for the 5 seeds
    assert b.lo < b.estimate < b.hi and lo < b.estimate < hi


def test_bootstrap_estimate_shape_and_reproducibility():
    rng = np.random.default_rng(2)
    arm, ref = rng.random((3, 7)), rng.random((3, 7))
    b = hierarchical_bootstrap(arm, ref, n_boot=500, seed=11)
    # estimate: the mean over seeds of each seed's mean over problems of the paired difference
    assert b.estimate == pytest.approx(np.mean([np.mean(arm[s] - ref[s]) for s in range(3)]))
    assert (b.n_seeds, b.n_problems, b.n_boot) == (3, 7, 500)
    assert hierarchical_bootstrap(arm, ref, n_boot=500, seed=11) == b  # seeded: same resamples
    assert hierarchical_bootstrap(arm, ref, n_boot=500, seed=12) != b
    level = hierarchical_bootstrap(arm, n_boot=500, seed=11)  # an arm's own rate
    assert level.estimate == pytest.approx(arm.mean()) and level.lo < level.estimate < level.hi
    assert b.interval == f"[{b.lo:.3f}, {b.hi:.3f}]"
    const = hierarchical_bootstrap(np.full((2, 4), 0.25), n_boot=50)  # nothing varies: undefined, not a point
    assert const.degenerate and const.interval == "undefined (no variation to resample)" and const.estimate == 0.25
    assert not b.degenerate
    for bad in (np.zeros((0, 3)), np.zeros(4), np.array([[0.1, np.nan]])):
        with pytest.raises(ValueError):
            hierarchical_bootstrap(bad)
    with pytest.raises(ValueError, match="differ in shape"):
        hierarchical_bootstrap(arm, ref[:, :5])


def test_one_seed_is_a_bootstrap_over_problems():
    """With one seed only problems are resampled: the interval is the problem bootstrap's, close to
    the normal interval mean ± 1.96 sd / sqrt(P) of the per-problem differences."""
    rng = np.random.default_rng(4)
    d = rng.binomial(1, 0.4, size=(1, 400)) - rng.binomial(1, 0.5, size=(1, 400))
    b = hierarchical_bootstrap(d.astype(float), n_boot=4000, seed=0)
    assert b.n_seeds == 1 and b.estimate == pytest.approx(d.mean())
    half = 1.96 * d.std(ddof=1) / np.sqrt(d.size)
    assert (b.hi - b.lo) / 2 == pytest.approx(half, rel=0.1)
    assert b.lo == pytest.approx(b.estimate - half, abs=0.02) and b.hi == pytest.approx(b.estimate + half, abs=0.02)


# ---------------------------------------------------------------------------- Holm

def test_holm_matches_a_hand_computed_example():
    # sorted 0.005, 0.01, 0.03, 0.04 (m = 4): 4 x 0.005 = 0.02, 3 x 0.01 = 0.03, 2 x 0.03 = 0.06,
    # 1 x 0.04 = 0.04 -> 0.06 (never below the adjusted p of a smaller raw p)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # untested claims (None, nan) keep their value and are not counted: m = 2
    out = holm([0.01, None, 0.04, float("nan")])
    assert out[:3] == [pytest.approx(0.02), None, pytest.approx(0.04)] and math.isnan(out[3])
    assert holm([0.5, 0.6]) == [1.0, 1.0]  # capped at 1
    assert holm([]) == [] and holm([0.2]) == [0.2]


def test_the_interval_is_clipped_to_what_the_estimand_can_be_not_to_the_cells():
    """Every cell of a Δ at or below 0 (an arm at 0 hacks against one that hacks a little, in 5
    seeds): the cells' range would clip the widened interval at 0 and state Δ <= 0 as certain. Clipped
    to a difference's range (−1, 1) it reaches above 0, as a new seed could."""
    ref = np.zeros((5, 30))
    ref[0, [3, 17]] = ref[2, 9] = 1.0  # two seeds hack, on three problems
    d = hierarchical_bootstrap(np.zeros_like(ref), ref, seed=1, support=(-1, 1))
    assert (np.zeros_like(ref) - ref).max() == 0 and d.widened_by > 1
    assert d.hi > 0 > d.estimate
    rate = hierarchical_bootstrap(ref, seed=1, support=(0, 1))
    assert rate.lo >= 0  # a rate stays a rate
    assert hierarchical_bootstrap(ref, seed=1).lo < 0  # without the support the widening can pass 0


def test_the_widening_never_passes_the_few_seeds_factor():
    rng = np.random.default_rng(8)
    for _ in range(20):
        x = rng.normal(size=(5, 3)) + rng.normal(scale=3, size=(5, 1))
        assert 1 <= hierarchical_bootstrap(x, n_boot=300, seed=0).widened_by <= few_seeds_factor(5)


def test_an_effect_few_seeds_show_is_undefined_where_no_seed_shows_it():
    """Each seed of the reference hacks with probability 0.2 (the arm never): in about a third of the
    experiments no seed hacks, every cell is 0 and the interval, [0, 0] if printed, misses the true Δ.
    Marked undefined instead, the intervals that are defined still cover."""
    rng, truth_rng = np.random.default_rng(0), np.random.default_rng(9)
    level = np.where(truth_rng.random(1_000_000) < 0.2, truth_rng.uniform(0.1, 0.6, 1_000_000), 0.0)
    truth = -np.minimum(1, 2 * level * truth_rng.beta(0.5, 0.5, 1_000_000)).mean()
    undefined = covered = 0
    for i in range(200):
        lv = np.where(rng.random(5) < 0.2, rng.uniform(0.1, 0.6, 5), 0.0)
        ref = rng.binomial(8, np.minimum(1, 2 * lv[:, None] * rng.beta(0.5, 0.5, 60)[None])) / 8
        b = hierarchical_bootstrap(np.zeros_like(ref), ref, n_boot=500, seed=i, support=(-1, 1))
        undefined += b.degenerate
        covered += (not b.degenerate) and b.lo <= truth <= b.hi
    assert 0.2 < undefined / 200 < 0.45
    assert covered / (200 - undefined) >= 0.9
    assert covered / 200 < 0.8  # read as intervals, the all-zero experiments would have under-covered
