"""Where the pipeline's files live: every path a stage reads or writes, in one place. dvc.yaml
spells the same paths for DVC; tests/test_dvc_deps.py checks that the two agree."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# A run's per-sample eval grades, beside its per_mode_deploy.json (vgrout.eval.evaluate writes it,
# vgrout.analysis.contrasts' bootstrap reads it). csv, not jsonl: git tracks it, and a flat 8-column
# table is a third of the bytes.
DEPLOY_SAMPLES = "deploy_samples.csv"


def run_name(arm: str, seed: int) -> str:
    return f"{arm}-{seed}"


@dataclass(frozen=True)
class Layout:
    root: Path = Path(".")

    def _p(self, *parts) -> Path:
        return Path(self.root, *map(str, parts))

    # model, substrate, pairs, v_act, teacher pool
    @property
    def model(self) -> Path:
        return self._p("models", "student")

    @property
    def substrate(self) -> Path:
        return self._p("data", "substrate")

    @property
    def train_problems(self) -> Path:
        return self.substrate / "train.jsonl"

    @property
    def test_problems(self) -> Path:
        return self.substrate / "test.jsonl"

    @property
    def substrate_check(self) -> Path:
        return self._p("metrics", "substrate_check.json")

    @property
    def pairs(self) -> Path:
        return self._p("runs", "pairs", "pairs.json")

    @property
    def pairs_check(self) -> Path:
        return self._p("metrics", "pairs_check.json")

    def vact(self, seed: int) -> Path:
        return self._p("runs", "vact", seed)

    def pair_features(self, seed: int, name: str) -> Path:
        """The contrast pairs' features in the space of direction `name` (v_act, v_grad): keys hack.MODULE and
        clean.MODULE, [pairs, r]; any direction of that space scores them (the score band, analysis.bands)."""
        return self.vact(seed) / f"{name}_pair_features.safetensors"

    def vact_metrics(self, seed: int) -> Path:
        return self._p("metrics", "vact", f"{seed}.json")

    @property
    def pool(self) -> Path:
        return self._p("data", "pool", "pool.jsonl")

    @property
    def pool_metrics(self) -> Path:
        return self._p("metrics", "pool.json")

    # one run (`{arm}-{seed}`, or `base`): its checkpoints (DVC cache) and its metrics (git)
    @property
    def runs(self) -> Path:
        return self._p("runs", "train")

    def run(self, run: str) -> Path:
        return self.runs / run

    @property
    def run_metrics_root(self) -> Path:
        return self._p("metrics", "runs")

    def run_metrics(self, run: str) -> Path:
        return self.run_metrics_root / run

    def deploy_samples(self, run: str) -> Path:
        return self.run_metrics(run) / DEPLOY_SAMPLES

    def run_live(self, run: str) -> Path:
        """The run's DVCLive dir: metrics.json (the last step's values, for `dvc exp show`) and
        plots/metrics/GROUP/NAME.tsv (one curve per metric, for `dvc plots`)."""
        return self.run_metrics(run) / "live"

    @property
    def stale_root(self) -> Path:
        """Where a run's checkpoints and log go when a config change makes them unusable (kept)."""
        return self._p("runs", "stale")

    # aggregate
    @property
    def artifacts(self) -> Path:
        return self._p("metrics", "artifacts")

    @property
    def summary(self) -> Path:
        return self._p("metrics", "summary.json")

    @property
    def plan(self) -> Path:
        """The pre-registered analysis plan (vgrout.analysis.plan), a params file of the aggregate stage."""
        return self._p("analysis.yaml")

    @property
    def arm_metrics(self) -> Path:
        """One small json per arm (deploy hack over hackable problems, solve, their intervals): the
        only files `dvc metrics show`, `dvc metrics diff` and `dvc exp show` read."""
        return self._p("metrics", "arms")

    @property
    def plots(self) -> Path:
        return self._p("plots")
