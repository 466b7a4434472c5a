"""The routeA gate: a one-score classifier with a reject option.

Route is the confident-hack prediction, keep the confident-clean prediction, and the
absorb band between the two cuts is abstention. The cuts are quantiles of a ring buffer
of the run's past scores (label-free), because the hack base rate moves during training.
With gate.teacher_zone `gate` the teacher-pool rows get a gate of their own (`teacher`): the same
quantiles over their own past scores, since the pool's completions are another distribution than
the student's.

Cut rule step routes and keeps exact fractions of each batch (`step_counts`: a function of the row
count and the quantiles alone, never of the scores), so any two arms of the same fractions route
and keep the same number of rows of each source at every step: a count-matched control (uniform,
Haar, NLL ranks) runs beside the arm it controls instead of after it (the yoked mode copies a
buffer-rule arm's counts from its step log).

Oracle-free rule: `decide` takes scores and nothing else. This module imports nothing
that grades, rewards or labels rollouts (tests/routing/test_oracle_free.py checks both).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import torch

POLICIES = ("quantile", "keep", "absorb", "yoked")  # each arm picks one (vgrout.arms)
CUT_RULES = ("buffer", "step")


@dataclass
class Gate:
    # no defaults: the one default of each knob is params' gate block (vgrout/config.py)
    policy: str
    q_lo: float
    q_hi: float
    buffer_size: int
    warmup: int
    cut_rule: str       # buffer: quantiles of past scores; step: exact fractions of the batch's own rows
    buffer: deque = field(default_factory=deque)
    cuts: tuple[float, float] | None = None  # the cuts of the last decision (None in warm-up)
    teacher: "Gate | None" = None  # the teacher-pool rows' own gate (gate.teacher_zone gate), else None

    def __post_init__(self):
        if self.policy not in POLICIES:
            raise ValueError(f"gate policy '{self.policy}' unknown; valid: {POLICIES}")
        if self.cut_rule not in CUT_RULES:
            raise ValueError(f"gate cut rule '{self.cut_rule}' unknown; valid: {CUT_RULES}")
        if not 0.0 <= self.q_lo <= self.q_hi <= 1.0:
            raise ValueError(f"gate quantiles need 0 <= q_lo <= q_hi <= 1, got {self.q_lo}, {self.q_hi}")
        if self.warmup > self.buffer_size:
            raise ValueError(f"gate.warmup ({self.warmup}) exceeds gate.buffer_size ({self.buffer_size})")
        self.buffer = deque(self.buffer, maxlen=self.buffer_size)

    def decide(self, scores: torch.Tensor | list[float]) -> list[str]:
        """Zones for a batch of rollout scores. Cuts come from PAST scores only; then the
        batch joins the buffer. Pinned policies still record scores (for diagnostics)."""
        scores = _floats(scores)
        if self.policy == "yoked":
            raise ValueError("a yoked gate takes its counts: call rank(scores, n_route, n_keep)")
        if self.policy != "quantile":
            zones = [self.policy] * len(scores)
            self.cuts = None
        elif len(self.buffer) < self.warmup or not scores or (self.cut_rule == "buffer" and not self.buffer):
            zones = ["absorb"] * len(scores)
            self.cuts = None
        else:
            # buffer: the batch's cuts come from the past only, so a batch of hackier rollouts
            # routes more; step: from the batch itself, so the shares are fixed
            ref = list(self.buffer) if self.cut_rule == "buffer" else scores
            past = torch.tensor(ref, dtype=torch.float64)
            lo, hi = (float(torch.quantile(past, q)) for q in (self.q_lo, self.q_hi))
            if self.cut_rule == "step":
                # by rank, not by comparing with the cuts: ties or the quantile's interpolation
                # would let the counts depend on the scores, and two arms would no longer match
                zones = ranked(scores, *step_counts(len(scores), self.q_lo, self.q_hi))
            else:
                zones = ["route" if s > hi else "keep" if s < lo else "absorb" for s in scores]
            self.cuts = (lo, hi)
        self.buffer.extend(scores)
        return zones

    def rank(self, scores: torch.Tensor | list[float], n_route: int, n_keep: int) -> list[str]:
        """The yoked gate: route the n_route highest-scoring rows, keep the n_keep lowest, absorb
        the rest; the counts come from another arm's step (matched routing mass), the choice of
        rows from this arm's own scores. Ties are broken by row order (stable sort)."""
        scores = _floats(scores)
        zones = ranked(scores, n_route, n_keep)
        self.cuts = None
        self.buffer.extend(scores)
        return zones

    def state_dict(self) -> dict:
        return {"policy": self.policy, "q_lo": self.q_lo, "q_hi": self.q_hi,
                "buffer_size": self.buffer_size, "warmup": self.warmup, "cut_rule": self.cut_rule,
                "buffer": list(self.buffer), "cuts": self.cuts,
                "teacher": self.teacher.state_dict() if self.teacher else None}

    @classmethod
    def from_state_dict(cls, sd: dict) -> "Gate":
        cuts = sd.get("cuts")
        return cls(policy=sd["policy"], q_lo=sd["q_lo"], q_hi=sd["q_hi"],
                   buffer_size=sd["buffer_size"], warmup=sd["warmup"], cut_rule=sd["cut_rule"],
                   buffer=deque(sd["buffer"]), cuts=tuple(cuts) if cuts else None,
                   teacher=cls.from_state_dict(sd["teacher"]) if sd.get("teacher") else None)


def step_counts(n: int, q_lo: float, q_hi: float) -> tuple[int, int]:
    """(n_route, n_keep) of a batch of n rows under cut rule step: the top (1 − q_hi)·n rows and the
    bottom q_lo·n, each rounded half up (8 rows at 0.25/0.75: 2 and 2; 6 rows: 2 and 2), the route
    count lowered where the two would overlap (q_lo = q_hi = 0.5 of an odd n)."""
    n_keep = math.floor(q_lo * n + 0.5 + 1e-9)
    n_route = min(math.floor((1 - q_hi) * n + 0.5 + 1e-9), n - n_keep)
    return n_route, n_keep


def ranked(scores: list[float], n_route: int, n_keep: int) -> list[str]:
    """Route the n_route highest-scoring rows, keep the n_keep lowest, absorb the rest; ties by
    row order (a stable sort), so the counts are exactly the ones asked for."""
    if n_route + n_keep > len(scores):
        raise ValueError(f"yoked counts route {n_route} + keep {n_keep} exceed the {len(scores)} rows")
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    zones = ["absorb"] * len(scores)
    for i in order[:n_keep]:
        zones[i] = "keep"
    for i in order[len(scores) - n_route:]:
        zones[i] = "route"
    return zones


def _floats(scores: torch.Tensor | list[float]) -> list[float]:
    return [float(s) for s in (scores.tolist() if torch.is_tensor(scores) else scores)]
