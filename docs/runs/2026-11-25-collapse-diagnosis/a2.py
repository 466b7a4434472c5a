"""A2 of round 4, 6 or 7 with the project's statistics (hierarchical bootstrap over seeds and problems,
95% intervals; hack over hackable problems), one table per comparison, from the committed files.
Each comparison puts a gated arm and the placebo yoked to it beside the `none` (and `absorb`) runs
that share its advantage baseline; C1's rule is applied to that arm (C1 itself is routeA's). Round 7
adds A5 (C2) for the heldout arm against its own yoked placebo, and the contrasts between arms that
no placebo answers (tgate − absorb, routeA − tgate). Run from the repository root:
    python docs/runs/2026-11-25-collapse-diagnosis/a2.py 4   (or 6, 7)
The per-run files are committed gzipped; they are unpacked into a temporary folder for aggregate.
Round 6's runs are read from round7/both, which holds them bit for bit (step logs but for their timings).
Its charts (png/, html/) and plot data are not committed: this command writes them."""
import gzip
import json
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

from vgrout.analysis import artifacts, contrasts, tables
from vgrout.io import atomic_write_text

ROUNDS = {  # round -> comparison -> (the arm C1's rule is applied to, {arm: the variant folder of its runs})
    "4": {"tzgate": ("routeA", {"none": "control", "absorb": "control", "routeA": "tzgate", "placebo": "tzgate"}),
          "sbase": ("routeA", {"none": "sbase", "routeA": "sbase", "placebo": "sbase"}),
          "both": ("routeA", {"none": "sbase", "routeA": "both", "placebo": "both"})},
    "6": {"both": ("routeA", {"none": "both", "routeA": "both", "placebo": "both"})},  # new training seeds 3-7
    # each gated arm with the placebo yoked to it (variant both: routeA's; yt: tgate's; yh: heldout's)
    "7": {"routeA": ("routeA", {"none": "both", "routeA": "both", "absorb": "both", "placebo": "both"}),
          "tgate": ("tgate", {"none": "both", "tgate": "yt", "absorb": "both", "placebo": "yt"}),
          "heldout": ("heldout", {"none": "both", "heldout": "yh", "placebo": "yh"})},
}
# round -> (arm, reference) pairs whose paired Δ no placebo answers: what gating each source adds
CONTRASTS = {"7": [("tgate", "absorb"), ("routeA", "tgate"), ("routeA", "absorb"), ("absorb", "none")]}
ROUND = sys.argv[1] if len(sys.argv) > 1 else "4"
HERE = Path(__file__).parent / f"round{ROUND}"
# round 7 re-ran round 6's 15 runs (none, routeA, placebo; seeds 3-7) with identical rollouts, curves and samples
RUNS_OF = {"6": Path(__file__).parent / "round7"}


def unpack(run: Path, dest: Path, arm: str) -> None:
    """A committed run folder, its gzipped files unpacked, as aggregate reads it, named for `arm`: these rounds
    named a yoked run placebo-SEED, which aggregate now names for the arm it copies (placebo_routeA-SEED)."""
    dest.mkdir()
    for f in run.iterdir():
        if f.name.endswith(".gz"):
            (dest / f.name[:-3]).write_bytes(gzip.decompress(f.read_bytes()))
        else:
            shutil.copy(f, dest / f.name)
    for f in ("per_mode_deploy.json", "eval_curve.json"):
        if (dest / f).exists():
            (dest / f).write_text(json.dumps(json.loads((dest / f).read_text()) | {"run": dest.name, "arm": arm}))


def load(arms: dict[str, str], focus: str = ""):
    """The runs of these arms, each from its variant folder, as aggregate's tables; the placebo is the one
    yoked to `focus`."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp)
        for arm, variant in arms.items():
            name = f"placebo_{focus}" if arm == "placebo" else arm
            for run in sorted((RUNS_OF.get(ROUND, HERE) / variant).glob(f"{arm}-*")):
                unpack(run, metrics / f"{name}-{run.name.rpartition('-')[2]}", name)
        runs = [tables.load_run(metrics, metrics, r, gate_inputs=False) for r in tables.find_runs(metrics)]
        return runs, tables.load_tables(runs)


def out_dir(name: str) -> artifacts.Out:
    root = HERE / "a2" / name
    return artifacts.Out(tables=root, png=root / "png", html=root / "html", plot_data=root / "plot_data")


claims = {}
for name, (focus, arms) in ROUNDS[ROUND].items():
    runs, con = load(arms, focus)
    claims[name] = {"arm": focus, "c1_rule": contrasts.claim_c1(artifacts.a2(con, out_dir(name)), arm=focus)}
    if focus == "heldout":
        claims[name]["C2"] = artifacts.a5(con, runs, out_dir(name))

if ROUND in CONTRASTS:
    # one folder per arm (placebos left out: each variant's placebo is yoked to a different arm)
    _, con = load({a: v for cmp in ROUNDS[ROUND].values() for a, v in cmp[1].items() if a != "placebo"})
    table = contrasts.contrasts(con, CONTRASTS[ROUND])
    (HERE / "a2").mkdir(parents=True, exist_ok=True)
    table.to_csv(HERE / "a2" / "contrasts.csv", index=False)
    claims["contrasts"] = table.round(4).to_dict(orient="records")
    print(table.to_string(index=False, float_format="%.3f"))

atomic_write_text(HERE / "a2" / "claims.json", json.dumps(claims, indent=1, default=float) + "\n")
print(json.dumps(claims, indent=1, default=float))
