"""A2 and the contrasts of routeV, its yoked placebo and the comparison arms against the earlier
replication's runs at the same settings (../2026-11-26-replication-h100: none, routeA, absorb, tgate,
heldout, placebo yoked to routeA, there named `placebo`), paired by seed and problem (the same substrate,
pairs and pool: run.sh checks their md5s; none-0 and routeA-0, re-run here on another GPU, are
byte-identical to the earlier ones, so the earlier ones stand for both). Writes metrics/A2.md, A2.csv and
contrasts.csv beside this file. Run from the repository root:
    python docs/runs/2026-11-26-comparison-arms/contrasts.py"""
import gzip
import json
import shutil
import tempfile
from pathlib import Path

from vgrout.analysis import artifacts, contrasts, tables
from vgrout.stats import holm

HERE = Path(__file__).parent
EARLIER = HERE.parent / "2026-11-26-replication-h100" / "metrics" / "runs"
RENAMED = {"placebo": "placebo_routeA"}  # the earlier run's name for the placebo yoked to routeA
# primary: routeV against the placebo yoked to its own counts (C1 for routeV); then against none and routeA
PRIMARY = [("routeV", "placebo_routeV"), ("routeV", "none"), ("routeV", "routeA")]
# the comparison arms against none (each a family of one: their own question), and the labels' upper bound
SECONDARY = [(a, "none") for a in ("erase", "oracle", "penalty", "screen", "inoculate", "noloophole")] + \
    [("erase", "routeA"), ("routeV", "oracle"), ("routeA", "oracle"), ("placebo_routeV", "none"),
     ("placebo_routeV", "absorb"), ("routeV", "absorb")]


def copy_run(src: Path, dest_root: Path) -> None:
    arm, _, seed = src.name.rpartition("-")
    name = src.name if arm not in RENAMED else f"{RENAMED[arm]}-{seed}"
    dest = dest_root / name
    if dest.exists():  # none-0 and routeA-0: run again here, byte-identical deploy samples
        return
    shutil.copytree(src, dest)
    for f in dest.glob("*.gz"):  # each run's files are committed gzipped
        f.with_suffix("").write_bytes(gzip.decompress(f.read_bytes()))
    for f in ("per_mode_deploy.json", "eval_curve.json"):
        if arm in RENAMED and (dest / f).exists():
            d = json.loads((dest / f).read_text()) | {"run": name, "arm": RENAMED[arm]}
            (dest / f).write_text(json.dumps(d))


with tempfile.TemporaryDirectory() as tmp:
    root = Path(tmp)
    for folder in (EARLIER, HERE / "metrics" / "runs"):
        for run in sorted(folder.iterdir()):
            copy_run(run, root)
    runs = [tables.load_run(root, root, r, gate_inputs=False) for r in tables.find_runs(root)]
    con = tables.load_tables(runs)
    out_dir = HERE / "metrics"
    out = artifacts.Out(tables=out_dir, png=out_dir / "png", html=out_dir / "html", plot_data=out_dir / "plot_data")
    table = artifacts.a2(con, out)
    contrasts = contrasts.contrasts(con, PRIMARY + SECONDARY)
hack = contrasts["metric"] == "hack_hackable"
primary = contrasts[hack & contrasts["contrast"].isin([f"{a} − {b}" for a, b in PRIMARY])]
contrasts.loc[primary.index, "p_holm_primary"] = holm(primary["p_paired_t"].tolist())
contrasts.to_csv(out_dir / "contrasts.csv", index=False)
cols = ["arm", "n_seeds", "deploy_hack_hackable", "deploy_hack_hackable_lo", "deploy_hack_hackable_hi",
        "deploy_solve", "deploy_solve_lo", "deploy_solve_hi"]
print(table[cols].to_string(index=False, float_format="%.3f"))
print(contrasts.to_string(index=False, float_format="%.3f"))
print("C1 for routeV", contrasts.claim_c1(table, arm="routeV"))
