"""Sample n completions per problem and grade them, as the substrate's self-check and the deploy
evaluation both do, and the per-sample rows and rates (Wilson 95% intervals) they report.
"""
from __future__ import annotations

import torch

from vgrout.engine import adapter as ad
from vgrout.engine import fastgen
from vgrout.engine.model import chat_prompt
from vgrout.stats import wilson
from vgrout.substrate import grader, modes
from vgrout.substrate.problems import Problem

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
