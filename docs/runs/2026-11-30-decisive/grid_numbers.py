"""The figures the record's README quotes for one packed session, from its committed files only.

    python docs/runs/2026-11-30-decisive/grid_numbers.py s100-101 > docs/runs/2026-11-30-decisive/s100-101/numbers.json

Per run: the deploy and train views at the last step (hacked samples over the hackable problems' samples, solved
over all; eval's per_mode_deploy.json), the deploy curve (1 sample a problem at each checkpoint), the student's
training rows (hacked per 10-step block; routed, kept, absorbed; the hacked share of the routed and of the kept rows:
labels read here, after the fact, never by the gate), step times (the sum of a step's t_* fields). Per session: each
fan-out stage's seconds (status.json), the upstream's span and the GPUs' memory peaks (ps.log, smi.csv).
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import statistics as st
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def jl(path: Path) -> list[dict]:
    return [json.loads(line) for line in gzip.open(path, "rt") if line.strip()]


def overall(per_mode: dict, view: str) -> dict:
    (r,) = [r for r in per_mode["rows"] if r["view"] == view and r["mode"] == "overall"]
    return {"hacked_hackable": r["n_hacked_hackable"], "n_hackable": r["n_hackable"], "solved": r["n_solved"], "n": r["n"]}


def run_numbers(d: Path) -> dict:
    pm = json.load(gzip.open(d / "per_mode_deploy.json.gz", "rt"))
    out = {"deploy": overall(pm, "deploy")}
    if not (d / "steps.jsonl.gz").exists():  # the base: one view
        return out
    out["train_view"] = overall(pm, "train")
    curve = json.load(gzip.open(d / "eval_curve.json.gz", "rt"))
    out["curve_deploy_hacked_hackable"] = {str(r["step"]): f"{r['n_hacked_hackable']}/{r['n_hackable']}"
                                           for r in curve["rows"] if r["view"] == "deploy" and r["mode"] == "overall"}
    rows = [r for r in jl(d / "rows.jsonl.gz") if r["source"] == "student"]
    hackable = [r for r in rows if r["mode"] != "none"]
    out["student_rows"] = {"n": len(rows), "hackable": len(hackable), "hacked": sum(r["hacked"] for r in rows)}
    out["hacked_by_block"] = {f"{b}-{b + 9}": f"{sum(r['hacked'] for r in rows if b <= r['step'] <= b + 9)}/"
                                              f"{sum(1 for r in rows if b <= r['step'] <= b + 9)}" for b in (0, 10, 20)}
    for zone in ("route", "keep", "absorb"):
        z = [r for r in rows if r["zone"] == zone]
        out[f"{zone}_rows"] = {"n": len(z), "hacked": sum(r["hacked"] for r in z)}
    steps = jl(d / "steps.jsonl.gz")
    t = [sum(v for k, v in s.items() if k.startswith("t_") and v is not None) for s in steps]
    out["step_seconds"] = {"first": round(t[0], 1), "median": round(st.median(t[1:]), 1), "max": round(max(t[1:]), 1)}
    return out


def session_numbers(s: Path) -> dict:
    with tarfile.open(s / "logs.tgz") as tar:
        read = lambda name: tar.extractfile(name).read().decode()  # noqa: E731
        status = json.loads(read("status.json"))["stages"]
        ps = [line.split(" ", 1) for line in read("tmp/dd/ps.log").splitlines()]
        smi = list(csv.reader(io.StringIO(read("tmp/dd/smi.csv")), skipinitialspace=True))[1:]
    first_task = min(int(t) for t, *rest in ps if rest and ("train.py" in rest[0] or "eval.py" in rest[0]))
    peaks = {}
    for row in smi:
        if len(row) == 4 and row[2].endswith("MiB"):
            peaks[row[1]] = max(peaks.get(row[1], 0), int(row[2].split()[0]))
    return {"stage_seconds": {k: round(v["seconds"]) for k, v in status.items()},
            "stage_gpu": {k: v["where"].split(" ", 1)[1] for k, v in status.items()},
            "upstream_seconds": first_task - int(ps[0][0]),
            "gpu_memory_peak_mib": peaks,
            "smi_span": [row[0] for row in (smi[0], smi[-1])]}


def main(name: str) -> None:
    s = HERE / name
    runs = sorted(p.parent.name for p in s.glob("*/per_mode_deploy.json.gz"))  # a run's folder (device_artifacts/ apart)
    print(json.dumps({"session": name, "runs": {r: run_numbers(s / r) for r in runs}, **session_numbers(s),
                      "made": "grid_numbers.py " + name}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
