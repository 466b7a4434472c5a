"""Summarise the CPU run from a checkout's metrics/runs (argument: the checkout; default: here):
deploy hack/solve, routed share per step, rho / IS / effective weight per zone, yoke equality.
Usage: python summarise.py PATH > summary.json"""
import json, sys
from pathlib import Path

root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
arms = ["none", "routeA", "placebo", "random"]
steps = {a: [json.loads(l) for l in open(root / f"metrics/runs/{a}-0/steps.jsonl")] for a in arms
         if (root / f"metrics/runs/{a}-0/steps.jsonl").exists()}
steps = {a: rows for a, rows in steps.items() if rows and "n_students" in rows[0]}  # this run's, not an older log
out = {}
for a, rows in steps.items():
    d = {"n_steps": len(rows)}
    pm = root / f"metrics/runs/{a}-0/per_mode_deploy.json"
    if pm.exists():
        for r in json.load(open(pm))["rows"]:
            if r["mode"] == "overall":
                d[f"{r['view']}_hack"] = f"{r['n_hacked']}/{r['n']} [{r['hack_lo']:.3f}, {r['hack_hi']:.3f}]"
                d[f"{r['view']}_solve"] = f"{r['n_solved']}/{r['n']}"
    d["student_hack_rate_steps_0_7"] = round(sum(r["hack_rate"] for r in rows[:8]) / 8, 3)
    d["student_hack_rate_steps_28_35"] = round(sum(r["hack_rate"] for r in rows[28:36]) / max(len(rows[28:36]), 1), 3)
    d["routed_share_per_step"] = [round(r["qmass_rollouts"], 3) for r in rows]
    d["routed_share_mean"] = round(sum(r["qmass_rollouts"] for r in rows) / len(rows), 3)
    d["n_route_keep_per_step"] = [(r["n_route"], r["n_keep"]) for r in rows]
    d["teacher_rows_gated"] = sum(r.get("n_route_teacher", 0) + r.get("n_keep_teacher", 0) for r in rows) if a != "none" else None
    for z in ("keep", "absorb", "route"):
        for src in ("student", "teacher"):
            vals = [r.get(f"rho_p99_{z}_{src}") for r in rows if r.get(f"rho_p99_{z}_{src}") is not None]
            if vals:
                d[f"rho_p99_{z}_{src}_max_over_steps"] = round(max(vals), 4)
            w = [r.get(f"weff_max_{z}_{src}") for r in rows if r.get(f"weff_max_{z}_{src}") is not None]
            if w:
                d[f"weff_max_{z}_{src}"] = round(max(w), 4)
            for q in ("p50", "p99", "max"):
                iv = [r.get(f"is_{q}_{z}_{src}") for r in rows if r.get(f"is_{q}_{z}_{src}") is not None]
                if iv:
                    d[f"is_{q}_{z}_{src}"] = [round(min(iv), 3), round(max(iv), 3)]  # range over steps
            c = [r.get(f"clipfrac_is_{z}_{src}") for r in rows if r.get(f"clipfrac_is_{z}_{src}") is not None]
            if c:
                d[f"clipfrac_is_{z}_{src}_mean"] = round(sum(c) / len(c), 4)
    d["qmass_grad_mean"] = round(sum(r["gradnorm_quarantine"] ** 2 / max(r["gradnorm_quarantine"] ** 2 + r["gradnorm_deployed"] ** 2, 1e-30) for r in rows) / len(rows), 3)
    d["t_step_mean_s"] = round(sum(r["t_generate"] + r["t_grade"] + r["t_old"] + r["t_score"] + r["t_old_masked"] + r["t_train"] for r in rows) / len(rows), 1)
    d["t_score_mean_s"] = round(sum(r["t_score"] for r in rows) / len(rows), 3)
    out[a] = d
if "routeA" in steps:
    ref = [(r["n_route"], r["n_keep"]) for r in steps["routeA"]]
    for a in ("placebo", "random"):
        if a in steps:
            out[a]["yoke_counts_equal_routeA"] = [(r["n_route"], r["n_keep"]) for r in steps[a]] == ref
    import statistics
    rs = steps["routeA"]
    if len(rs) > 2:
        out["routeA"]["corr_routed_vs_hacked_students"] = round(statistics.correlation(
            [r["n_route"] for r in rs], [r["hack_rate"] * r["n_students"] for r in rs]), 3)
json.dump(out, sys.stdout, indent=1)
