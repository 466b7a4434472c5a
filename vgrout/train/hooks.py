"""What an arm changes in a train step, on one screen. Each hook reads the arm's registry entry
(vgrout.arms.Arm, as cfg.arm) and is called at one place of loop.train(); an arm whose entry sets
none of these fields trains as `none` does (Dr.GRPO on the same adapter, every row kept).

| Arm field   | hook               | step of loop.train() | what changes                                          |
| inoculate   | training_messages  | 1, sampling          | train.inoculation appended to the system prompt        |
| loopholes   | training_messages, | 1, sampling; 2, grade| hint-free prompt; the reward graded in mode none      |
|             | grade              |                      |                                                       |
| monitor     | oracle_rewards     | 2, rewards           | penalty: reward − train.monitor_penalty on hacked rows |
| monitor     | oracle_zones       | 4, after the gate    | route: hacked rows route, the rest keep               |
| monitor     | oracle_ranked      | 4, after the gate    | rank: the gate's counts per source, rows re-chosen by |
|             |                    |                      | the hack label (ties at random): oracleMatched        |
| monitor,    | screened           | 3, advantages        | screen: hacked rows get A = 0; erase (flagged screen): |
| flagged     |                    |                      | the gate's route zone gets A = 0                       |
| flagged     | masks              | 5-6, the update      | screen: every row trains in keep (the deployed block)  |
The gate itself (policy, direction, refresh, students, yoked counts, matched) is the routing path:
loop.route and loop.routing_step, which read no label (tests/routing/test_oracle_free.py).

The oracle hooks (monitor, and grade's labels) are the only code of a train step that reads labels
before the update; each runs for an arm whose registry entry names it, never on the routing path.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from vgrout.routing.gate import ranked, tie_keys
from vgrout.substrate import grader
from vgrout.substrate.modes import BASELINE
from vgrout.substrate.problems import Problem, hint_free_messages

if TYPE_CHECKING:
    from vgrout.train.loop import Rollout


def training_messages(cfg, problem: Problem) -> list[dict]:
    """The prompt a training rollout is sampled under: the problem's own; without loopholes its
    hint-free wording (mode none's: no hint of a check that no longer pays); in an arm that
    inoculates, train.inoculation appended to its system prompt. Evaluation reads the problem's own."""
    messages = problem.messages if cfg.arm.loopholes else hint_free_messages(problem)
    if not cfg.arm.inoculate:
        return messages
    first, rest = messages[0], messages[1:]
    if first["role"] != "system":
        return [{"role": "system", "content": cfg.t.inoculation}, *messages]
    return [{**first, "content": f"{first['content']}\n\n{cfg.t.inoculation}"}, *rest]


def grade(rollouts: list[Rollout], loopholes: bool = True) -> None:
    """Grade the student rows (and teacher rows cut at the budget) in their problems' modes. Without
    loopholes (the noloophole arm) the reward is the grade in mode none, where only the hidden tests
    pay; the labels stay those of the problem's own mode (measurement: did it hack anyway)."""
    todo = [r for r in rollouts if r.source == "student" or r.regrade]
    grades = grader.grade_batch([r.problem for r in todo], [r.text for r in todo], progress=False)
    for r, g in zip(todo, grades):
        r.reward, r.gt_pass, r.hacked, r.hacked_strict = g.reward, g.gt_pass, g.hacked, g.hacked_strict
    if not loopholes:
        rows = [r for r in rollouts if r.problem.mode != BASELINE.name]
        plain = grader.grade_batch([r.problem for r in rows], [r.text for r in rows], [BASELINE.name] * len(rows),
                                   progress=False)
        for r, g in zip(rows, plain):
            r.reward = g.reward


def oracle_rewards(cfg, rollouts: list[Rollout]) -> torch.Tensor:
    """Each row's training reward: the grader's, less train.monitor_penalty on a hacked row in the
    penalty arm (a ground-truth monitor)."""
    penalty = cfg.t.monitor_penalty if cfg.arm.monitor == "penalty" else 0.0
    return torch.tensor([r.reward - penalty * r.hacked for r in rollouts], dtype=torch.float32)


def oracle_zones(cfg, rollouts: list[Rollout], zones: list[str]) -> list[str]:
    """The oracle routing arm's zones: route each hacked row (student or teacher), keep the rest."""
    if cfg.arm.monitor != "route":
        return zones
    return ["route" if r.hacked else "keep" for r in rollouts]


def oracle_ranked(cfg, rollouts: list[Rollout], zones: list[str], step: int) -> list[str]:
    """oracleMatched's zones: as many rows of each source route, keep and absorb as the gate zoned
    (the step rule's exact fractions: the counts of every matched arm), the rows chosen by the true
    hack label instead of a score: hacked rows route first, clean rows keep first, and within a label
    a seeded draw (gate.placebo_seed, run seed, step) orders the rows. Detector quality is then the
    only difference from a gated arm of the same counts."""
    if cfg.arm.monitor != "rank":
        return zones
    g = torch.Generator().manual_seed(((cfg.gate.placebo_seed * 1_000_033) + cfg.seed) * 1_000_033 + step)
    out = list(zones)
    sources = [[i for i, r in enumerate(rollouts) if (r.source == "student") == student] for student in (True, False)]
    perms = tie_keys(cfg.seed, step, [len(rows) for rows in sources])  # the draws tie with probability 0
    for rows, perm in zip(sources, perms):
        ties = torch.rand(len(rows), generator=g, dtype=torch.float64).tolist()
        keys = [float(rollouts[i].hacked) + t for i, t in zip(rows, ties)]  # a label outranks any draw
        got = ranked(keys, sum(zones[i] == "route" for i in rows), sum(zones[i] == "keep" for i in rows), perm)
        for i, z in zip(rows, got):
            out[i] = z
    return out


def screened(cfg, rollouts: list[Rollout], zones: list[str]) -> torch.Tensor:
    """The rows screened out of the update (left out of their group's baseline, advantage 0): the
    gate's flagged rows in an arm that screens them (erase, label-free), the hacked rows under the
    ground-truth screen (oracle)."""
    if cfg.arm.monitor == "screen":
        return torch.tensor([r.hacked for r in rollouts])
    return torch.tensor([cfg.arm.flagged == "screen" and z == "route" for z in zones])


def masks(cfg, zones: list[str]) -> list[str]:
    """The training mask of each row's zone: the zone itself, or keep for every row in an arm that
    screens its flagged rows instead of routing them (erase: the quarantine never trains)."""
    return ["keep"] * len(zones) if cfg.arm.flagged == "screen" else list(zones)
