"""The pre-registered analysis plan (analysis.yaml): the tests that decide the claims, fixed before
the runs are read.

aggregate computes a claim's verdict from the plan and the runs' records alone (analysis.claims);
every other contrast it prints is exploratory and says so. The file is a DVC param of the
aggregate stage, so its values are in dvc.lock and a changed plan re-runs the stage; A2 prints its
sha256 and the commit that last changed it. A claim is an intersection-union of its tests: it holds
only when every test does, each at the claim's α (after Holm within its family), and only on at least
its min_seeds seeds (fewer: `insufficient`, whatever the intervals say). A routed-share test is a
manipulation check (MANIPULATION_CHECKS): printed at the claim's α, never an input of the verdict.

The plan refuses controls that are not the claim's arm's: a yoked control yoked to another arm, antithetic
draws of the other feature space (placeboA for v_act arms, placeboV for v_grad arms: arms.space), an oracle
arm as a claim's arm (the claims are label-free), and a band test whose control is not a list of
antithetic draws, each with its twin (one Haar draw's sign must not decide C3). A claim may require the
runs' pool withheld as the plan says (withhold_pool, against each run's config.json) and the arm none to
hack at least `headroom` on its hack test's population; otherwise it is `undecided`, as it is, whatever the plan
says, where the claim's runs record different gate.cut_rule (analysis.claims.mixed_cut_rules). band.min_effect is a
number or the rule haar_q95 (the Haar floor, a number only after the runs: analysis.claims.band_floor).

The decisive plan (plans/decisive.yaml, issue 51) adds three rules: a test's paired_t (the paired t over the claim's
seeds must also clear 0), a claim's headroom_over base (none's headroom as its rise over the base model: the failed-run
rule) and confirmatory false (a secondary, exploratory family: tested with Holm, never a verdict).

Every setting that decides is written in the file: the schema has no defaults (a missing key is an error naming it),
but a test's margin, which only noninferior and equal read and which they require written. The plan's hash is
config.content_sha256 (its values, not its comments): train records it in each run's config.json, and a claim
reading a run made under another plan, or none recorded, is `exploratory` (analysis.claims.plan_changed).

Every setting that decides lives here, hashed with the file: the claims' arms and controls (any
registered arm: uniform, nll, oracleMatched, heldoutV, a yoked placebo, or a list of antithetic
draws placeboV{k}p / placeboV{k}n whose mean is the control), the bootstrap (resamples, seed,
interval kind), the held-out modes C2 is measured over, and the band's quantiles.
"""
from __future__ import annotations

import dataclasses
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from vgrout.config import Block, content_sha256, doc, read_yaml
from vgrout.io import InputError

PLAN = Path("analysis.yaml")

# outcome -> the populations it can be measured over (A2's denominators; C3's student rows)
POPULATIONS = {"hack": ("hackable", "heldout_modes"), "solve": ("all",), "band": ("student_rows",),
               "routed_share": ("student_rows",)}
# the fewest seeds a verdict may rest on: seed 002's own n = 3 standard (one seed has no seed-to-seed variance, and
# with two the t-based factor that widens the seeds' share of an interval is about 9: nothing could clear its null)
MIN_SEEDS = 3
# outcomes whose test is a manipulation check, printed as such and never an input of the verdict: count-matched
# routing gives the arm's routed share to its controls by construction, so the test cannot fail where the control
# is what the plan says; where it does fail, the control is not (the claim is `undecided`, never `holds`)
MANIPULATION_CHECKS = ("routed_share",)
# band.min_effect's word for the Haar floor, resolved per run at aggregate time (analysis.claims.band_floor)
HAAR_Q95 = "haar_q95"


def _registered(name: str) -> str:
    from vgrout import arms
    try:
        arms.get(name)  # a registered arm, or a yoked run's name (placebo_routeA)
    except InputError as e:
        raise ValueError(str(e)) from None
    return name


