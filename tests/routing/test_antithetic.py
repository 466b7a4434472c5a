"""An antithetic placebo pair (+h, −h of one Haar draw) ranks every row in exactly opposite orders,
under gate.score dot and cosine, ties included: the band normalisation keeps the direction's sign
(directions.band_cosine divides by the band's width, unsigned), and rows of equal score are ordered
by a permutation seeded by (run seed, step) that the −h run reverses (gate.tie_keys), never by
their position. So at the step rule's counts the two runs route disjoint rows, and at symmetric
fractions the rows one routes the other keeps."""
from types import SimpleNamespace

import pytest
import torch

from vgrout import arms, config
from vgrout.routing import directions
from vgrout.routing.gate import tie_keys
from vgrout.train import loop as train


def _cfg(name, seed, **gate):
    return SimpleNamespace(arm=arms.get(name), name=name, seed=seed, yoke_log=None,
                           gate=config.Gate(cut_rule="step", warmup=0, **gate))


def _rows(n_prompts, n_student, n_teacher):
    return [SimpleNamespace(source=s, prompt=f"p{g}") for g in range(n_prompts)
            for s in ["student"] * n_student + ["teacher"] * n_teacher]


def _features(mods, n, seed, tied):
    """n rows' features; with `tied`, every third row a copy of the one before (the same text twice
    scores the same)."""
    g = torch.Generator().manual_seed(seed)
    feats = {m: torch.randn(n, 3, generator=g) for m in mods}
    if tied:
        for m in mods:
            feats[m][2::3] = feats[m][1::3][:len(feats[m][2::3])]
    return feats


def _scores(score, feats, d, pairs):
    """A row's score as routing_step computes it: the dot product, or the band-normalised cosine with
    the band of this direction's own pair cosines (loop.pair_band)."""
    if score == "dot":
        return directions.score(feats, d)
    return directions.band_cosine(feats, d, directions.pair_band(*pairs, d))


def _zone_sets(zones, idx):
    return ({i for i in idx if zones[i] == "route"}, {i for i in idx if zones[i] == "keep"})


@pytest.mark.parametrize("score", ["dot", "cosine"])
@pytest.mark.parametrize("family,seed", [("placeboA", 0), ("placeboV", 3)])
@pytest.mark.parametrize("tied", [False, True])
def test_an_antithetic_pair_ranks_in_exactly_opposite_orders(vact, score, family, seed, tied):
    plus, minus = (directions.gate_direction(arms.draw_name(family, 2, s), vact, seed, 1) for s in "pn")
    g = torch.Generator().manual_seed(seed)
    pairs = ({m: torch.randn(6, 3, generator=g) + 0.5 for m in plus}, {m: torch.randn(6, 3, generator=g) for m in plus})
    rows = _rows(6, 4, 2)
    feats = _features(list(plus), len(rows), seed, tied)
    s = {"p": _scores(score, feats, plus, pairs), "n": _scores(score, feats, minus, pairs)}
    assert torch.equal(s["n"], -s["p"])  # the score keeps the direction's sign, exactly
    if tied:
        assert len(set(s["p"].tolist())) < len(rows)  # the test has ties to break
    for step in range(3):
        for q_lo, q_hi in ((0.25, 0.75), (0.1, 0.6)):
            zones = {k: train.route(_cfg(arms.draw_name(family, 2, k), seed, q_lo=q_lo, q_hi=q_hi, teacher_zone="gate"),
                                    train.new_gate(_cfg(arms.draw_name(family, 2, k), seed, q_lo=q_lo, q_hi=q_hi,
                                                        teacher_zone="gate")), s[k], rows, step, None)
                     for k in "pn"}
            for src in ("student", "teacher"):
                idx = [i for i, r in enumerate(rows) if r.source == src]
                (rp, kp), (rn, kn) = _zone_sets(zones["p"], idx), _zone_sets(zones["n"], idx)
                assert rp and len(rp) == len(rn) and len(kp) == len(kn)  # the step rule's counts
                assert not rp & rn and not kp & kn  # disjoint
                if q_lo == 1 - q_hi:  # complements within the cut: route and keep swap, absorb stays
                    assert rn == kp and kn == rp
                # at any fractions −h routes the bottom of +h's order (score, then tie key) and keeps its top
                keys = tie_keys(seed, step, [sum(r.source == "student" for r in rows),
                                             sum(r.source != "student" for r in rows)])[src == "teacher"]
                order = [idx[j] for j in sorted(range(len(idx)), key=lambda j: (float(s["p"][idx[j]]), keys[j]))]
                assert rn == set(order[:len(rn)]) and kn == set(order[len(order) - len(kn):])


def test_ties_are_broken_by_a_seeded_permutation_not_by_row_order():
    """Every student row scores the same (a group of identical texts): which rows route is a draw fixed
    by (run seed, step), the same in every arm of the seed, another at another step or seed; no
    position wins (the first rows, e.g. the deploy-sampled ones, route as often as the last)."""
    rows = _rows(2, 4, 0)
    tied = torch.zeros(len(rows), dtype=torch.float64)
    routed = {}
    for step in range(40):
        z = {a: train.route(_cfg(a, 0), train.new_gate(_cfg(a, 0)), tied, rows, step, None)
             for a in ("routeA", "nll", "placeboA1p")}
        assert z["routeA"] == z["nll"] == z["placeboA1p"]  # fixed per (seed, step): shared by the arms
        assert z["routeA"].count("route") == 2 and z["routeA"].count("keep") == 2
        routed[step] = frozenset(i for i, zz in enumerate(z["routeA"]) if zz == "route")
        other = train.route(_cfg("routeA", 1), train.new_gate(_cfg("routeA", 1)), tied, rows, step, None)
        routed.setdefault("other_seed", set()).add(other != z["routeA"])
    assert True in routed.pop("other_seed")  # another seed, other draws
    assert len(set(routed.values())) > 10
    per_row = [sum(i in r for r in routed.values()) for i in range(len(rows))]
    assert min(per_row) > 0 and max(per_row) < 20, per_row  # 40 steps x 2 of 8 rows: 10 expected each
    # the antithetic pair splits a tie between them: −h reverses the permutation
    for step in range(5):
        zp, zn = (train.route(_cfg(f"placeboV1{k}", 0), train.new_gate(_cfg(f"placeboV1{k}", 0)), tied, rows, step,
                              None) for k in "pn")
        assert {i for i, z in enumerate(zp) if z == "route"} == {i for i, z in enumerate(zn) if z == "keep"}
        assert {i for i, z in enumerate(zp) if z == "keep"} == {i for i, z in enumerate(zn) if z == "route"}


def test_tie_keys_are_a_seeded_permutation_per_source():
    a = tie_keys(3, 7, [5, 2])
    assert a == tie_keys(3, 7, [5, 2])  # a resumed run draws the same
    assert sorted(a[0]) == [0, 1, 2, 3, 4] and sorted(a[1]) == [0, 1]
    assert tie_keys(3, 7, [5, 2], reverse=True) == [[-k for k in ks] for ks in a]
    assert a != tie_keys(3, 8, [5, 2]) or a != tie_keys(4, 7, [5, 2])
    from vgrout.routing.gate import ranked
    with pytest.raises(ValueError, match="tie keys must be 3 distinct numbers"):
        ranked([0.0, 0.0, 1.0], 1, 1, [0.0, 0.0, 1.0])
