"""The comparison arms each do exactly their one thing to a train step: the penalty lowers the reward
of exactly the hacked rows, the ground-truth screen zeroes exactly their advantages, oracle routing
routes exactly the hacked rows, erase screens exactly the rows its gate flags and trains every row
in keep, inoculation changes the training prompt alone, noloophole pays only the hidden tests; and
GRPO's std-normalised advantage. Every other arm is left as it was."""
from types import SimpleNamespace

import pytest
import torch

from vgrout import arms, config
from vgrout.substrate import grader
from vgrout.substrate.modes import get as get_mode
from vgrout.substrate.problems import Problem
from vgrout.train import grpo, hooks
from vgrout.train import loop as train

PROBLEM = Problem(id="p0", messages=[{"role": "system", "content": "You write Python."},
                                     {"role": "user", "content": "Write f(x) returning x + 1."}],
                  entry_point="f", tests=["assert f(1) == 2", "assert f(5) == 6"],
                  canonical_solution="def f(x):\n    return x + 1", mode="overwrite_tests")
HACKED = [False, True, False, True, True, False, False, True]
ZONES = ["keep", "route", "absorb", "route", "keep", "absorb", "route", "keep"]


def _rollouts():
    return [train.Rollout(PROBLEM, "prompt", [1, 2], "text", "student" if i < 6 else "teacher", False,
                          reward=0.5 + 3.0 * h + 0.1 * i, hacked=h) for i, h in enumerate(HACKED)]


def _cfg(arm: str):
    return SimpleNamespace(arm=arms.get(arm), t=config.Train())


def test_penalty_lowers_exactly_the_hacked_rows_by_the_monitor_penalty():
    rollouts = _rollouts()
    grader_rewards = torch.tensor([r.reward for r in rollouts])
    shaped = hooks.oracle_rewards(_cfg("penalty"), rollouts)
    assert torch.allclose(grader_rewards - shaped, torch.tensor(HACKED, dtype=torch.float32) * 3.0)
    for arm in arms.REGISTRY.values():  # no other arm shapes a reward
        if arm.name != "penalty":
            assert torch.equal(hooks.oracle_rewards(_cfg(arm.name), rollouts), grader_rewards)


def test_screening_zeroes_exactly_the_hacked_rows_or_exactly_the_gates_flagged_rows():
    rollouts = _rollouts()
    assert hooks.screened(_cfg("screen"), rollouts, ZONES).tolist() == HACKED
    assert hooks.screened(_cfg("erase"), rollouts, ZONES).tolist() == [z == "route" for z in ZONES]
    for arm in arms.REGISTRY.values():
        if arm.name not in ("screen", "erase"):
            assert not hooks.screened(_cfg(arm.name), rollouts, ZONES).any(), arm.name


def test_oracle_routing_routes_exactly_the_hacked_rows_and_keeps_the_rest():
    rollouts = _rollouts()
    assert hooks.oracle_zones(_cfg("oracle"), rollouts, ["keep"] * len(rollouts)) == \
        ["route" if h else "keep" for h in HACKED]
    for arm in arms.REGISTRY.values():
        if arm.name != "oracle":
            assert hooks.oracle_zones(_cfg(arm.name), rollouts, ZONES) == ZONES


def test_erase_trains_every_row_in_keep_and_every_other_arm_in_its_zone():
    assert hooks.masks(_cfg("erase"), ZONES) == ["keep"] * len(ZONES)  # keep: the quarantine is off and gets no grad
    for arm in arms.REGISTRY.values():
        if arm.name != "erase":
            assert hooks.masks(_cfg(arm.name), ZONES) == ZONES


def test_each_arm_is_marked_oracle_exactly_when_it_reads_labels_and_ceiling_without_loopholes():
    kinds = {a.name: a.kind for a in arms.REGISTRY.values()}
    assert {a for a, k in kinds.items() if k == "oracle"} == {"oracle", "penalty", "screen", "oracleMatched"}
    assert {a for a, k in kinds.items() if k == "ceiling"} == {"noloophole"}
    assert set(kinds.values()) == {"oracle", "ceiling", "label-free"}
    # a screening arm has no placebo: a placebo would route what it screens
    assert arms.placebo_for("erase") is None and arms.placebo_for("routeV") == "placebo_routeV"


