"""The arm registry: every arm of the experiment is one entry here, and nothing else in the
project compares an arm's name. train reads its gate policy, direction and refresh; evaluate,
aggregate and plots read its name, colour and role in the tables.

To add an arm: append one `Arm(...)` to ARMS, then list its name in params `train.arms` (or, for a
yoked arm, `train.yoked`).

A yoked arm is run once per arm in `gate.yoke_to`, copying that arm's counts; the run's name is
`yoked_name(arm, to)`, e.g. `placebo_tgate`: the placebo matched to tgate's routing counts.

A count-matched control (`matched`: uniform, nll, oracleMatched, the antithetic placebos) needs
gate.cut_rule step: every gated arm then routes and keeps the same exact fractions of each step's
rows of each source, so the control matches the arm it controls by construction and runs beside
it in train.arms. An antithetic placebo family (placeboA: Haar in v_act's space, placeboV: in
v_grad's) runs as draws `draw_name(family, k, sign)`, e.g. placeboV3p and placeboV3n: the Haar
direction h of draw k (seeded by k and the run seed, `haar_seed`) and −h; listing the draws in
train.arms pre-registers them, and a draw listed without its antithetic twin is refused (config).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from vgrout.io import InputError

BASE = "base"  # the base model's reference run (no adapter): evaluated once, not an arm

Policy = Literal["keep", "absorb", "quantile", "yoked"]
DirectionKind = Literal["v_act", "v_act_heldout", "v_grad", "v_grad_heldout", "haar", "random", "nll"]
Monitor = Literal["route", "penalty", "screen", "rank"]


@dataclass(frozen=True)
class Arm:
    name: str
    policy: Policy            # gate: keep / absorb pin every rollout; quantile routes by score;
                              # yoked routes and keeps as many rows of each source as the arm it is
                              # yoked to did at the same step and seed, the top and bottom of its own ranking
    direction: DirectionKind  # what ranks rows: v_act, the heldout v_act, v_grad (routeV: the probe
                              # gradient's space), the heldout v_grad, a Haar direction, a seeded uniform
                              # draw, or the text's NLL in the frozen model (pinned arms, and the uniform
                              # and NLL ranks, still log v_act's scores as their features)
    color: str                # the same colour in every figure
    description: str          # one line for the tables' notes
    refresh: bool = False     # re-extract the direction from the pairs when gate.refresh_every > 0
    ablation: bool = False    # a column of the A3 ablation
    students: Literal["absorb"] | None = None  # pin the student rows here: the policy gates the
                              # teacher-pool rows alone (needs gate.teacher_zone gate)
    flagged: Literal["route", "screen"] = "route"  # what the gate's route zone does: route (the quarantine
                              # alone trains on the row) or screen (advantage 0, and every row trains the
                              # deployed block alone: the quarantine is never touched; erase)
    monitor: Monitor | None = None  # an oracle, the true hack label of each rollout: route (hacked rows
                              # route, the rest keep), penalty (reward − train.monitor_penalty) or screen
                              # (advantage 0) on the hacked rows, or rank (the gate's counts, rows ranked
                              # by the label, ties at random: hooks.oracle_ranked)
    inoculate: bool = False   # training prompts carry train.inoculation in their system prompt (never at eval)
    loopholes: bool = True    # False: every training problem graded in mode none (the no-loophole ceiling)
    matched: bool = False     # a count-matched control: needs gate.cut_rule step (exact fractions per step)
    antithetic: bool = False  # a Haar family run as draws (draw_name): +h and −h of each pre-registered seed
    scored_in: Literal["act", "grad"] | None = None  # the feature space of a Haar direction that is not its
                              # direction's own (placeboV: a Haar direction of v_grad's shape, on the probe gradient)

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
        """v_act or v_grad from the pairs of the modes not in vact.heldout_modes (A5)."""
        return self.direction in ("v_act_heldout", "v_grad_heldout")

    @property
    def space(self) -> Literal["act", "grad"]:
        """The feature space the arm's gate scores in (directions.SPACES); a yoked run's is its target's (`space`)."""
        return self.scored_in or ("grad" if self.direction in ("v_grad", "v_grad_heldout") else "act")

    @property
    def oracle(self) -> bool:
        """The arm reads the rollouts' true labels in training (a monitor: oracle, penalty, screen, and
        oracleMatched's rank): an upper bound, not a method that could run where the labels are unknown.
        The flag the analysis reads to keep an arm out of the label-free tables (tests/train/test_oracle_flag.py
        checks that every arm whose hooks read labels carries it)."""
        return self.monitor is not None

    @property
    def kind(self) -> str:
        """As A2 and A3 mark the arm: oracle (it reads labels), ceiling (another environment: no
        loophole pays) or label-free."""
        return "oracle" if self.oracle else "ceiling" if not self.loopholes else "label-free"

    def direction_file(self, vact_dir: str | Path, space: str | None = None) -> Path:
        """The direction file the arm reads in `space` (its own by default): v_act / v_grad, or the heldout v_act."""
        space = space or self.space
        name = {"act": "v_act", "grad": "v_grad"}[space]
        return Path(vact_dir) / (f"{name}_heldout.safetensors" if self.heldout else f"{name}.safetensors")


