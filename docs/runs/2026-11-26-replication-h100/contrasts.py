"""The Δ between arms that no placebo answers, from this run's committed per-run files, with A2's
statistics (vgrout.aggregate.contrasts), and A2 again with the tgate runs (tgate.sh) beside the
rest, in metrics/with_tgate/. Run from the repository root:
    python docs/runs/2026-11-26-replication-h100/contrasts.py"""
import gzip
import shutil
import tempfile
from pathlib import Path

from vgrout import aggregate as agg

HERE = Path(__file__).parent
PAIRS = [("absorb", "none"), ("routeA", "absorb"), ("heldout", "absorb"), ("routeA", "heldout"),
         ("tgate", "none"), ("tgate", "absorb"), ("routeA", "tgate")]  # tgate: tgate.sh, run after the rest

with tempfile.TemporaryDirectory() as tmp:
    root = Path(tmp)
    for run in sorted((HERE / "metrics" / "runs").iterdir()):  # steps.jsonl is committed gzipped
        shutil.copytree(run, root / run.name)
        if (root / run.name / "steps.jsonl.gz").exists():
            (root / run.name / "steps.jsonl").write_bytes(gzip.decompress((root / run.name / "steps.jsonl.gz").read_bytes()))
    con = agg.load_tables([agg.load_run(root, root, r, gate_inputs=False) for r in agg.find_runs(root)])
    table = agg.contrasts(con, PAIRS)
    out = HERE / "metrics" / "with_tgate"
    agg.a2(con, agg.Out(tables=out, png=out / "png", html=out / "html", plot_data=out / "plot_data"))
table.to_csv(HERE / "metrics" / "contrasts.csv", index=False)
print(table.to_string(index=False, float_format="%.3f"))