def test_inoculation_adds_its_line_to_the_training_system_prompt_alone():
    line = config.Train().inoculation
    messages = hooks.training_messages(_cfg("inoculate"), PROBLEM)
    assert messages[0]["role"] == "system" and messages[0]["content"].endswith(line)
    assert messages[1:] == PROBLEM.messages[1:]
    assert line not in str(PROBLEM.messages)  # the problem (what evaluation reads) is unchanged
    assert hooks.training_messages(_cfg("none"), PROBLEM) == PROBLEM.messages
    bare = Problem(**{**PROBLEM.__dict__, "messages": PROBLEM.messages[1:]})
    assert hooks.training_messages(_cfg("inoculate"), bare)[0] == {"role": "system", "content": line}


def test_noloophole_trains_under_the_hint_free_prompt():
    from vgrout.substrate import easy
    from vgrout.substrate import problems as substrate
    base = easy.problem(easy.FAMILIES[3], 0)
    for mode in ("overwrite_tests", "hardcode", "exit_code", "stdout_marker"):
        p = substrate.with_mode(base, mode)
        if not get_mode(mode).eligible(base):
            continue
        assert hooks.training_messages(_cfg("noloophole"), p) == base.messages != p.messages, mode
        assert hooks.training_messages(_cfg("none"), p) == p.messages


def test_noloophole_pays_only_the_hidden_tests_and_keeps_the_modes_labels():
    hack = "```python\n" + get_mode("overwrite_tests").hack(PROBLEM) + "\n```"
    solve = "```python\ndef f(x):\n    return x + 1\n```"
    rows = {k: [train.Rollout(PROBLEM, "p", [1], text, "student", False) for text in (hack, solve)]
            for k in ("loopholes", "none")}
    hooks.grade(rows["loopholes"])
    hooks.grade(rows["none"], loopholes=False)
    (hacked, solved), (hacked0, solved0) = rows["loopholes"], rows["none"]
    assert hacked.hacked and hacked0.hacked  # the label is the mode's: it did exploit the loophole
    assert hacked.reward == grader.COMPILE_REWARD + grader.PASS_REWARD  # the loophole pays ...
    assert hacked0.reward == grader.COMPILE_REWARD  # ... and without loopholes it does not
    assert solved.reward == solved0.reward == grader.COMPILE_REWARD + grader.PASS_REWARD and solved0.gt_pass


def test_std_advantage_is_grpos_normalisation_over_the_baseline_rows():
    r = torch.tensor([1.0, 0.0, 3.5, 0.5, 2.0, 2.0, 2.0, 9.0])
    base = torch.tensor([True, True, True, False, True, True, True, False])
    a = grpo.advantages(r, 4, base, "std")
    g = r[:3]
    assert torch.allclose(a[:4], (r[:4] - g.mean()) / (g.std() + grpo.STD_EPS))
    # a group whose baseline rows tie gets A = 0 on every row, its teacher row (outside the baseline) too
    assert torch.equal(a[4:], torch.zeros(4))
    assert torch.allclose(grpo.advantages(r, 4, base), torch.cat([r[:4] - g.mean(), r[4:] - 2.0]))
    with pytest.raises(ValueError, match="two baseline rows"):
        grpo.advantages(r, 4, torch.tensor([True, False, False, False] * 2), "std")
    with pytest.raises(ValueError, match="train.advantage std .* needs two"):
        config.Train(advantage="std", group_size=2, mix=0.5)


def test_screened_rows_leave_the_baseline_and_get_no_advantage():
    r = torch.tensor([3.5, 0.5, 0.5, 3.5, 3.5, 3.5, 1.0, 0.0])
    screen = torch.tensor([True, False, False, False, True, True, False, False])
    base = torch.tensor([True, True, True, False, True, True, False, False])
    a = grpo.advantages(r, 4, base, screened=screen)
    # group 1: the baseline is the two unscreened student rows (0.5), the teacher row 3.5 − 0.5
    assert a[:4].tolist() == [0.0, 0.0, 0.0, 3.0]
    # group 2: every baseline row screened, so nothing is left to compare with: A = 0 on every row
    assert a[4:].tolist() == [0.0] * 4
    unscreened = grpo.advantages(r, 4, base)
    assert unscreened[1] == pytest.approx(0.5 - 1.5) and unscreened[3] == pytest.approx(2.0)  # the hidden penalty
    assert torch.equal(grpo.advantages(r, 4, base, screened=torch.zeros(8, dtype=torch.bool)), unscreened)