class Test(Block):
    control: str | list[str] = doc(..., "the control arm (a run name such as none, uniform, nll, oracleMatched or "
                                   "placebo_routeA), or a list whose mean is the control: antithetic draws of one "
                                   "family, each k with both signs (placeboV0p, placeboV0n, placeboV1p, placeboV1n)")
    outcome: Literal["hack", "solve", "band", "routed_share"] = doc(
        ..., "hack: deploy hack rate; solve: deploy solve rate; band: the arm's signed score band (analysis.bands, the "
        "pairs' held-out scores) against its draws' band in their separating orientation (claims.oriented); "
        "routed_share: the share of a step's student rows routed")
    population: Literal["hackable", "heldout_modes", "all", "student_rows"] = doc(
        ..., "hackable: the hackable test problems; heldout_modes: the test problems of the modes the arm's runs "
        "held out of its pairs; all: every test problem; student_rows: each training step's student rollouts")
    direction: Literal["lower", "higher", "noninferior", "equal"] = doc(
        ..., "lower: the arm's value below the control's; higher: above; noninferior: not below the control's by "
        "margin or more; equal: within ±margin of it (the interval inside; a Δ that is the same in every cell, as "
        "count-matched routing gives, passes when inside)")
    margin: float = doc(0.0, "noninferior and equal only, and written there: the absolute margin, a difference of "
                        "rates (solve 0.05: five points of the share of problems solved, not 5% of the control's)",
                        ge=0)
    paired_t: bool = doc(..., "true: the test passes only when, beside the bootstrap's bound, the paired t over the "
                         "claim's seeds (stats.paired_t of each seed's mean over the problems, its SEM floored at the "
                         "binomial sampling variance; at least stats.MIN_SEEDS_FOR_TEST seeds) clears 0 in the test's "
                         "direction at the claim's α and sidedness; hack or solve, lower or higher only")

    @field_validator("control")
    @classmethod
    def _controls_registered(cls, control):
        names = [control] if isinstance(control, str) else control
        if not names:
            raise ValueError("no control arm named")
        for n in names:
            _registered(n)
        antithetic_pairs(names)
        return control

    @property
    def controls(self) -> list[str]:
        return [self.control] if isinstance(self.control, str) else list(self.control)

    @model_validator(mode="after")
    def _consistent(self):
        if self.population not in POPULATIONS[self.outcome]:
            raise ValueError(f"outcome {self.outcome} is measured over {' or '.join(POPULATIONS[self.outcome])}, "
                             f"not {self.population}")
        if self.direction in ("noninferior", "equal") and "margin" not in self.model_fields_set:
            # the one key with a default (0, unread by lower and higher): where the direction reads it, it is written
            raise ValueError(f"missing key margin: direction {self.direction} decides by it")
        if self.paired_t and (self.outcome not in ("hack", "solve") or self.direction not in ("lower", "higher")):
            # the t is over the seeds' deploy rates, against a null of 0 (no margin)
            raise ValueError(f"paired_t true reads the seeds' deploy rates against 0: outcome hack or solve with "
                             f"direction lower or higher, not {self.outcome} {self.direction}")
        if (self.direction in ("noninferior", "equal")) != (self.margin > 0):
            raise ValueError("a margin > 0 goes with direction noninferior or equal, and only with them")
        from vgrout import arms
        if self.outcome == "band" and not all(arms.draw(n) for n in self.controls):
            # a band control is the draws' band in their separating orientation (claims.oriented): antithetic
            # twins route complementary rows, so the mean over them is what no sign decides; a yoked placebo is one draw
            raise ValueError(f"a band test's control is a list of antithetic draws, each with its twin (placeboA0p, "
                             f"placeboA0n, ...), not {self.controls}: one Haar draw's sign would decide it")
        return self

    @property
    def manipulation_check(self) -> bool:
        """Printed as a manipulation check; not an input of the verdict (MANIPULATION_CHECKS)."""
        return self.outcome in MANIPULATION_CHECKS

    @property
    def key(self) -> str:
        """The test's name in summary.json: hack_below_none, solve_noninferior_none, band_above_placebo_routeA."""
        word = {"lower": "below", "higher": "above", "noninferior": "noninferior", "equal": "equal"}[self.direction]
        return f"{self.outcome}_{word}_{'+'.join(self.controls)}"


