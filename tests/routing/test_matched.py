"""Count-matched controls without a yoking wave (issue 50): under gate.cut_rule step every gated arm
routes and keeps the same exact numbers of each source's rows at every step, whatever its scores, so
uniform, nll, oracleMatched and the antithetic Haar placebos match routeA and routeV by construction;
an antithetic draw's two runs (+h, −h) route complementary rows; the config refuses a matched
control without the step rule and a draw without its twin."""
import random
from types import SimpleNamespace

import pytest
import torch

from vgrout import arms, config
from vgrout.io import InputError
from vgrout.routing import directions
from vgrout.routing.gate import step_counts
from vgrout.train import hooks
from vgrout.train import loop as train

GATED = ["routeA", "routeV", "heldoutV", "uniform", "nll", "oracleMatched", "placeboA1p", "placeboA1n",
         "placeboV2p", "placeboV2n"]


def _cfg(name, seed, **gate):
    return SimpleNamespace(arm=arms.get(name), name=name, seed=seed, yoke_log=None,
                           gate=config.Gate(cut_rule="step", **gate))


def _rows(n_prompts, n_student, n_teacher):
    return [SimpleNamespace(source=s, prompt=f"p{g}", hacked=False)
            for g in range(n_prompts) for s in ["student"] * n_student + ["teacher"] * n_teacher]


def _counts(zones, rows):
    return {(src, z): sum(zz == z and (r.source == "student") == (src == "student") for zz, r in zip(zones, rows))
            for src in ("student", "teacher") for z in ("route", "keep", "absorb")}


@pytest.mark.parametrize("seed", range(12))
def test_every_gated_arm_routes_and_keeps_the_same_counts_per_step_and_source(seed):
    """Each arm gets its own scores (its own direction, the NLL, a draw), some of them tied (the same
    text twice scores the same), and labels for oracleMatched; the counts per step and source are the
    same for every arm: the step rule's, a function of the row count alone."""
    rng = random.Random(seed)
    n_prompts, n_student, n_teacher = rng.randint(1, 5), rng.randint(2, 6), rng.randint(0, 4)
    q_lo = rng.choice([0.1, 0.25, 0.3, 0.5])
    q_hi = rng.choice([q for q in (0.5, 0.7, 0.75, 0.9) if q >= q_lo])
    knobs = dict(q_lo=q_lo, q_hi=q_hi, warmup=rng.choice([0, 5]), buffer_size=64, center=rng.random() < 0.5,
                 teacher_zone=rng.choice(["gate", "absorb"]))
    if knobs["center"] and (n_student < 2 or (knobs["teacher_zone"] == "gate" and 0 < n_teacher < 2)):
        knobs["center"] = False  # the config refuses centering a group's only row
    rows = _rows(n_prompts, n_student, n_teacher)
    cfgs = {a: _cfg(a, seed, **knobs) for a in GATED}
    gates = {a: train.new_gate(c) for a, c in cfgs.items()}
    gen = torch.Generator().manual_seed(seed)
    for step in range(4):
        counts = {}
        for a, cfg in cfgs.items():
            scores = torch.randn(len(rows), generator=gen, dtype=torch.float64)
            if a in ("nll", "placeboA1p"):
                scores = scores.round()  # ties: identical texts score alike
            for r in rows:
                r.hacked = rng.random() < 0.4
            zones = hooks.oracle_ranked(cfg, rows, train.route(cfg, gates[a], scores, rows, step, None), step)
            counts[a] = _counts(zones, rows)
        assert all(c == counts["routeA"] for c in counts.values()), counts
        if step and not knobs["warmup"]:  # past warm-up: the step rule's exact numbers
            n_route, n_keep = step_counts(n_prompts * n_student, q_lo, q_hi)
            assert (counts["routeA"]["student", "route"], counts["routeA"]["student", "keep"]) == (n_route, n_keep)


def test_step_counts_are_the_rounded_fractions_and_never_overlap():
    assert step_counts(8, 0.25, 0.75) == (2, 2)
    assert step_counts(6, 0.25, 0.75) == (2, 2)  # 1.5 rounds up on both sides
    assert step_counts(10, 0.1, 0.7) == (3, 1)
    assert step_counts(3, 0.5, 0.5) == (1, 2)  # the route count yields where both round up
    for n in range(0, 40):
        for q_lo in (0.0, 0.1, 0.25, 0.5):
            for q_hi in (0.5, 0.75, 1.0):
                n_route, n_keep = step_counts(n, q_lo, q_hi)
                assert 0 <= n_route and 0 <= n_keep and n_route + n_keep <= n


