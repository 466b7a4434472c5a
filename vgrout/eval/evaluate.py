"""Deploy evaluation: sample n completions per test problem, grade them, report solve and hack
rates per loophole mode with Wilson 95% intervals, and keep every sample's grade (the
aggregation's bootstrap resamples them).

Views:
  deploy — the quarantine ablated (reset to its init: its delta is exactly zero); the model
           a user would ship.
  train  — the quarantine on, as during training; shows what routing put into the quarantine.
The base model (no adapter) is evaluated once as the reference row.
"""
from __future__ import annotations

import csv
from pathlib import Path

from tqdm import tqdm

from vgrout import arms, config
from vgrout.engine import adapter as ad
from vgrout.engine.model import load
from vgrout.io import InputError, atomic_path, write_json
from vgrout.layout import DEPLOY_SAMPLES, Layout, run_name
from vgrout.substrate.problems import load_problems
from vgrout.substrate.sampling import SAMPLE_FIELDS, rates, sample_and_grade, sample_rows


def eval_adapter(lora: ad.Lora2r, tok, problems, adapter_path: Path, views, known=(), **kw) -> list[dict]:
    """Sample rows (sample_rows) of each view for one adapter file. `known`: sample rows already
    drawn from this same file (any view), reused where the views are provably the same function."""
    samples, done = [], list(known)
    for view in views:
        if view not in ("deploy", "train"):
            raise InputError(f"eval view '{view}' unknown; valid: deploy, train")
        lora.load(adapter_path)  # fresh copy each view: ablation below is in place
        if done and lora.quarantine_at_init():
            # an untouched quarantine (arm none, step 0): both views are the same function,
            # sampled with the same seed, so another view's grades are this view's too
            samples += [{**s, "view": view} for s in done if s["view"] == done[0]["view"]]
            continue
        if view == "deploy":
            lora.ablate_quarantine()
        expanded, grades = sample_and_grade(lora.model, tok, problems, lora=lora, **kw)
        done = sample_rows(expanded, grades, view)
        samples += done
    return samples


def write_samples(path: Path, samples: list[dict]) -> None:
    """The per-sample grades as csv (header SAMPLE_FIELDS, LF line ends: git tracks it), written atomically."""
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=SAMPLE_FIELDS, extrasaction="raise", lineterminator="\n")
        w.writeheader()
        w.writerows(samples)


def run(e: config.Eval, model_dir: str, problems_path: str, run_dir: str | None, out_dir: str, run: str, arm: str,
        seed: int | None, views=("deploy", "train"), heldout_modes=None, device: str | None = None,
        progress: bool = True, fast: bool = True) -> dict:
    """Write per_mode_deploy.json and DEPLOY_SAMPLES (final adapter: its rates, and the grade of
    every sample they count) and eval_curve.json (every checkpoint)."""
    problems = load_problems(problems_path)
    model, tok = load(model_dir, device=device)
    out = Path(out_dir)
    n_samples, curve_n_samples, curve_views, temperature = e.n_samples, e.curve_n_samples, e.curve_views, e.temperature
    kw = dict(temperature=temperature, max_new_tokens=e.max_new_tokens, batch_size=e.batch_size, seed=e.seed,
              fast=fast)
    head = {"run": run, "arm": arm, "seed": seed, "temperature": temperature,
            "heldout_modes": heldout_modes}
    if run_dir is None:  # the base model reference
        expanded, grades = sample_and_grade(model, tok, problems, n_samples=n_samples, **kw)
        samples = sample_rows(expanded, grades, "deploy")
        result = {**head, "step": 0, "n_samples": n_samples, "rows": rates(samples)}
        write_samples(out / DEPLOY_SAMPLES, samples)
        write_json(out / "per_mode_deploy.json", result)
        return result

    run_dir = Path(run_dir)
    final = run_dir / "adapter.safetensors"
    if not final.exists():
        raise InputError(f"{final}: no final adapter (did train finish?)")
    cfg = ad.config_of(final)
    lora = ad.attach(model, r=cfg["r"], init_scale=cfg["init_scale"], seed=cfg["seed"],
                     targets=cfg["targets"], last_layers=cfg.get("last_layers"))
    ckpts = sorted((run_dir / "ckpt").glob("step_*"), key=lambda p: int(p.name.split("_")[1]))
    curve, last = [], []
    for ck in tqdm(ckpts, desc=f"eval curve {run}", disable=not progress):
        step = int(ck.name.split("_")[1])
        last = eval_adapter(lora, tok, problems, ck / "adapter.safetensors", curve_views,
                            n_samples=curve_n_samples, **kw)
        curve += [{"step": step, **row} for row in rates(last)]
    write_json(out / "eval_curve.json", {**head, "n_samples": curve_n_samples, "rows": curve})
    final_step = int(ckpts[-1].name.split("_")[1]) if ckpts else None
    same = (ckpts and curve_n_samples == n_samples
            and (ckpts[-1] / "adapter.safetensors").read_bytes() == final.read_bytes())
    # the last checkpoint is the final adapter, sampled alike: reuse its views, do not redo them
    known = last if same else []
    samples = [s for s in known if s["view"] in views]
    samples += eval_adapter(lora, tok, problems, final, [v for v in views if v not in {s["view"] for s in known}],
                            known=known, n_samples=n_samples, **kw)
    samples.sort(key=lambda s: list(views).index(s["view"]))  # stable: problem order kept within a view
    result = {**head, "step": final_step, "n_samples": n_samples, "rows": rates(samples)}
    write_samples(out / DEPLOY_SAMPLES, samples)
    write_json(out / "per_mode_deploy.json", result)
    return result


def eval_stage(params, arm: str, seed: int | None = None, layout: Layout = Layout()) -> dict:
    """DVC stage eval@ARM-SEED, or eval_base when arm is the base reference run."""
    e = params.eval
    base = arm == arms.BASE
    run_name_ = arms.BASE if base else run_name(arm, seed)
    heldout = not base and arms.get(arm).heldout
    return run(e, model_dir=str(layout.model), problems_path=str(layout.test_problems),
               run_dir=None if base else str(layout.run(run_name_)), out_dir=str(layout.run_metrics(run_name_)),
               run=run_name_, arm=arm, seed=seed, heldout_modes=list(params.vact.heldout_modes) if heldout else None,
               fast=params.fast)