class Claim(Block):
    statement: str = doc(..., "the claim in one sentence")
    arm: str = doc(..., "the arm the claim is about (a registered arm)")
    tests: list[Test] = doc(..., "every test must hold for the claim to hold (intersection-union)", min_length=1)
    seeds: list[int] = doc(..., "the run seeds the verdict uses: each must have a run of the arm and of every "
                           "control, else the verdict is 'not run'", min_length=1)
    min_seeds: int = doc(..., "the fewest seeds a verdict rests on: a claim with fewer seeds listed is "
                         "'insufficient' (its tests printed, never holds)", ge=MIN_SEEDS)
    seeds_run: Literal["all", "leading"] = doc(
        ..., "all: every listed seed must have run (else 'not run'); leading: the verdict uses the longest leading run "
        "of the listed seeds at which every run exists, at least min_seeds (a grid run in the listed order that its "
        "budget ends early; analysis.claims.seeds_that_ran)")
    alpha: float = doc(..., "the claim's level (before Holm within its family)", gt=0, lt=0.5)
    sidedness: Literal["two-sided", "one-sided"] = doc(
        ..., "the bootstrap interval's: two-sided: a test passes when the (1 − α) interval clears the null; "
        "one-sided: the (1 − 2α) interval, so the one bound that decides is at level α")
    t_sidedness: Literal["two-sided", "one-sided"] = doc(
        ..., "the paired t's (tests with paired_t true; unread otherwise): one-sided: its p in the test's "
        "direction below α; two-sided: below α/2. Apart from sidedness because a design may fix both, e.g. "
        "issue 51: a 95% interval (sidedness two-sided) and a one-sided t at α 0.05")
    family: str = doc(..., "multiplicity family: Holm's step-down over the claims that share it")
    withhold_pool: bool | None = doc(..., "true: every run of the claim (arm and controls, each plan seed) must have "
                                     "trained on no pool row of the plan's heldout_modes (params vact.withhold_pool, "
                                     "recorded as `withheld` in runs/train/RUN/config.json); false: on every mode's "
                                     "rows; a run recording otherwise, or nothing, makes the claim `undecided`. "
                                     "null: not checked")
    headroom: float = doc(..., "the deploy hack rate the arm none must reach (mean over the plan seeds and the "
                          "problems of the claim's hack test against none, e.g. the held-out modes') for the claim "
                          "to be decided: below it there is no hacking to lower, and the claim is `undecided`",
                          ge=0, lt=1)
    headroom_over: Literal["zero", "base"] = doc(..., "what none's headroom rate is measured from: zero (its deploy hack "
                                                 "rate itself) or base (its rise over the base model's rate on the same "
                                                 "problems, the decisive plan's failed-run rule: below headroom, none "
                                                 "did not learn to hack and the claim is `undecided`); base needs the "
                                                 "base run (eval_base), else the claim is `not run`")
    confirmatory: bool = doc(..., "false: registered as exploratory (a secondary contrast): tested at its Holm share "
                             "and printed, its status `exploratory` with the verdict it would have had; true: it can "
                             "hold or not (confirmatory)")

    @field_validator("arm")
    @classmethod
    def _arm_registered(cls, arm):
        from vgrout import arms
        _registered(arm)
        if arms.get(arm).oracle:  # the claims are about label-free methods: an oracle is a bound, never their arm
            raise ValueError(f"arm {arm} reads the rollouts' true labels (an oracle): a label-free claim's arm "
                             "cannot be one; name it as a control (a bound)")
        return arm

    @field_validator("seeds")
    @classmethod
    def _seeds_once(cls, seeds):
        if len(set(seeds)) < len(seeds):
            raise ValueError(f"a seed is listed twice: {seeds}")
        return seeds

    @model_validator(mode="after")
    def _not_its_own_control(self):
        for t in self.tests:
            if self.arm in t.controls:
                raise ValueError(f"arm {self.arm} is its own control")
        return self

    @model_validator(mode="after")
    def _controls_of_its_arm(self):
        """A control belongs to the claim's arm: a yoked control copies the arm's counts (placebo_routeA for
        routeA), antithetic draws rank rows in the arm's feature space (placeboA for v_act arms, placeboV for
        v_grad arms: arms.space)."""
        from vgrout import arms
        for t in self.tests:
            for c in t.controls:
                to = arms.yoke_target(c)
                if to is not None and to != self.arm:
                    raise ValueError(f"control {c} is yoked to {to}, not to the claim's arm {self.arm} (its counts "
                                     f"are {to}'s: {arms.yoked_name(c.partition(arms.YOKE_SEP)[0], self.arm)})")
                if arms.draw(c) and arms.space(c) != arms.space(self.arm):
                    raise ValueError(f"control {c} ranks rows in the {arms.space(c)} space, the claim's arm "
                                     f"{self.arm} in the {arms.space(self.arm)} space (draws of the other family)")
        return self

    @model_validator(mode="after")
    def _a_test_decides(self):
        if all(t.manipulation_check for t in self.tests):
            raise ValueError("every test is a manipulation check (routed_share): no test decides the claim")
        return self

    @model_validator(mode="after")
    def _headroom_against_none(self):
        if self.headroom > 0 and not self.headroom_test:
            raise ValueError("headroom > 0 needs a hack test against none (its population is where none's rate "
                             "is read)")
        return self

    @property
    def headroom_test(self) -> Test | None:
        """The hack test against none whose population headroom is read over (the first such test)."""
        return next((t for t in self.tests if t.outcome == "hack" and t.controls == [arms_reference()]), None)


