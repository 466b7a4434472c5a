"""The base student's pass@1 and pass@k on a candidate problem set, at a token budget: which
substrate gives it solve headroom. Candidates: `easy` (vgrout/substrate/easy.py, the first N problems,
which cover the families evenly) and `humaneval-fit` (the HumanEval problems whose canonical
response fits the budget, in their order). Problems are in mode none; sampling as eval samples.

    python -m bench.base_rates MODEL_DIR easy --n 60
    python -m bench.base_rates MODEL_DIR humaneval-fit --n 200
"""
from __future__ import annotations

import json
import time
from collections import defaultdict

import typer

from vgrout import config, stats
from vgrout.engine.model import load
from vgrout.substrate import easy, sampling
from vgrout.substrate import problems as substrate


def main(model_dir: str, candidates: str, n: int = typer.Option(60, help="problems (the first N)"),
         k: int = typer.Option(8, help="samples per problem"),
         budget: int = typer.Option(config.Eval().max_new_tokens, help="max new tokens")):
    model, tok = load(model_dir)
    if candidates == "easy":
        problems = easy.easy_problems()[:n]
    elif candidates == "humaneval-fit":
        fits = lambda p: len(tok(substrate.canonical_completion(p))["input_ids"]) <= budget  # noqa: E731
        problems = [p for p in substrate.humaneval_problems() if fits(p)][:n]
    else:
        raise typer.BadParameter(f"candidates '{candidates}': easy or humaneval-fit")
    e = config.Eval()
    t0 = time.time()
    expanded, grades = sampling.sample_and_grade(model, tok, problems, n_samples=k, temperature=e.temperature,
                                                 max_new_tokens=budget, batch_size=e.batch_size, seed=e.seed,
                                                 fast=True, progress=True)
    solved = defaultdict(int)
    for p, g in zip(expanded, grades):
        solved[p.id] += g.gt_pass
    group = lambda pid: pid.split("/")[1] if pid.startswith("easy/") else "humaneval"  # noqa: E731
    by_group = defaultdict(list)
    for pid, c in solved.items():
        by_group[group(pid)].append(c / k)
    print(json.dumps({"candidates": candidates, "n_problems": len(problems), "k": k, "budget": budget,
                      "temperature": e.temperature, "seconds": round(time.time() - t0, 1),
                      "pass@1": sum(stats.pass_at_k(k, c, 1) for c in solved.values()) / len(solved),
                      f"pass@{k}": sum(stats.pass_at_k(k, c, k) for c in solved.values()) / len(solved),
                      "no_code_block": sum(g.error == "format" for g in grades) / len(grades),
                      "pass@1_by_family": {f: round(sum(v) / len(v), 3) for f, v in sorted(by_group.items())}},
                     indent=1))


if __name__ == "__main__":
    typer.run(main)
