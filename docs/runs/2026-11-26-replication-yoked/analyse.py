"""A2, A5 and the contrasts of the replication's runs at the 2026-11-26 settings, with each gated arm
against the placebo yoked to it: the runs of ../2026-11-26-replication-h100 (none, routeA, absorb,
heldout, tgate, and placebo yoked to routeA, there named `placebo`) and this run's (haar, placebo
yoked to tgate and heldout, random yoked to routeA, tgate and heldout), paired by seed and problem
(the same substrate, pairs and pool; run.sh checks their md5s). Writes metrics/ beside this file.
Run from the repository root:
    python docs/runs/2026-11-26-replication-yoked/analyse.py"""
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
PAIRS = [("tgate", "placebo_tgate"), ("heldout", "placebo_heldout"), ("routeA", "placebo_routeA"),
         ("haar", "none"), ("routeA", "haar"), ("random_routeA", "placebo_routeA"), ("tgate", "absorb"),
         ("routeA", "tgate"), ("random_tgate", "placebo_tgate"), ("random_heldout", "placebo_heldout"),
         # the uniform draw at matched counts: a control with no direction at all (a Haar one can anti-select)
         ("routeA", "random_routeA"), ("tgate", "random_tgate"), ("heldout", "random_heldout"),
         # the yoked controls against the arm that gates nothing on the same adapter
         ("placebo_routeA", "absorb"), ("placebo_tgate", "absorb"), ("placebo_heldout", "absorb"),
         ("random_routeA", "absorb"), ("random_tgate", "absorb"), ("random_heldout", "absorb")]
VS_RANDOM = [f"{a} − random_{a}" for a in ("routeA", "tgate", "heldout")]  # one family: Holm over it


def copy_run(src: Path, dest_root: Path) -> None:
    arm, _, seed = src.name.rpartition("-")
    name = src.name if arm not in RENAMED else f"{RENAMED[arm]}-{seed}"
    dest = dest_root / name
    shutil.copytree(src, dest)
    for f in dest.glob("*.gz"):  # each run's files are committed gzipped
        f.with_suffix("").write_bytes(gzip.decompress(f.read_bytes()))
    for f in ("per_mode_deploy.json", "eval_curve.json"):
        if arm in RENAMED:
            d = json.loads((dest / f).read_text()) | {"run": name, "arm": RENAMED[arm]}
            (dest / f).write_text(json.dumps(d))


with tempfile.TemporaryDirectory() as tmp:
    root = Path(tmp)
    for run in sorted(EARLIER.iterdir()):
        copy_run(run, root)
    for run in sorted((HERE / "metrics" / "runs").iterdir()):
        copy_run(run, root)
    runs = [tables.load_run(root, root, r, gate_inputs=False) for r in tables.find_runs(root)]
    con = tables.load_tables(runs)
    out_dir = HERE / "metrics"
    out = artifacts.Out(tables=out_dir, png=out_dir / "png", html=out_dir / "html", plot_data=out_dir / "plot_data")
    table = artifacts.a2(con, out)
    c2 = artifacts.a5(con, runs, out)
    contrasts = contrasts.contrasts(con, PAIRS)
family = contrasts[contrasts["contrast"].isin(VS_RANDOM) & (contrasts["metric"] == "hack_hackable")]
contrasts.loc[family.index, "p_holm_vs_random"] = holm(family["p_paired_t"].tolist())
contrasts.to_csv(out_dir / "contrasts.csv", index=False)
cols = ["arm", "n_seeds", "deploy_hack_hackable", "deploy_hack_hackable_lo", "deploy_hack_hackable_hi", "deploy_solve",
        "ref_placebo", "delta_hack_hackable_vs_placebo", "delta_hack_hackable_vs_placebo_lo",
        "delta_hack_hackable_vs_placebo_hi", "delta_solve_vs_placebo"]
print(table[cols].to_string(index=False, float_format="%.3f"))
print(contrasts.to_string(index=False, float_format="%.3f"))
print("C1", contrasts.claim_c1(table), "\nC1 for tgate", contrasts.claim_c1(table, arm="tgate"), "\nC2", c2)
