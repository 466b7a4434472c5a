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

Ties are broken by `tie_keys`: a seeded random permutation of each source's rows, fixed per (run
seed, step), so no row wins a tie by its position (the student rows come first, the deploy-sampled
ones first among them), every arm of a seed breaks the step's ties alike, and an antithetic pair's
−h run, which reverses the permutation too (`reverse`), ranks every row in exactly the reverse order
of its +h twin, ties included: at symmetric fractions the rows one routes the other keeps.

Oracle-free rule: `decide` takes scores (and the tie permutation) and nothing else. This module imports nothing
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

    def decide(self, scores: torch.Tensor | list[float], ties: list[float] | None = None) -> list[str]:
        """Zones for a batch of rollout scores. Cuts come from PAST scores only (buffer), or from
        the batch's own ranks (step: `ties`, the batch's tie keys from `tie_keys`, order rows of
        equal score; required there); then the batch joins the buffer. Pinned policies still record
        scores (for diagnostics)."""
        scores = _floats(scores)
        if self.policy == "yoked":
            raise ValueError("a yoked gate takes its counts: call rank(scores, n_route, n_keep, ties)")
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
                if ties is None:
                    raise ValueError("gate.cut_rule step ranks the batch: decide(scores, ties) needs the tie keys "
                                     "(gate.tie_keys)")
                zones = ranked(scores, *step_counts(len(scores), self.q_lo, self.q_hi), ties)
            else:
                zones = ["route" if s > hi else "keep" if s < lo else "absorb" for s in scores]
            self.cuts = (lo, hi)
        self.buffer.extend(scores)
        return zones

    def rank(self, scores: torch.Tensor | list[float], n_route: int, n_keep: int, ties: list[float]) -> list[str]:
        """The yoked gate: route the n_route highest-scoring rows, keep the n_keep lowest, absorb
        the rest; the counts come from another arm's step (matched routing mass), the choice of
        rows from this arm's own scores. Ties are broken by `ties` (`tie_keys`), never by row order."""
        scores = _floats(scores)
        zones = ranked(scores, n_route, n_keep, ties)
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


def ranked(scores: list[float], n_route: int, n_keep: int, ties: list[float]) -> list[str]:
    """Route the n_route highest-scoring rows, keep the n_keep lowest, absorb the rest, the rows
    ordered by (score, tie key): rows of equal score by their keys (`tie_keys`: a seeded
    permutation, never row order), so the counts are exactly the ones asked for and the order is a
    total one, which negating both the scores and the keys reverses exactly."""
    if n_route + n_keep > len(scores):
        raise ValueError(f"yoked counts route {n_route} + keep {n_keep} exceed the {len(scores)} rows")
    ties = _floats(ties)
    if len(ties) != len(scores) or len(set(ties)) < len(ties):
        raise ValueError(f"tie keys must be {len(scores)} distinct numbers, one per row (gate.tie_keys); got {ties}")
    order = sorted(range(len(scores)), key=lambda i: (scores[i], ties[i]))
    zones = ["absorb"] * len(scores)
    for i in order[:n_keep]:
        zones[i] = "keep"
    for i in order[len(scores) - n_route:]:
        zones[i] = "route"
    return zones


TIE_STREAM = 0x7AE5  # tie_keys' generator: a stream of its own, apart from the uniform arm's draws


def tie_keys(seed: int, step: int, sizes: list[int], reverse: bool = False) -> list[list[float]]:
    """The tie keys of one step's sources (sizes: the rows of each, e.g. [students, teachers]): for
    each source a random permutation of 0..n−1, from one generator seeded by (run seed, step) alone,
    so every arm of a seed at a step with the same row counts gets the same keys (and a resumed run
    the keys of an uninterrupted one). reverse: the keys negated, for the −h run of an antithetic
    pair, whose scores are +h's negated: the order by (score, key) is then exactly reversed, ties
    and all. Reads nothing but the seed, the step and the counts."""
    g = torch.Generator().manual_seed((TIE_STREAM * 1_000_037 + seed) * 1_000_037 + step)
    sign = -1.0 if reverse else 1.0
    return [[sign * float(k) for k in torch.randperm(n, generator=g).tolist()] for n in sizes]


def _floats(scores: torch.Tensor | list[float]) -> list[float]:
    return [float(s) for s in (scores.tolist() if torch.is_tensor(scores) else scores)]
