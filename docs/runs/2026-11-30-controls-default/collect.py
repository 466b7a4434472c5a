"""Collect a controls run's record from its workspace (a repository where `dvc repro` ran):
   python docs/runs/2026-11-30-controls-default/collect.py WORKSPACE OUT_DIR SEED
writes OUT_DIR/counts.json (each run's per-step zone counts of student and teacher rows, from its
metrics/runs/RUN/steps.jsonl), and copies A2.md, A7_sample_cos.csv and plot_data/score_band.csv from
metrics/artifacts, the runs' config.json (runs/train/RUN/config.json) and params.yaml. It prints each
run's counts and whether a gated run's equal routeV's at every step."""
import json
import shutil
import sys
from pathlib import Path

KEYS = ("n_route", "n_keep", "n_absorb", "n_route_teacher", "n_keep_teacher", "n_absorb_teacher")


def main(ws: Path, out: Path, seed: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for steps in sorted((ws / "metrics" / "runs").glob(f"*-{seed}/steps.jsonl")):
        rows = [json.loads(line) for line in steps.read_text().splitlines() if line.strip()]
        counts[steps.parent.name] = [{"step": r["step"], **{k: r.get(k) for k in KEYS}} for r in rows]
    (out / "counts.json").write_text(json.dumps(counts, indent=1) + "\n")
    ref = counts.get(f"routeV-{seed}")
    for run, rows in counts.items():
        cells = " ".join(f"{r['step']}:{r['n_route']}/{r['n_keep']}/{r['n_absorb']}" for r in rows)
        same = "" if ref is None or run.startswith("none") else \
            f"  equal to routeV's at every step: {[[r[k] for k in KEYS] for r in rows] == [[r[k] for k in KEYS] for r in ref]}"
        print(f"{run}: {cells}{same}")
    art = ws / "metrics" / "artifacts"
    for src in (art / "A2.md", art / "A7_sample_cos.csv", art / "plot_data" / "score_band.csv", ws / "params.yaml"):
        if src.exists():
            shutil.copy(src, out / src.name)
        else:
            print(f"not copied: {src} does not exist (aggregate not run)")
    for cfg in sorted((ws / "runs" / "train").glob(f"*-{seed}/config.json")):
        shutil.copy(cfg, out / f"config_{cfg.parent.name}.json")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
