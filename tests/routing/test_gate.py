"""routeA gate: warm-up, quantile cuts from past scores only, pinned arms, state round trip."""
import pytest
import torch

from vgrout import arms
from vgrout.io import InputError
from vgrout.routing.gate import Gate as _Gate
from vgrout.routing.gate import tie_keys


def Gate(policy="quantile", q_lo=0.25, q_hi=0.75, buffer_size=64, warmup=4, cut_rule="buffer"):
    return _Gate(policy=policy, q_lo=q_lo, q_hi=q_hi, buffer_size=buffer_size, warmup=warmup, cut_rule=cut_rule)


def test_warmup_is_all_absorb_then_cuts_from_past_scores():
    g = Gate(policy="quantile", q_lo=0.25, q_hi=0.75, buffer_size=100, warmup=8)
    assert g.decide([5.0, -5.0, 0.0]) == ["absorb"] * 3
    assert g.decide(list(range(5))) == ["absorb"] * 5  # buffer had 3 < 8 before this batch
    past = [5.0, -5.0, 0.0, 0, 1, 2, 3, 4]
    lo, hi = (float(torch.quantile(torch.tensor(past, dtype=torch.float64), q)) for q in (0.25, 0.75))
    zones = g.decide([hi + 1, lo - 1, (lo + hi) / 2])
    assert zones == ["route", "keep", "absorb"]
    assert g.cuts == pytest.approx((lo, hi))


def test_batch_scores_do_not_set_their_own_cuts():
    # A batch far above everything seen routes entirely: the cuts come from the past.
    g = Gate(policy="quantile", buffer_size=64, warmup=4)
    g.decide([0.0, 0.1, 0.2, 0.3])
    assert g.decide([10.0, 11.0, 12.0]) == ["route"] * 3


def test_ring_buffer_forgets_old_scores():
    g = Gate(policy="quantile", buffer_size=4, warmup=4)
    g.decide([100.0] * 4)
    g.decide([0.0] * 4)  # pushes the 100s out
    assert list(g.buffer) == [0.0] * 4
    assert g.decide([1.0]) == ["route"]


@pytest.mark.parametrize("arm,zone", [("none", "keep"), ("absorb", "absorb")])
def test_pinned_arms(arm, zone):
    g = Gate(policy=arms.get(arm).policy, warmup=0)
    assert g.decide([-9.0, 0.0, 9.0]) == [zone] * 3
    assert len(g.buffer) == 3  # scores are still recorded for diagnostics


def test_state_round_trip_continues_identically():
    g = Gate(policy="quantile", buffer_size=16, warmup=4)
    g.decide(torch.randn(10, generator=torch.Generator().manual_seed(0)))
    h = _Gate.from_state_dict(g.state_dict())
    batch = torch.randn(6, generator=torch.Generator().manual_seed(1))
    assert g.decide(batch) == h.decide(batch)
    assert g.state_dict() == h.state_dict()


def test_bad_config_is_an_error():
    with pytest.raises(ValueError, match="quantiles"):
        Gate(q_lo=0.8, q_hi=0.2)
    with pytest.raises(InputError, match="arm 'bogus' unknown"):
        arms.get("bogus")


def test_step_cut_rule_routes_a_fixed_share_of_each_batch():
    g = Gate(cut_rule="step", warmup=0)
    hot, cold = [10.0 + i for i in range(8)], [float(i) for i in range(8)]
    for batch in (cold, hot):  # the same shares whatever the batch's level
        zones = g.decide(batch, list(range(8)))
        assert zones.count("route") == 2 and zones.count("keep") == 2
    b = Gate(cut_rule="buffer", warmup=0, buffer_size=8)
    b.decide(cold)
    assert b.decide(hot) == ["route"] * 8  # the buffer rule follows content


