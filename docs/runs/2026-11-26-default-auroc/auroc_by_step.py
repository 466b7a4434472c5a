"""routeV's and routeA's gate AUROC per training step on the default's run of seed 0, each against a
null of Haar directions scored on the same step's rows (the gate's own features: activations for routeA,
probe gradients for routeV). Labels are read here only, after training, as a measurement. Population: the
student rollouts on hackable problems (as A7). Run from the repository root after `dvc repro`:
    python docs/runs/2026-11-26-default-auroc/auroc_by_step.py > docs/runs/2026-11-26-default-auroc/result.md"""
import json

import numpy as np
import torch
from safetensors.torch import load_file

from vgrout.analysis import diagnostics
from vgrout.routing import extract as vact
from vgrout.substrate.modes import hackable

N_NULL, NULL_SEED = 200, 1_000_000


def per_step(run: str, direction_file: str) -> list[dict]:
    rows = [json.loads(line) for line in open(f"runs/train/{run}/rollouts.jsonl")]
    acts = load_file(f"runs/train/{run}/rollout_acts.safetensors")
    keep = np.array([r["source"] == "student" and r["mode"] in hackable() for r in rows])
    d = vact.load_direction(direction_file)
    score = diagnostics.gate_scores(acts, d)
    nulls = [diagnostics.gate_scores(acts, vact.haar_direction(d, NULL_SEED + k)) for k in range(N_NULL)]
    steps, hacked = np.array([r["step"] for r in rows]), np.array([bool(r["hacked"]) for r in rows])
    out = []
    for s in np.unique(steps):
        at = keep & (steps == s)
        real = diagnostics._auroc_or_none(score[at], hacked[at])
        null = [diagnostics._auroc_or_none(n[at], hacked[at]) for n in nulls]
        null = [a for a in null if a is not None]
        out.append({"step": int(s), "n": int(at.sum()), "n_hacked": int(hacked[at].sum()), "auroc": real,
                    "null_mean": float(np.mean(null)) if null else None,
                    "null_q95": float(np.quantile(null, 0.95)) if null else None,
                    "percentile_in_null": float(np.mean([a < real for a in null])) if null and real is not None else None})
    return out


print("| step | n (hacked) | routeA AUROC | its Haar null mean / q95 | routeV AUROC | its Haar null mean / q95 |")
print("|---|---|---|---|---|---|")
a, v = per_step("routeA-0", "runs/vact/0/v_act.safetensors"), per_step("routeV-0", "runs/vact/0/v_grad.safetensors")
fmt = lambda x: "—" if x is None else f"{x:.3f}"  # noqa: E731
for ra, rv in zip(a, v):
    print(f"| {ra['step']} | {ra['n']} ({ra['n_hacked']}) / {rv['n']} ({rv['n_hacked']}) | {fmt(ra['auroc'])} | "
          f"{fmt(ra['null_mean'])} / {fmt(ra['null_q95'])} | {fmt(rv['auroc'])} | {fmt(rv['null_mean'])} / {fmt(rv['null_q95'])} |")