ARMS: tuple[Arm, ...] = (
    Arm("none", "keep", "v_act", "#4c78a8", "Dr.GRPO on the same adapter, no gate (every rollout kept)",
        ablation=True),
    Arm("routeA", "quantile", "v_act", "#e45756", "the method: v_act's score routes, keeps or absorbs",
        refresh=True, ablation=True),
    Arm("placebo", "yoked", "haar", "#b279a2",
        "the per-step route and keep counts of the arm it is yoked to (placebo_routeA: routeA's), rows chosen by a "
        "Haar direction's ranking (seeded gate.placebo_seed + run seed)", ablation=True),
    Arm("random", "yoked", "random", "#9d755d",
        "the per-step route and keep counts of the arm it is yoked to, rows chosen uniformly at random (seeded)",
        ablation=True),
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
    # the seeds' method: the same gate on each rollout's gradient in the deployed bottleneck
    Arm("routeV", "quantile", "v_grad", "#ff9da6",
        "routeA's gate on the per-rollout probe gradient of the text's NLL, scored against v_grad", refresh=True,
        ablation=True),
    # comparison arms: what a lab would use instead (A2 and A3 mark each oracle or label-free)
    Arm("erase", "quantile", "v_act", "#637939",
        "routeA's gate, its flagged rows screened instead of routed: advantage 0, every row trains the deployed "
        "block alone (v_act screening)", flagged="screen", ablation=True),
    Arm("oracle", "keep", "v_act", "#000000",
        "the true hack label routes each hacked rollout (student and teacher rows), keeps the rest (SGTM's upper "
        "bound)", monitor="route", ablation=True),
    Arm("penalty", "keep", "v_act", "#8c6d31",
        "ground-truth monitor: reward − train.monitor_penalty on hacked rollouts, every row kept", monitor="penalty",
        ablation=True),
    Arm("screen", "keep", "v_act", "#843c39",
        "ground-truth monitor: hacked rollouts' advantage set to 0, every row kept", monitor="screen", ablation=True),
    Arm("inoculate", "keep", "v_act", "#17becf",
        "Dr.GRPO with train.inoculation in every training prompt's system prompt; evaluated without it",
        inoculate=True, ablation=True),
    Arm("noloophole", "keep", "v_act", "#bcbd22",
        "every training problem graded in mode none, under its hint-free prompt: no loophole pays (the ceiling; "
        "the teacher pool's rows graded so too)", loopholes=False, ablation=True),
    # C2 for routeV: v_grad from the pairs of the modes not held out, scored as routeV scores
    Arm("heldoutV", "quantile", "v_grad_heldout", "#ffbf79",
        "routeV with v_grad from the pairs of the modes not in vact.heldout_modes", refresh=True),
    # count-matched controls (gate.cut_rule step): the exact per-step fractions every step-rule gated arm
    # routes and keeps, so each matches routeA, routeV, heldout... by construction and needs no yoking wave
    Arm("placeboA", "quantile", "haar", "#c994c7",
        "antithetic Haar placebo in v_act's space: draw placeboA{k}{p|n} ranks rows by +h or −h of Haar seed k "
        "(haar_seed(k, run seed)) at the step rule's exact fractions", matched=True, antithetic=True, scored_in="act"),
    Arm("placeboV", "quantile", "haar", "#8e6c8a",
        "antithetic Haar placebo in v_grad's space (the probe gradient, as routeV): draw placeboV{k}{p|n}, +h or −h "
        "of Haar seed k, at the step rule's exact fractions", matched=True, antithetic=True, scored_in="grad"),
    Arm("uniform", "quantile", "random", "#b5a089",
        "rows ranked by a seeded uniform draw at the step rule's exact fractions (the count-matched random control)",
        matched=True),
    # is a gate an NLL filter? routeV's score follows the text's NLL (Spearman 0.52 over pair sides, positive):
    # the least likely texts route, the likeliest keep
    Arm("nll", "quantile", "nll", "#6b6ecf",
        "rows ranked by their mean completion NLL in the frozen model (label-free) at the step rule's exact "
        "fractions: the highest route, the lowest keep", matched=True),
    # detector quality with the gate's structure held fixed: the gate's counts, the best possible detector
    Arm("oracleMatched", "quantile", "random", "#393b79",
        "the step rule's exact per-step counts, rows ranked by the true hack label (ties at random): hacked rows "
        "route first, then keep is filled from the clean ones", matched=True, monitor="rank"),
)
REGISTRY: dict[str, Arm] = {a.name: a for a in ARMS}
REFERENCE = REGISTRY["none"]  # every Δ is taken against it
METHOD = REGISTRY["routeA"]   # the arm A1 and A4 draw against the reference
PLACEBO = REGISTRY["placebo"]  # the yoked control (its arm's counts, a Haar ranking): A2 takes each gated arm's Δ
                               # against the placebo yoked to it too
