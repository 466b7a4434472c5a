"""Round 6's numbers (SECTION.md), from this folder's files only. Run from the repository root:
  python docs/runs/2026-11-29-real-student-pilot/round6/numbers6.py > docs/runs/2026-11-29-real-student-pilot/round6/numbers6.json
- stages: from fanout/ps.log.gz (which `stages/*.py` commands ran, sampled every 5 s from the fan-out's
  start): first and last second each was seen (resolution 5 s).
- steps: each run's step log; a step's time is the sum of its t_* fields (as rounds 3-5), median and
  mean over the 40 steps; the parts' medians.
- gpu: fanout/smi.csv.gz (nvidia-smi every 2 s, the whole GPU), in windows of the stage timeline.
- deploy: per_mode_deploy.json.gz (test_medhard, 4 samples, T 0.7); curve: eval_curve.json.gz (1 sample).
- train_rows: hacked student rows by mode (rollouts / rows files)."""
import csv, datetime, gzip, json, statistics as st
from pathlib import Path
D = Path(__file__).parent
out = {}
lines = [l.rstrip("\n").split(" ", 1) for l in gzip.open(D / "fanout/ps.log.gz", "rt")]
t0 = int(lines[0][0]); spans = {}
for t, s in lines:
    for cmd in filter(None, (x.strip() for x in s.split(";"))):
        a = spans.setdefault(cmd, [int(t) - t0, int(t) - t0]); a[1] = int(t) - t0
out["t0_unix"] = t0
out["stages"] = {k: {"first_s": a, "last_s": b} for k, (a, b) in sorted(spans.items(), key=lambda x: x[1][0])}
out["steps"] = {}
for s in (1, 2, 3):
    rows = [json.loads(l) for l in gzip.open(D / f"mix0_none-{s}/steps.jsonl.gz", "rt")]
    T = [sum(v for k, v in r.items() if k.startswith("t_") and isinstance(v, (int, float))) for r in rows]
    out["steps"][f"none-{s}"] = {"n": len(rows), "median_s": round(st.median(T), 2), "mean_s": round(st.mean(T), 2),
                                 "sum_s": round(sum(T), 1), "first_step_s": round(T[0], 1),
                                 "parts_median_s": {k: round(st.median(r[k] for r in rows), 2) for k in rows[0] if k.startswith("t_")},
                                 "hack_rate_by_5": [round(st.mean(r["hack_rate"] for r in rows[i:i + 5]), 3) for i in range(0, len(rows), 5)],
                                 "solve_rate_by_5": [round(st.mean(r["solve_rate"] for r in rows[i:i + 5]), 3) for i in range(0, len(rows), 5)]}
samples = []
for r in csv.reader(gzip.open(D / "fanout/smi.csv.gz", "rt")):
    try:
        ts = datetime.datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc).timestamp()
        samples.append((ts - t0, int(r[1].split()[0]), int(r[2].split()[0])))
    except (ValueError, IndexError):
        pass
tr = spans["stages/train.py none 1"]; ev = [spans[f"stages/eval.py none {s}"] for s in (1, 2, 3)]
eb = spans["stages/eval.py base"]
windows = {"upstream on the head (model .. extract_vact)": (0, tr[0]), "three trains + eval_base": (tr[0], eb[1] + 5),
           "three trains alone": (eb[1] + 5, min(spans[f"stages/train.py none {s}"][1] for s in (1, 2, 3))),
           "trains start .. last train ends": (tr[0], max(spans[f"stages/train.py none {s}"][1] for s in (1, 2, 3)) + 5),
           "evaluations": (min(a for a, _ in ev), max(b for _, b in ev) + 5), "whole fan-out": (0, max(b for _, b in ev) + 5)}
out["gpu"] = {}
for name, (a, b) in windows.items():
    w = [x for x in samples if a <= x[0] < b]
    out["gpu"][name] = {"from_s": a, "to_s": b, "samples": len(w), "util_median": st.median(x[2] for x in w),
                        "util_mean": round(st.mean(x[2] for x in w), 1), "mem_peak_mib": max(x[1] for x in w),
                        "mem_median_mib": st.median(x[1] for x in w)}
out["deploy"] = {}
for name, f in [("base", "base_test_medhard"), *[(f"none-{s}", f"mix0_none-{s}") for s in (1, 2, 3)]]:
    d = json.load(gzip.open(D / f / "per_mode_deploy.json.gz", "rt"))
    rows = [r for r in d["rows"] if r["view"] == "deploy"]
    o = next(r for r in rows if r["mode"] == "overall")
    out["deploy"][name] = {"hacked_hackable": [o["n_hacked_hackable"], o["n_hackable"]], "solved": [o["n_solved"], o["n"]],
                           "by_mode": {r["mode"]: {"hacked": r["n_hacked"], "strict": r["n_hacked_strict"], "n": r["n"],
                                                   "solved": r["n_solved"]} for r in rows if r["mode"] != "overall"}}
    if name != "base":
        c = json.load(gzip.open(D / f / "eval_curve.json.gz", "rt"))
        out["deploy"][name]["curve"] = [(r["step"], r["n_hacked_hackable"], r["n_hackable"], r["n_solved"]) for r in c["rows"]
                                        if r["mode"] == "overall" and r["view"] == "deploy"]
out["train_rows"] = {}
for s in (1, 2, 3):
    p = D / f"mix0_none-{s}" / "rows.jsonl.gz"  # seed 1's too: its text-free rows (README "Files moved out of the tree")
    rows = [json.loads(l) for l in gzip.open(p, "rt")]
    by = {}
    for r in rows:
        b = by.setdefault(r["mode"], [0, 0]); b[1] += 1; b[0] += bool(r["hacked"])
    out["train_rows"][f"none-{s}"] = {m: {"hacked": h, "rows": n} for m, (h, n) in sorted(by.items())}
print(json.dumps(out, indent=1))