def test_rank_routes_the_top_and_keeps_the_bottom_at_the_given_counts():
    g = Gate(policy="yoked")
    scores = [0.3, -2.0, 5.0, 1.0, 0.0, 4.0]
    ties = tie_keys(0, 0, [6])[0]
    assert g.rank(scores, n_route=2, n_keep=1, ties=ties) == ["absorb", "keep", "route", "absorb", "absorb", "route"]
    assert g.rank(scores, 0, 0, ties) == ["absorb"] * 6
    with pytest.raises(ValueError, match="exceed"):
        g.rank(scores, 4, 3, ties)
    with pytest.raises(ValueError, match="rank"):
        g.decide(scores)


def test_teacher_rows_get_their_own_gate_over_their_own_past_scores():
    """gate.teacher_zone gate: the teacher-pool rows are cut at the same quantiles of their own
    past scores, and the student cuts never see a teacher score. The pool here scores far above
    every student row: one shared buffer would route every teacher row."""
    from types import SimpleNamespace

    from vgrout import config
    from vgrout.train import loop as train
    gate = config.Gate(teacher_zone="gate", warmup=8, buffer_size=64)
    cfg = SimpleNamespace(arm=arms.get("routeA"), gate=gate, seed=0, yoke_log=None)
    g = train.new_gate(cfg)
    assert g.teacher is not None and g.teacher.teacher is None
    rows = [SimpleNamespace(source=s, prompt=f"p{i // 4}") for i, s in enumerate(["student", "student", "teacher",
                                                                                   "teacher"] * 4)]
    gen = torch.Generator().manual_seed(0)
    zones = []
    for step in range(12):
        scores = torch.randn(16, generator=gen, dtype=torch.float64)
        scores[2::4] += 10.0
        scores[3::4] += 10.0
        zones.append(train.route(cfg, g, scores, rows, step, None))
    assert all(s < 5 for s in g.buffer) and all(s > 5 for s in g.teacher.buffer)
    late = [z for step in zones[2:] for z, r in zip(step, rows) if r.source == "teacher"]
    assert {"keep", "absorb", "route"} <= set(late) and late.count("route") < len(late) / 2
    assert g.cuts[1] < 5 < g.teacher.cuts[0]
    # the teacher gate is saved and restored with the student's
    h = _Gate.from_state_dict(g.state_dict())
    assert h.teacher.state_dict() == g.teacher.state_dict()
    # a fixed teacher zone and a pinned arm build no teacher gate
    assert train.new_gate(SimpleNamespace(arm=arms.get("routeA"), gate=config.Gate(teacher_zone="absorb"))).teacher is None
    assert train.new_gate(SimpleNamespace(arm=arms.get("none"), gate=gate)).teacher is None


def test_tgate_gates_the_teacher_rows_alone_and_absorbs_every_student_row():
    """tgate: routeA's teacher gate with the student rows pinned to absorb. The teacher rows reach
    every zone past warm-up, exactly as routeA's teacher gate sends them (same knobs, same scores);
    no student row is ever kept or routed. Without gate.teacher_zone gate it is an error naming
    the key, in the config and at the gate."""
    from types import SimpleNamespace

    from vgrout import config
    from vgrout.train import loop as train
    gate = config.Gate(teacher_zone="gate", warmup=8, buffer_size=64)
    rows = [SimpleNamespace(source=s, prompt=f"p{i // 4}") for i, s in enumerate(["student", "student", "teacher",
                                                                                   "teacher"] * 4)]
    cfgs = {a: SimpleNamespace(arm=arms.get(a), gate=gate, seed=0, yoke_log=None) for a in ("tgate", "routeA")}
    gates = {a: train.new_gate(c) for a, c in cfgs.items()}
    assert gates["tgate"].policy == "absorb" and gates["tgate"].teacher.policy == "quantile"
    gen = torch.Generator().manual_seed(0)
    zones = {a: [] for a in cfgs}
    for step in range(12):
        scores = torch.randn(16, generator=gen, dtype=torch.float64)
        for a in cfgs:
            zones[a].append(train.route(cfgs[a], gates[a], scores, rows, step, None))
    student = {z for step in zones["tgate"] for z, r in zip(step, rows) if r.source == "student"}
    assert student == {"absorb"}
    teacher = {a: [z for step in zones[a] for z, r in zip(step, rows) if r.source == "teacher"] for a in cfgs}
    assert {"keep", "absorb", "route"} <= set(teacher["tgate"]) and teacher["tgate"] == teacher["routeA"]
    # the routeA student rows did get routed: the pin is tgate's, not the scores'
    assert "route" in {z for step in zones["routeA"] for z, r in zip(step, rows) if r.source == "student"}
    with pytest.raises(ValueError, match="need gate.teacher_zone gate, not absorb"):
        train.new_gate(SimpleNamespace(arm=arms.get("tgate"), gate=config.Gate(teacher_zone="absorb")))
    with pytest.raises(ValueError, match=r"\['tgate'\] gate the teacher-pool rows alone"):
        config.Params(train=config.Train(arms=["none", "tgate"], yoked=[]), gate=config.Gate(teacher_zone="keep"))
    assert config.Params(train=config.Train(arms=["none", "tgate"], yoked=[])).gate.teacher_zone == "gate"