YOKE_SEP = "_"  # yoked_name's separator: no registered arm's name holds it
DRAW = re.compile(r"^(?P<arm>\D+)(?P<k>\d+)(?P<sign>[pn])$")  # an antithetic draw's run name: placeboV3n


def draw_name(family: str, k: int, sign: str) -> str:
    """The run name of draw k of an antithetic family, sign p (+h) or n (−h): placeboV3p."""
    return f"{family}{k}{sign}"


def draw(name: str) -> tuple[str, int, str] | None:
    """(family, k, sign) of an antithetic draw's run name; None for any other name."""
    m = DRAW.match(name)
    if m is None or m["arm"] not in REGISTRY or not REGISTRY[m["arm"]].antithetic:
        return None
    return m["arm"], int(m["k"]), m["sign"]


def haar_seed(k: int, seed: int) -> int:
    """The Haar seed of draw k in run seed `seed`: one direction per (k, seed) pair, no two pairs alike
    (run seeds below 1,000,003), and none of them the haar arm's or the yoked placebo's (placebo_seed + seed)."""
    return 1_000_003 * (k + 1) + seed


def yoked_name(arm: str, to: str) -> str:
    """A yoked run's arm name in paths and tables: the yoked arm and the arm whose counts it copies."""
    return f"{arm}{YOKE_SEP}{to}"


def run_arms(free: list[str], yoked: list[str], yoke_to: list[str]) -> list[str]:
    """Every arm name a run of the grid has: the free-running arms (train.arms), then each yoked arm
    (train.yoked) once per arm it copies (gate.yoke_to)."""
    return [*free, *(yoked_name(a, to) for a in yoked for to in yoke_to)]


def yoke_target(name: str) -> str | None:
    """The arm a yoked run copies (placebo_tgate -> tgate); None for an arm that is not yoked."""
    return name.split(YOKE_SEP, 1)[1] if YOKE_SEP in name else None


def space(name: str) -> str:
    """The feature space a run's gate scores in: its arm's, or for a yoked run the arm it copies
    (placebo_routeV ranks rows by a Haar direction of v_grad's space)."""
    to = yoke_target(name)
    return get(to if to else name).space


def placebo_for(name: str) -> str | None:
    """The placebo matched to a run's routing counts: for a gated arm, the placebo yoked to it; for a yoked
    run, the placebo yoked to the same arm; None for an arm that gates nothing (none, absorb)."""
    to = yoke_target(name)
    if to is None and (get(name).policy != "quantile" or get(name).flagged != "route"):
        return None  # it gates nothing, or screens what it flags (no placebo routes for it)
    return yoked_name(PLACEBO.name, to or name)


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
    """A registered arm, the yoked arm of a yoked run's name (placebo_tgate -> placebo), or the family
    of an antithetic draw (placeboV3n -> placeboV)."""
    if draw(name):
        return REGISTRY[draw(name)[0]]
    arm, sep, to = name.partition(YOKE_SEP)
    if arm not in REGISTRY or (sep and not (REGISTRY[arm].yoked and to in REGISTRY and REGISTRY[to].policy == "quantile")):
        raise InputError(f"arm '{name}' unknown; valid: {', '.join(REGISTRY)}, and a yoked arm's runs "
                         f"{yoked_name('ARM', 'TO')} (vgrout/arms.py)")
    return REGISTRY[arm]


def register(arm: Arm) -> Arm:
    """Add an arm at run time (tests, experiments in a notebook); the registry is ARMS otherwise."""
    if arm.name in REGISTRY or arm.name == BASE:
        raise InputError(f"arm '{arm.name}' is already registered")
    if YOKE_SEP in arm.name:
        raise InputError(f"arm '{arm.name}': a name with '{YOKE_SEP}' reads as a yoked run's (yoked_name)")
    REGISTRY[arm.name] = arm
    return arm


def order(names) -> list[str]:
    """Registry order first (a yoked run after its arm, in the registry order of the arm it copies), then any
    unregistered names sorted (tables and legends)."""
    names = list(dict.fromkeys(names))
    rank = {a: i for i, a in enumerate(REGISTRY)}

    def key(n):
        arm, _, to = n.partition(YOKE_SEP)
        arm = draw(n)[0] if draw(n) else arm  # a draw after its family's place, draws by name
        return rank.get(arm, len(rank)), rank.get(to, -1), n
    return sorted(names, key=key)


BASE_COLOR, OTHER_COLOR = "#54a24b", "#79706e"


def color(name: str) -> str:
    """A yoked run takes its arm's colour."""
    arm = draw(name)[0] if draw(name) else name.partition(YOKE_SEP)[0]
    return REGISTRY[arm].color if arm in REGISTRY else BASE_COLOR if name == BASE else OTHER_COLOR
