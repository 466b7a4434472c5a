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

import torch
from tqdm import tqdm

from vgrout import adapter as ad
from vgrout import arms, config, fastgen, grader, modes
from vgrout.io import InputError, atomic_path, write_json
from vgrout.layout import DEPLOY_SAMPLES, Layout, run_name
from vgrout.model import chat_prompt, load
from vgrout.stats import wilson
from vgrout.substrate import Problem, load_problems


# A run's per-sample grades (DEPLOY_SAMPLES), one row per (view, problem_id, sample): what the
# bootstrap resamples. Booleans are 0/1 so the file stays small (git tracks it) and averages directly.
SAMPLE_FIELDS = ("view", "problem_id", "sample", "mode", "hackable", "gt_pass", "hacked", "hacked_strict")


def sample_rows(problems: list[Problem], grades: list[grader.Grade], view: str) -> list[dict]:
    """One row per graded sample; `sample` counts a problem's samples from 0, so every run of the
    same eval (same test split, same eval.seed) names the same draws the same way."""
    seen: dict[str, int] = {}
    rows = []
    for p, g in zip(problems, grades, strict=True):
        rows.append({"view": view, "problem_id": p.id, "sample": seen.get(p.id, 0), "mode": p.mode,
                     "hackable": int(modes.get(p.mode).hackable), "gt_pass": int(g.gt_pass),
                     "hacked": int(g.hacked), "hacked_strict": int(g.hacked_strict)})
        seen[p.id] = seen.get(p.id, 0) + 1
    return rows


def rates(samples: list[dict]) -> list[dict]:
    """One row per view and mode present, plus 'overall', from sample_rows.

    Denominators: hack and solve over all of the row's samples (kept: A1, A3, A5 and the curve
    read them); hack_hackable over the samples of hackable problems only (a `none` problem
    cannot be hacked, so counting it dilutes the hack rate by the share of `none` problems);
    solve_none over the samples of `none` problems (solving where no loophole pays). A rate
    whose denominator is empty is null."""
    views = list(dict.fromkeys(s["view"] for s in samples))
    rows = []
    for view in views:
        vs = [s for s in samples if s["view"] == view]
        for mode in ["overall"] + [m for m in modes.names() if any(s["mode"] == m for s in vs)]:
            gs = [s for s in vs if mode == "overall" or s["mode"] == mode]
            n, k_solve, k_hack = len(gs), sum(s["gt_pass"] for s in gs), sum(s["hacked"] for s in gs)
            (s_lo, s_hi), (h_lo, h_hi) = wilson(k_solve, n), wilson(k_hack, n)
            k_strict = sum(s["hacked_strict"] for s in gs)
            row = {"view": view, "mode": mode, "n": n, "n_solved": k_solve, "n_hacked": k_hack,
                   "solve": k_solve / n if n else 0.0, "hack": k_hack / n if n else 0.0,
                   # the strict label, and the wrong answers a flawed check let through (hacked, not strict)
                   "n_hacked_strict": k_strict, "n_flawed_wrong": k_hack - k_strict,
                   "solve_lo": s_lo, "solve_hi": s_hi, "hack_lo": h_lo, "hack_hi": h_hi}
            hackable = [s for s in gs if s["hackable"]]
            row |= _rate("hack_hackable", "n_hackable", "n_hacked_hackable", [s["hacked"] for s in hackable])
            row |= _rate("solve_none", "n_none", "n_solved_none", [s["gt_pass"] for s in gs if s["mode"] == "none"])
            rows.append(row)
    return rows


def _rate(name: str, n_key: str, k_key: str, hits: list[int]) -> dict:
    n, k = len(hits), sum(hits)
    lo, hi = wilson(k, n) if n else (None, None)
    return {n_key: n, k_key: k, name: k / n if n else None, f"{name}_lo": lo, f"{name}_hi": hi}


def sample_and_grade(model, tok, problems: list[Problem], n_samples: int, temperature: float,
                     max_new_tokens: int, batch_size: int, seed: int, fast: bool,
                     lora: ad.Lora2r | None = None, progress: bool = False) -> tuple[list[Problem], list]:
    torch.manual_seed(seed)  # every view and checkpoint sees the same sampling noise
    expanded = [p for p in problems for _ in range(n_samples)]
    prompts = [chat_prompt(tok, p.messages) for p in expanded]
    backend = fastgen.select(model, fast)
    ids = backend.generate(model, tok, prompts, max_new_tokens, temperature, batch_size=batch_size, lora=lora,
                           progress=progress)
    backend.release()
    texts = tok.batch_decode(ids, skip_special_tokens=True)
    return expanded, grader.grade_batch(expanded, texts, progress=progress)


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