@pytest.mark.parametrize("family,seed", [("placeboA", 0), ("placeboV", 3)])
def test_an_antithetic_pair_routes_complementary_rows(vact, family, seed):
    """+h and −h of one draw rank the rows in opposite orders: at symmetric fractions the rows one
    routes the other keeps and both absorb the same; at any fractions −h routes the bottom of +h's
    ranking. The draws are seeded by (k, run seed): other draws and other seeds are other directions."""
    plus, minus = (directions.gate_direction(arms.draw_name(family, 3, s), vact, seed, 1) for s in "pn")
    assert all(torch.equal(plus[m], -minus[m]) for m in plus)
    feats = {m: torch.randn(40, 3, generator=torch.Generator().manual_seed(seed + i)) for i, m in enumerate(plus)}
    rows = _rows(8, 3, 2)
    for q_lo, q_hi in ((0.25, 0.75), (0.1, 0.6)):
        zones = {}
        for s, d in (("p", plus), ("n", minus)):
            cfg = _cfg(arms.draw_name(family, 3, s), seed, q_lo=q_lo, q_hi=q_hi, warmup=0)
            zones[s] = train.route(cfg, train.new_gate(cfg), directions.score(feats, d), rows, 0, None)
        for src in ("student", "teacher"):
            idx = [i for i, r in enumerate(rows) if r.source == src]
            z = {s: [zones[s][i] for i in idx] for s in "pn"}
            routed = {s: {i for i, zz in zip(idx, z[s]) if zz == "route"} for s in "pn"}
            kept = {s: {i for i, zz in zip(idx, z[s]) if zz == "keep"} for s in "pn"}
            assert routed["p"] and not routed["p"] & routed["n"]
            if q_lo == 1 - q_hi:  # complements within the cut: route and keep swap, absorb stays
                assert routed["n"] == kept["p"] and kept["n"] == routed["p"]
            else:
                scores = directions.score(feats, plus)
                bottom = sorted(idx, key=lambda i: float(scores[i]))[:len(routed["n"])]
                assert routed["n"] == set(bottom)
    other = directions.gate_direction(arms.draw_name(family, 4, "p"), vact, seed, 1)
    reseeded = directions.gate_direction(arms.draw_name(family, 3, "p"), vact, seed + 1, 1)
    assert not any(torch.allclose(plus[m], other[m]) for m in plus)
    assert not any(torch.allclose(plus[m], reseeded[m]) for m in plus)
    # placeboV's Haar direction has v_grad's shape and reads the probe gradient, as routeV does
    assert arms.space(arms.draw_name("placeboV", 1, "n")) == "grad" and arms.space("placeboA1n") == "act"


def test_the_config_refuses_a_matched_control_without_the_step_rule_and_a_draw_without_its_twin():
    ok = config.Params(train=config.Train(arms=["none", "routeV", "uniform", "nll", "oracleMatched", "placeboV1p",
                                                "placeboV1n", "placeboV7p", "placeboV7n"], yoked=[]),
                       gate=config.Gate(cut_rule="step", yoke_to=[]))
    assert "placeboV7n" in ok.run_arms
    with pytest.raises(ValueError, match=r"\['uniform'\] need gate.cut_rule step"):
        config.Params(train=config.Train(arms=["routeV", "uniform"], yoked=[]), gate=config.Gate(yoke_to=[]))
    with pytest.raises(ValueError, match="'placeboV1p' is listed without its twin 'placeboV1n'"):
        config.Params(train=config.Train(arms=["routeV", "placeboV1p"], yoked=[]),
                      gate=config.Gate(cut_rule="step", yoke_to=[]))
    with pytest.raises(ValueError, match="'placeboV' runs as antithetic draws"):
        config.Train(arms=["routeV", "placeboV"], yoked=[])
    with pytest.raises(InputError, match="runs as its antithetic draws placeboA"):
        train.train_run(config.Params(), "placeboA", 0)
    assert arms.get("placeboV12n") is arms.REGISTRY["placeboV"] and arms.draw("routeV") is None
    run = train.train_run(config.Params(), "placeboV12n", 4)
    assert run.run == "placeboV12n-4" and run.name == "placeboV12n" and run.space == "grad"


