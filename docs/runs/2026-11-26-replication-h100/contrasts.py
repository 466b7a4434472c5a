"""The Δ between arms that no placebo answers, from this run's committed per-run files, with A2's
statistics (vgrout.analysis.contrasts.contrasts), and A2 again with the tgate runs (tgate.sh) beside the
rest, in metrics/with_tgate/ (its charts, png/ and html/, and plot data are not committed). Run from the
repository root:
    python docs/runs/2026-11-26-replication-h100/contrasts.py"""
import gzip
import json
import shutil
import tempfile
from pathlib import Path

from vgrout.analysis import artifacts, contrasts, tables

HERE = Path(__file__).parent
PAIRS = [("absorb", "none"), ("routeA", "absorb"), ("heldout", "absorb"), ("routeA", "heldout"),
         ("tgate", "none"), ("tgate", "absorb"), ("routeA", "tgate")]  # tgate: tgate.sh, run after the rest

with tempfile.TemporaryDirectory() as tmp:
    root = Path(tmp)
    for run in sorted((HERE / "metrics" / "runs").iterdir()):  # each run's files are committed gzipped
        arm, _, seed = run.name.rpartition("-")
        name = f"placebo_routeA-{seed}" if arm == "placebo" else run.name  # aggregate names a yoked run for its target
        shutil.copytree(run, root / name)
        for f in (root / name).glob("*.gz"):
            f.with_suffix("").write_bytes(gzip.decompress(f.read_bytes()))
        for f in ("per_mode_deploy.json", "eval_curve.json"):
            if arm == "placebo" and (root / name / f).exists():
                d = json.loads((root / name / f).read_text()) | {"run": name, "arm": "placebo_routeA"}
                (root / name / f).write_text(json.dumps(d))
    con = tables.load_tables([tables.load_run(root, root, r, gate_inputs=False) for r in tables.find_runs(root)])
    table = contrasts.contrasts(con, PAIRS)
    out = HERE / "metrics" / "with_tgate"
    artifacts.a2(con, artifacts.Out(tables=out, png=out / "png", html=out / "html", plot_data=out / "plot_data"))
table.to_csv(HERE / "metrics" / "contrasts.csv", index=False)
print(table.to_string(index=False, float_format="%.3f"))