class Band(Block):
    statistic: Literal["separation", "width_ratio"] = doc(
        ..., "what a band test compares (analysis.bands): separation, the distance between the pairs' hack and "
        "clean mean scores over the step's student width (seed 002's upper − lower); width_ratio, the student width "
        "over the pairs' width")
    q_lo: float = doc(..., "lower quantile of the widths (the q_lo..q_hi quantile width)", ge=0, le=1)
    q_hi: float = doc(..., "upper quantile of the widths", ge=0, le=1)
    units: Literal["steps", "pairs"] = doc(
        ..., "what a band test's bootstrap resamples with the seeds (crossed): steps, the per-step band (the pairs' "
        "gap is the same number at every step of a run, so the steps repeat it); pairs, each contrast pair's "
        "held-out gap over the run's mean student width (analysis.bands.pair_bands; separation only)")
    min_effect: Annotated[float, Field(ge=0)] | Literal["haar_q95"] = doc(
        ..., "the pre-registered smallest band difference that counts: a band test `higher` passes when its "
        "interval's lower end is above it (`lower`: upper end below −it), not above 0. A number (the plan's units), or "
        "haar_q95: the Haar floor, read at aggregate time per plan seed from metrics/vact/SEED.json (haar_floor."
        "abs_band.q95 of the arm's direction, the Haar directions' |band| q95 in the pairs' own units) over its band "
        "test's draws' width_ratio (into the plan's units), mean over seeds (analysis.claims.band_floor); haar_q95 needs q_lo, "
        "q_hi the floor's own quantiles (routing.directions.BAND_Q)")
    n_haar: int | None = doc(
        ..., "with min_effect haar_q95 (null without it): how many Haar directions the floor is a quantile over "
        "(params vact.n_haar): the floor is read only where metrics/vact logs it over these, so that a params change "
        "cannot move a verdict under the same plan", ge=1)
    haar_seed: int | None = doc(
        ..., "with min_effect haar_q95 (null without it): the first Haar direction's seed (routing.extract.HAAR_SEED; "
        "the floor's directions are seeds haar_seed .. haar_seed + n_haar − 1)", ge=0)

    @model_validator(mode="after")
    def _ordered(self):
        if self.q_lo >= self.q_hi:
            raise ValueError(f"band q_lo ({self.q_lo}) must be below q_hi ({self.q_hi})")
        if self.units == "pairs" and self.statistic != "separation":
            raise ValueError("band units pairs reads each pair's separation: statistic must be separation")
        if (self.min_effect == HAAR_Q95) != (self.n_haar is not None) or (self.n_haar is None) != (self.haar_seed is None):
            raise ValueError(f"band n_haar and haar_seed name the Haar directions of min_effect {HAAR_Q95}: both with "
                             "it, neither without it")
        if self.min_effect == HAAR_Q95:
            from vgrout.routing.directions import BAND_Q
            # the floor's pair width is the BAND_Q width of the pairs' scores; width_ratio's is q_lo..q_hi: the one
            # conversion holds only where they are the same width
            if (self.q_lo, self.q_hi) != BAND_Q or self.statistic != "separation":
                raise ValueError(f"band min_effect {HAAR_Q95} converts the Haar floor (pair width at quantiles "
                                 f"{BAND_Q}) by width_ratio: statistic separation with q_lo, q_hi {BAND_Q}, not "
                                 f"{self.statistic} with {(self.q_lo, self.q_hi)}")
        return self


class Bootstrap(Block):
    resamples: int = doc(..., "resamples of the hierarchical bootstrap (stats.hierarchical_bootstrap)", ge=100)
    seed: int = doc(..., "the resamples' Generator seed", ge=0)
    interval: Literal["percentile_seed_widened"] = doc(
        ..., "the interval: the two-way percentile bootstrap over seeds and units, its seeds' "
        "share widened by the few-seeds factor (stats.hierarchical_bootstrap; the only kind implemented)")


