"""Lay the decisive grid's sessions out as one workspace and run the aggregate stage there, on CPU: the grid runs
seed by seed over device sessions (d_start.sh), and the plan's verdict reads every seed together.

    python docs/runs/2026-11-30-decisive/assemble.py WORKSPACE SEEDS SESSION_DIR [SESSION_DIR ...]

WORKSPACE: a checkout of the grid's commit (snap.commit of the sessions: the aggregate's code is the runs' code).
SEEDS: the grid's seeds as params train.seeds lists them, e.g. 100,101,102,103,104,105 (the aggregate refuses a list
that leaves out a plan seed whose runs were evaluated). SESSION_DIR: what one session brought back, kept beside the
repository: h1.tgz (the head: metrics, v_act, pairs), h2.tgz (each run's config.json and rollouts.jsonl) and
RUN.acts.gz (each run's rollout_acts.safetensors, A7's features), checked against the sha256 its record lists
(docs/runs/2026-11-30-decisive/SESSION/kept_beside.sha256, SESSION the folder's name).

Writes params.yaml (the first session's, train.seeds set to SEEDS) and analysis.yaml (plans/decisive.yaml), then
runs `python stages/aggregate.py` in WORKSPACE: metrics/summary.json, metrics/artifacts, metrics/arms, plots/png.
"""
from __future__ import annotations

import gzip
import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEAD_PARTS = ("metrics/runs/", "metrics/vact/", "runs/vact/", "runs/pairs/")  # from h1.tgz
TRAIN_PARTS = ("config.json", "rollouts.jsonl")  # from h2.tgz


def extract(tgz: Path, ws: Path, keep) -> int:
    n = 0
    with tarfile.open(tgz) as tar:
        for m in tar.getmembers():
            if m.isfile() and keep(m.name):
                tar.extract(m, ws)
                n += 1
    return n


def main(ws: Path, seeds: list[int], sessions: list[Path]) -> None:
    for s in sessions:
        listed = dict(reversed(line.split("  ", 1)) for line in (HERE / s.name / "kept_beside.sha256").read_text().splitlines())
        n = extract(s / "h1.tgz", ws, lambda name: name.startswith(HEAD_PARTS))
        n += extract(s / "h2.tgz", ws, lambda name: name.startswith("runs/train/") and name.endswith(TRAIN_PARTS))
        for acts in sorted(s.glob("*.acts.gz")):
            run = acts.name.removesuffix(".acts.gz")
            dst = ws / "runs/train" / run / "rollout_acts.safetensors"
            dst.write_bytes(gzip.decompress(acts.read_bytes()))
            want = listed.get(f"runs/train/{run}/rollout_acts.safetensors")
            if hashlib.sha256(dst.read_bytes()).hexdigest() != want:
                raise SystemExit(f"{acts}: sha256 is not the one {s.name}/kept_beside.sha256 lists")
            n += 1
        print(f"{s}: {n} files")
    params = (HERE / sessions[0].name / "params.yaml").read_text()
    params, k = re.subn(r"(?m)^(  seeds: )\[[0-9, ]*\]", rf"\g<1>[{', '.join(map(str, seeds))}]", params)
    if k != 1:
        raise SystemExit(f"{sessions[0].name}/params.yaml: no single train.seeds line")
    (ws / "params.yaml").write_text(params)
    shutil.copy(ws / "plans/decisive.yaml", ws / "analysis.yaml")
    subprocess.run([sys.executable, "stages/aggregate.py"], cwd=ws, check=True)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]), [int(s) for s in sys.argv[2].split(",")], [Path(p) for p in sys.argv[3:]])
