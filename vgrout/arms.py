"""The arm registry: every arm of the experiment is one entry here, and nothing else in the
project compares an arm's name. train reads its gate policy, direction and refresh; evaluate,
aggregate and plots read its name, colour and role in the tables.

To add an arm: append one `Arm(...)` to ARMS, then list its name in params `train.arms`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from vgrout.io import InputError

BASE = "base"  # the base model's reference run (no adapter): evaluated once, not an arm

Policy = Literal["keep", "absorb", "quantile", "yoked"]
DirectionKind = Literal["v_act", "v_act_heldout", "haar", "random"]


@dataclass(frozen=True)
class Arm:
    name: str
    policy: Policy            # gate: keep / absorb pin every rollout; quantile routes by score;
                              # yoked routes and keeps as many rows of each source as gate.yoke_to did
                              # at the same step and seed, the top and bottom of its own ranking
    direction: DirectionKind  # what ranks rows: v_act, the heldout v_act, a Haar direction, or a
                              # seeded uniform draw (pinned arms still log v_act's scores)
    color: str                # the same colour in every figure
    description: str          # one line for the tables' notes
    refresh: bool = False     # re-extract the direction from the pairs when gate.refresh_every > 0
    ablation: bool = False    # a column of the A3 ablation
    students: Literal["absorb"] | None = None  # pin the student rows here: the policy gates the
                              # teacher-pool rows alone (needs gate.teacher_zone gate)

    @property
    def yoked(self) -> bool:
        return self.policy == "yoked"

    @property
    def gated(self) -> bool:
        """A gate (or a yoked copy of one) zones rows; keep and absorb pin every row."""
        return self.policy in ("quantile", "yoked")

    @property
    def gates_students(self) -> bool:
        """The gate decides the student rows (tgate pins them and gates the teacher rows alone)."""
        return self.gated and self.students is None

    @property
    def heldout(self) -> bool:
        """v_act from the pairs of the modes not in vact.heldout_modes (A5)."""
        return self.direction == "v_act_heldout"

    def direction_file(self, vact_dir: str | Path) -> Path:
        return Path(vact_dir) / ("v_act_heldout.safetensors" if self.heldout else "v_act.safetensors")


ARMS: tuple[Arm, ...] = (
    Arm("none", "keep", "v_act", "#4c78a8", "Dr.GRPO on the same adapter, no gate (every rollout kept)",
        ablation=True),
    Arm("routeA", "quantile", "v_act", "#e45756", "the method: v_act's score routes, keeps or absorbs",
        refresh=True, ablation=True),
    Arm("placebo", "yoked", "haar", "#b279a2",
        "gate.yoke_to's per-step route and keep counts (routeA by default), rows chosen by a Haar direction's ranking "
        "(seeded gate.placebo_seed + run seed)", ablation=True),
    Arm("random", "yoked", "random", "#9d755d",
        "gate.yoke_to's per-step route and keep counts (routeA by default), rows chosen uniformly at random (seeded)", ablation=True),
    Arm("haar", "quantile", "haar", "#bab0ac",
        "routeA's free-running gate with placebo's Haar direction (its routed mass is its own)"),
    Arm("absorb", "absorb", "v_act", "#72b7b2", "gate pinned to absorb: both blocks train on everything",
        ablation=True),
    Arm("heldout", "quantile", "v_act_heldout", "#f58518",
        "routeA with v_act from the pairs of the modes not in vact.heldout_modes", refresh=True),
    # routeA's teacher gate alone: separates filtering the pool's demonstrations from routing the
    # student's own rollouts (the collapse diagnosis, rounds 4 and 6)
    Arm("tgate", "quantile", "v_act", "#e7ba52",
        "routeA's gate on the teacher-pool rows only; every student row absorbed (both blocks)",
        refresh=True, students="absorb"),
)
REGISTRY: dict[str, Arm] = {a.name: a for a in ARMS}
REFERENCE = REGISTRY["none"]  # every Δ is taken against it
METHOD = REGISTRY["routeA"]   # the arm A1 and A4 draw against the reference
PLACEBO = REGISTRY["placebo"]  # the yoked control (gate.yoke_to's counts, a Haar ranking): A2 takes every Δ against it too


def require_teacher_gate(arms, teacher_zone: str, n_teacher: int | None = None) -> None:
    """An arm that pins its student rows (tgate) is its teacher gate and nothing else: without
    gate.teacher_zone gate, or with no teacher-pool rows (train.mix 0), it would silently be absorb."""
    pinned = [a.name for a in arms if a.students]
    if pinned and teacher_zone != "gate":
        raise ValueError(f"arm(s) {pinned} gate the teacher-pool rows alone: they need gate.teacher_zone gate, not "
                         f"{teacher_zone}")
    if pinned and n_teacher == 0:
        raise ValueError(f"arm(s) {pinned} gate the teacher-pool rows alone, and train.mix 0 leaves no teacher row")


def get(name: str) -> Arm:
    if name not in REGISTRY:
        raise InputError(f"arm '{name}' unknown; valid: {', '.join(REGISTRY)} (vgrout/arms.py)")
    return REGISTRY[name]


def register(arm: Arm) -> Arm:
    """Add an arm at run time (tests, experiments in a notebook); the registry is ARMS otherwise."""
    if arm.name in REGISTRY or arm.name == BASE:
        raise InputError(f"arm '{arm.name}' is already registered")
    REGISTRY[arm.name] = arm
    return arm


def order(names) -> list[str]:
    """Registry order first, then any unregistered names sorted (tables and legends)."""
    names = list(dict.fromkeys(names))
    return [a for a in REGISTRY if a in names] + sorted(a for a in names if a not in REGISTRY)


BASE_COLOR, OTHER_COLOR = "#54a24b", "#79706e"


def color(name: str) -> str:
    return REGISTRY[name].color if name in REGISTRY else BASE_COLOR if name == BASE else OTHER_COLOR
