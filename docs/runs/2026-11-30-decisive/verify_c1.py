"""C1's verdict again, from the files committed in this record alone: what a reader with a clone can check without
the returned tarballs that assemble.py reads (they are kept beside the repository, not in it).

    python docs/runs/2026-11-30-decisive/verify_c1.py [RECORD_DIR]

RECORD_DIR (default: this folder) holds the session folders sA-B/ (each run's per_mode_deploy.json.gz,
deploy_samples.csv.gz, eval_curve.json.gz, steps.jsonl.gz, config.json; the base in the first session's base/) and
verdict/summary.json. The runs are laid out as the aggregate reads them (metrics/runs/RUN, runs/train/RUN) in a
temporary folder, and the project's own claims code decides C1 under plans/decisive.yaml: the same function the
aggregate stage calls (vgrout.analysis.claims.verdicts), on the deploy cells, each run's recorded plan hash and gate
cut rule, and the base run. C1 reads no score band, rollout or activation (its tests are deploy hack and solve), so
the runs' gate inputs are not needed (tables.load_run gate_inputs False). Prints each of summary.json's claim_C1
values beside the recomputed one; exits 1 if any differs.
"""
from __future__ import annotations

import gzip
import json
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO))

from vgrout.analysis import plan as plan_file  # noqa: E402
from vgrout.analysis.claims import (ClaimData, recorded_cut_rule, recorded_plan, summary_entry,  # noqa: E402
                                    verdicts, withheld_modes)
from vgrout.analysis.tables import load_run, load_tables  # noqa: E402
from vgrout.arms import BASE  # noqa: E402

PLAN = REPO / "plans" / "decisive.yaml"
METRIC_FILES = ("per_mode_deploy.json", "deploy_samples.csv", "eval_curve.json", "steps.jsonl")  # gzipped here


def lay_out(record: Path, work: Path) -> list[str]:
    """Every run of every session folder under work/metrics/runs and work/runs/train; the base from the first
    session (the plan's base). Returns the run names, the base first."""
    sessions = sorted(p for p in record.glob("s*-*") if p.is_dir())
    if not sessions:
        raise SystemExit(f"{record}: no session folder sA-B")
    run_dirs = [p for session in sessions for p in sorted(session.iterdir())
                if p.is_dir() and (p / "config.json").exists()]
    runs = [p.name for p in run_dirs]
    if len(set(runs)) != len(runs):
        raise SystemExit(f"{record}: a run is in two session folders")
    for run_dir in run_dirs:
        _unzip(run_dir, work / "metrics" / "runs" / run_dir.name, METRIC_FILES)
        (work / "runs" / "train" / run_dir.name).mkdir(parents=True)
        shutil.copy(run_dir / "config.json", work / "runs" / "train" / run_dir.name / "config.json")
    _unzip(sessions[0] / "base", work / "metrics" / "runs" / BASE, METRIC_FILES[:2])
    return [BASE] + runs


def _unzip(src: Path, dest: Path, names) -> None:
    dest.mkdir(parents=True)
    for name in names:
        if not (src / f"{name}.gz").exists():
            raise SystemExit(f"{src / name}.gz: missing")
        (dest / name).write_bytes(gzip.decompress((src / f"{name}.gz").read_bytes()))


def recompute(record: Path) -> dict:
    """summary.json's claim_C1, recomputed from the record's committed files."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        names = lay_out(record, work)
        metrics_root, runs_root = work / "metrics" / "runs", work / "runs" / "train"
        loaded = [load_run(metrics_root, runs_root, r, gate_inputs=False) for r in names]
        trained = [r.run for r in loaded if r.arm != BASE]
        data = ClaimData.of(load_tables(loaded), loaded, pd.DataFrame(), {},
                            withheld={r: withheld_modes(runs_root / r) for r in trained},
                            plan_hashes={r: recorded_plan(runs_root / r) for r in trained},
                            cut_rules={r: recorded_cut_rule(runs_root / r) for r in trained})
        plan = plan_file.load(PLAN)
        return summary_entry(verdicts(plan, plan_file.identify(PLAN), data)["C1"])


def main(record: Path = HERE) -> int:
    recorded = json.loads((record / "verdict" / "summary.json").read_text())["claim_C1"]
    again = recompute(record)
    differ = sorted(k for k in set(recorded) | set(again) if recorded.get(k) != again.get(k))
    for key in sorted(set(recorded) | set(again)):
        print(f"{'DIFFERS ' if key in differ else ''}{key}: recorded {recorded.get(key)!r}, again {again.get(key)!r}")
    print(f"C1 from the committed files: {again['status']}; "
          + (f"{len(differ)} value(s) differ from verdict/summary.json" if differ else "equal to verdict/summary.json"))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else HERE))