def test_settings_where_a_gate_would_silently_decide_nothing_are_refused():
    """tgate with no teacher rows is absorb; gate.center with one row of a gated source per group
    scores that row 0 at every step. Each is refused by name; the same settings pass where nothing
    is gated by them."""
    from vgrout import config
    with pytest.raises(ValueError, match="train.mix 0 leaves no teacher row"):
        config.Params(train=config.Train(arms=["none", "tgate"], yoked=[], mix=0.0, baseline="group"))
    config.Params(train=config.Train(arms=["none", "routeA"], yoked=[], mix=0.0, baseline="group"))
    one_teacher = dict(group_size=4, mix=0.25)  # 1 teacher and 3 student rows per group
    with pytest.raises(ValueError, match="one teacher row"):
        config.Params(train=config.Train(arms=["none", "routeA"], yoked=[], **one_teacher), gate=config.Gate(center=True))
    config.Params(train=config.Train(arms=["none", "routeA"], yoked=[], **one_teacher),
                  gate=config.Gate(center=True, teacher_zone="absorb"))  # the teacher row is not gated
    config.Params(train=config.Train(arms=["none", "absorb"], yoked=[], **one_teacher), gate=config.Gate(center=True))
    with pytest.raises(ValueError, match="one student row"):
        config.Params(train=config.Train(arms=["none", "routeA"], yoked=["placebo"], group_size=4, mix=0.75),
                      gate=config.Gate(center=True, teacher_zone="absorb"))


def test_a_yoked_arm_refuses_a_step_whose_row_counts_are_not_its_own():
    """The yoked counts are matched per source: a run of another group makeup is an error that
    names the source, never a silent copy of counts meant for other rows."""
    from vgrout.train import loop as train
    yoke = {0: {"student": (8, 2, 2), "teacher": (8, 2, 1)}}
    assert train.yoke_counts(yoke, 0, {"student": 8, "teacher": 8}, "log") == {"student": (2, 2), "teacher": (2, 1)}
    with pytest.raises(InputError, match="step 0 gated 8 teacher rows, this run has 4"):
        train.yoke_counts(yoke, 0, {"student": 8, "teacher": 4}, "log")
    with pytest.raises(InputError, match="no step 1"):
        train.yoke_counts(yoke, 1, {"student": 8, "teacher": 8}, "log")