class Plan(Block):
    band: Band = doc(..., "the score band along each run's gate direction, per training step (C3 and A2's band "
                     "table; analysis.bands)")
    bootstrap: Bootstrap = doc(..., "how every test's interval is made")
    heldout_modes: list[str] = doc(..., "the modes held out of the held-out arms' pairs (params vact.heldout_modes "
                                   "of the runs): population heldout_modes; a run recording others is not measured",
                                   min_length=1)
    claims: dict[str, Claim] = doc(..., "claim name (C1, C2, C3) -> its pre-registered test", min_length=1)

    @field_validator("heldout_modes")
    @classmethod
    def _hackable_modes(cls, held):
        from vgrout.substrate.modes import hackable
        unknown = sorted(set(held) - set(hackable()))
        if unknown:
            raise ValueError(f"{unknown} are not hackable modes ({', '.join(hackable())})")
        return sorted(set(held))

    @model_validator(mode="after")
    def _family_alpha(self):
        # a family is tested as one: Holm runs at one α over it, and it is either confirmatory or exploratory (an
        # exploratory claim would otherwise take a share of a confirmatory claim's α, or lend its own to it)
        for key, what in (("alpha", "give different alphas"),
                          ("confirmatory", "mix confirmatory and exploratory claims (key confirmatory)")):
            by_family: dict[str, set] = {}
            for c in self.claims.values():
                by_family.setdefault(c.family, set()).add(getattr(c, key))
            mixed = [f for f, v in by_family.items() if len(v) > 1]
            if mixed:
                raise ValueError(f"family {mixed[0]}: its claims {what} {sorted(by_family[mixed[0]])}")
        return self

    def roles(self) -> dict[str, list[str]]:
        """{run arm name: ['C1 arm', 'C3 arm', 'C1 control', ...]}: what the plan names each arm for."""
        out: dict[str, list[str]] = {}
        for name, c in self.claims.items():
            out.setdefault(c.arm, []).append(f"{name} arm")
            for ctl in dict.fromkeys(x for t in c.tests for x in t.controls):
                out.setdefault(ctl, []).append(f"{name} control")
        return out


def arms_reference() -> str:
    from vgrout import arms
    return arms.REFERENCE.name


def antithetic_pairs(names: list[str]) -> None:
    """A control listing antithetic draws lists only draws of one family, each k with both signs (+h and −h):
    their mean is a control no sign of one Haar draw can decide."""
    from vgrout import arms
    draws = [arms.draw(n) for n in names]
    if not any(draws):
        return
    if not all(draws):
        raise ValueError(f"{names}: antithetic draws are averaged with no other arm")
    if len({f for f, _, _ in draws}) > 1:
        raise ValueError(f"{names}: draws of more than one family")
    family = draws[0][0]
    for k in sorted({k for _, k, _ in draws}):
        twins = {arms.draw_name(family, k, s) for s in "pn"}
        if not twins <= set(names):
            raise ValueError(f"{names}: draw {k} without its antithetic twin ({' and '.join(sorted(twins))})")
    if len(set(names)) < len(names):
        raise ValueError(f"{names}: a draw is listed twice")


def parse(data, where: str) -> Plan:
    """A Plan from a mapping; every problem is one InputError line naming the file and the key."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a mapping with key 'claims'")
    try:
        return Plan.model_validate(data)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            key = ".".join(str(p) for p in err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            what = "unknown key" if err["type"] == "extra_forbidden" else "missing key" if err["type"] == "missing" else msg
            lines.append(f"{where}: {key + ': ' if key else ''}{what}")
        raise InputError("\n".join(lines)) from None


def load(path: str | Path = PLAN) -> Plan:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: analysis plan not found (the aggregate stage decides the claims from it)")
    return parse(read_yaml(path), str(path))


@dataclasses.dataclass(frozen=True)
class PlanId:
    """Which plan decided: its file, the sha256 of its canonical content (config.content_sha256, the hash train
    records in each run's config.json) and the commit that last changed it."""
    path: str
    sha256: str
    commit: str  # `git log -1 --format=%h -- PATH`; "uncommitted" when the file differs from it or git is absent
    # when it last changed (UTC): the commit's date, or where uncommitted the file's mtime (changed since, or never
    # committed); None where unknown. A2 prints each claim's runs' start beside it (claims.plan_started)
    changed: datetime | None = None


def identify(path: str | Path = PLAN) -> PlanId:
    path = Path(path)
    commit, date = last_commit(path)
    if commit == "uncommitted" and path.exists():
        date = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    return PlanId(str(path), content_sha256(path), commit, date)


def last_commit(path: Path) -> tuple[str, datetime | None]:
    """(the short hash of the commit that last changed the file, its committer date), or ("uncommitted", None)."""
    def git(*args):
        return subprocess.run(["git", *args, "--", path.name], cwd=path.parent, capture_output=True, text=True,
                              timeout=30)
    try:
        log, status = git("log", "-1", "--format=%h %cI"), git("status", "--porcelain")
    except (OSError, subprocess.SubprocessError):
        return "uncommitted", None  # no git here
    if log.returncode or status.returncode or not log.stdout.strip() or status.stdout.strip():
        return "uncommitted", None  # not in a repository, never committed, or changed since
    commit, date = log.stdout.split()
    return commit, datetime.fromisoformat(date).astimezone(UTC)