def test_oracle_matched_is_an_oracle_at_the_gates_counts_and_ranks_by_the_label():
    """oracleMatched keeps the gate's per-source counts and routes hacked rows first (ties at
    random, seeded), keeps clean rows first; marked oracle; every other arm's zones pass untouched."""
    assert arms.get("oracleMatched").kind == "oracle" and arms.get("nll").kind == "label-free"
    rows = [SimpleNamespace(source="student" if i < 8 else "teacher", hacked=h)
            for i, h in enumerate([1, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1])]
    zones = ["route", "route", "keep", "keep", "absorb", "absorb", "absorb", "absorb",
             "route", "keep", "absorb", "absorb"]
    cfg = _cfg("oracleMatched", 0)
    out = hooks.oracle_ranked(cfg, rows, zones, 5)
    assert _counts(out, rows) == _counts(zones, rows)
    s_route = [i for i in range(8) if out[i] == "route"]
    assert len(s_route) == 2 and all(rows[i].hacked for i in s_route)  # 3 hacked rows, 2 route: a draw picks
    assert all(not rows[i].hacked for i in range(8) if out[i] == "keep")
    assert out[8:] == ["route", "keep", "absorb", "absorb"] or rows[[i for i in range(8, 12) if out[i] == "route"][0]].hacked
    picks = {tuple(hooks.oracle_ranked(cfg, rows, zones, step)) for step in range(20)}
    assert len(picks) > 1  # the tie among the hacked rows is broken by a draw, not by row order
    assert hooks.oracle_ranked(cfg, rows, zones, 5) == out  # seeded: a resumed run draws the same
    for a in ("routeV", "uniform", "nll", "placeboV1p", "oracle"):
        assert hooks.oracle_ranked(_cfg(a, 0), rows, zones, 5) == zones


def test_the_cosine_score_is_the_band_normalised_cosine_computed_directly():
    """gate.score cosine: each row's features and the direction concatenated over modules, their
    cosine, then (cos − c_clean) / |c_hack − c_clean|; dot stays Σ_m <f_m, v_m>."""
    g = torch.Generator().manual_seed(0)
    mods = [f"m{i}" for i in range(5)]
    v = directions.haar_direction({m: torch.zeros(3) for m in mods}, 2)
    feats = {m: torch.randn(7, 3, generator=g) * (1 + i) for i, m in enumerate(mods)}
    f = torch.cat([feats[m] for m in mods], 1).double()
    u = torch.cat([v[m] for m in mods]).double()
    cos = (f @ u) / (f.norm(dim=1) * u.norm())
    assert torch.allclose(directions.cosine(feats, v).double(), cos, atol=1e-6)
    band = (-0.1, 0.3)
    assert torch.allclose(directions.band_cosine(feats, v, band), (cos - band[0]) / (band[1] - band[0]), atol=1e-5)
    # a band the wrong way round keeps the direction's orientation: the width is unsigned
    assert torch.allclose(directions.band_cosine(feats, v, band[::-1]), (cos - band[1]) / (band[1] - band[0]), atol=1e-5)
    assert torch.allclose(directions.score(feats, v).double(), f @ u, atol=1e-5)
    # the norm matters: scaling one row's features changes its dot product, not its cosine
    big = {m: feats[m] * torch.tensor([10.0] + [1.0] * 6)[:, None] for m in mods}
    assert torch.allclose(directions.cosine(big, v), directions.cosine(feats, v), atol=1e-6)
    assert config.Gate().score == "dot"
    with pytest.raises(ValueError, match="gate.score cosine reads the pair band"):
        config.Params(pairs=config.Pairs(source="self"), gate=config.Gate(score="cosine"))


def test_the_pairs_features_are_saved_so_any_direction_reads_their_band(tmp_path):
    """extract_vact writes each space's pair features (hack.M, clean.M): scored with the direction they
    give the pair scores fit() logs, and scored with a Haar draw's ±h they give opposite bands."""
    from safetensors.torch import load_file

    from vgrout.pairs.pairs import Pair
    from vgrout.routing import extract
    g = torch.Generator().manual_seed(0)
    mods = ["a", "b"]
    h_hack = {m: torch.randn(4, 3, generator=g) + 1 for m in mods}
    h_clean = {m: torch.randn(4, 3, generator=g) for m in mods}
    pairs = [Pair(id=f"p{i}", mode="exit_code", tags=(), prompt="x", hack="h", clean="c", file="f.md", line=i)
             for i in range(4)]
    v, diag = extract.fit(h_hack, h_clean, pairs, n_haar=0)
    path = tmp_path / extract.PAIR_FEATURES.format(name="v_grad")
    extract.save_pair_features(path, h_hack, h_clean)
    f = load_file(str(path))
    side = lambda s: {m: f[f"{s}.{m}"] for m in mods}  # noqa: E731
    assert torch.allclose(directions.score(side("hack"), v), torch.tensor([p["hack_score"] for p in diag["pairs"]]))
    assert torch.allclose(directions.score(side("clean"), v), torch.tensor([p["clean_score"] for p in diag["pairs"]]))
    h = directions.haar_direction(v, arms.haar_seed(1, 0))
    band = lambda d: float(directions.score(side("hack"), d).mean() - directions.score(side("clean"), d).mean())  # noqa: E731
    assert band(h) == pytest.approx(-band({m: -x for m, x in h.items()}), abs=1e-6)