def test_which_rows_each_arm_gates_is_one_property():
    """Arm.gated (a gate or a yoked copy zones the rows) and Arm.gates_students (it decides the
    student rows too): train's teacher gate and A7's note on pinned arms both read these."""
    from types import SimpleNamespace

    from vgrout import config
    from vgrout.train import loop as train
    for arm in arms.REGISTRY.values():
        assert arm.gated == (arm.policy in ("quantile", "yoked"))
        assert arm.gates_students == (arm.gated and arm.students is None)
        has_teacher_gate = train.new_gate(SimpleNamespace(arm=arm, gate=config.Gate(teacher_zone="gate"))).teacher is not None
        assert has_teacher_gate == arm.gated
    assert {a.name for a in arms.REGISTRY.values() if not a.gates_students} == {"none", "absorb", "tgate", "oracle", "penalty", "screen", "inoculate",
                                                                                  "noloophole"}


def test_a_yoked_arm_runs_once_per_arm_it_copies_and_each_gated_arm_has_its_own_placebo():
    """gate.yoke_to lists the gated arms the yoked arms copy; each pair is one run (placebo_tgate), whose
    counts come from that arm's step log of the seed, and whose Δ is the matched control of that arm."""
    from vgrout import config
    from vgrout.train import loop as train
    p = config.Params(train=config.Train(arms=["none", "routeA", "tgate", "absorb"], yoked=["placebo", "random"]),
                      gate=config.Gate(yoke_to=["routeA", "tgate"]))
    assert p.run_arms == ["none", "routeA", "tgate", "absorb", "placebo_routeA", "placebo_tgate", "random_routeA",
                          "random_tgate"]
    assert arms.get("placebo_tgate") is arms.PLACEBO and arms.yoke_target("placebo_tgate") == "tgate"
    assert arms.yoke_target("routeA") is None
    # the matched control: a gated arm's own placebo, a yoked run's sibling; nothing for arms that gate nothing
    assert [arms.placebo_for(a) for a in ("routeA", "tgate", "random_tgate", "placebo_tgate", "none", "absorb")] == \
        ["placebo_routeA", "placebo_tgate", "placebo_tgate", "placebo_tgate", None, None]
    assert arms.order(["placebo_tgate", "absorb", "placebo_routeA", "routeA", "random_routeA", "none"]) == \
        ["none", "routeA", "placebo_routeA", "placebo_tgate", "random_routeA", "absorb"]
    assert arms.color("placebo_tgate") == arms.PLACEBO.color
    run = train.train_run(p, "placebo_tgate", 3)
    assert run.run == "placebo_tgate-3" and run.yoke_log.endswith("metrics/runs/tgate-3/steps.jsonl")
    assert train.train_run(p, "routeA", 3).yoke_log is None
    with pytest.raises(InputError, match="a yoked arm runs as placebo_TO"):
        train.train_run(p, "placebo", 3)
    for bad in ("placebo_none", "routeA_tgate", "placebo_placebo", "placebo_nope"):
        with pytest.raises(InputError, match=f"arm '{bad}' unknown"):
            arms.get(bad)
    for to in ("absorb", "erase"):  # erase gates by score but screens its flagged rows: a placebo would route them
        with pytest.raises(ValueError, match=f"gate.yoke_to '{to}' does not route by score"):
            config.Params(train=config.Train(arms=["none", "routeA", to]), gate=config.Gate(yoke_to=[to]))
    # a placebo yoked to routeV ranks its rows by a Haar direction of routeV's space (the probe gradient)
    assert arms.space("placebo_routeV") == arms.space("routeV") == "grad" and arms.space("placebo_routeA") == "act"
    assert arms.get("routeA").direction_file("v", arms.space("placebo_routeV")).name == "v_grad.safetensors"
    with pytest.raises(ValueError, match="gate.yoke_to 'heldout' is not in train.arms"):
        config.Params(train=config.Train(arms=["none", "routeA"]), gate=config.Gate(yoke_to=["routeA", "heldout"]))
    with pytest.raises(ValueError, match="'placebo_routeA' names a yoked run"):
        config.Train(arms=["none", "routeA"], yoked=["placebo_routeA"])
    with pytest.raises(InputError, match="reads as a yoked run's"):
        arms.register(arms.Arm("my_arm", "keep", "v_act", "#000000", "x"))
