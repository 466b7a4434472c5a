"""The numbers of README.md, from this folder's files and ../2026-11-26-replication-h100's (stdlib only):
1. mean over steps of t_score and of the sum of the t_* fields, routeV-0..4 vs routeA-0;
2. none-0 and routeA-0 against the earlier run: deploy_samples.csv bytes, steps.jsonl non-t_* fields;
3. per run, deploy hack over hackable problems and solve (per_mode_deploy.json, deploy, overall).
Run: python3 docs/runs/2026-11-26-comparison-arms/analyse.py"""
import gzip, json, math
from pathlib import Path

HERE = Path(__file__).parent
OLD = HERE.parent / "2026-11-26-replication-h100"
R = HERE / "metrics" / "runs"


def steps(d):
    return [json.loads(l) for l in gzip.open(d / "steps.jsonl.gz", "rt")]


def same(a, b):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


print("1. step time (s), mean over steps")
print("run | steps | t_score | sum t_* | " + " | ".join(sorted(k for k in steps(R / "routeA-0")[0] if k.startswith("t_"))))
rows = {}
for run in ["routeA-0"] + [f"routeV-{s}" for s in range(5)]:
    st = steps(R / run)
    tk = sorted(k for k in st[0] if k.startswith("t_"))
    m = {k: sum(x[k] for x in st) / len(st) for k in tk}
    tot = sum(sum(x[k] for k in tk) for x in st) / len(st)
    rows[run] = (m["t_score"], tot)
    print(f"{run} | {len(st)} | {m['t_score']:.3f} | {tot:.3f} | " + " | ".join(f"{m[k]:.3f}" for k in tk))
v = [rows[f"routeV-{s}"] for s in range(5)]
vs, vt = sum(x[0] for x in v) / 5, sum(x[1] for x in v) / 5
a = rows["routeA-0"]
print(f"routeV-0..4 mean | t_score {vs:.3f} | total {vt:.3f}; routeA-0 t_score {a[0]:.3f} total {a[1]:.3f}; "
      f"Δ t_score {vs - a[0]:+.3f} s, Δ total {vt - a[1]:+.3f} s ({100 * (vt / a[1] - 1):+.1f}%)")

print("\n2. identity with ../2026-11-26-replication-h100 (H100)")
for run in ("none-0", "routeA-0"):
    b1 = gzip.open(R / run / "deploy_samples.csv.gz").read()  # committed gzipped: the bytes compared are the csv's
    b0 = gzip.open(OLD / "metrics" / "runs" / run / "deploy_samples.csv.gz").read()
    s1, s0 = steps(R / run), steps(OLD / "metrics" / "runs" / run)
    diff = {}
    keys1 = set().union(*map(set, s1)); keys0 = set().union(*map(set, s0))
    for x1, x0 in zip(s1, s0):
        for k in (set(x1) | set(x0)):
            if k.startswith("t_"):
                continue
            if not same(x1.get(k, "<absent>"), x0.get(k, "<absent>")):
                diff.setdefault(k, []).append(x1["step"])
    print(f"{run}: deploy_samples.csv byte-identical: {b1 == b0} ({len(b1)} vs {len(b0)} bytes); "
          f"steps {len(s1)} vs {len(s0)}; keys only here: {sorted(keys1 - keys0)}; only there: {sorted(keys0 - keys1)}; "
          f"non-t_* fields differing: {len(diff)}"
          + ("" if not diff else " -> " + ", ".join(f"{k} (first step {v[0]}, {len(v)} steps)" for k, v in sorted(diff.items(), key=lambda kv: kv[1][0])[:12])))

print("\n3. deploy, mode overall")
print("| run | hack_hackable | solve |\n| --- | --- | --- |")
for d in sorted(R.iterdir(), key=lambda p: (p.name.rsplit("-", 1)[0], int(p.name.rsplit("-", 1)[1]))):
    o = next(r for r in json.load(gzip.open(d / "per_mode_deploy.json.gz", "rt"))["rows"] if r["view"] == "deploy" and r["mode"] == "overall")
    print(f"| {d.name} | {o['hack_hackable']:.3f} ({o['n_hacked_hackable']}/{o['n_hackable']}) | {o['solve']:.3f} ({o['n_solved']}/{o['n']}) |")
