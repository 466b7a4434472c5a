"""Seconds to grade 1,000 mixed completions, sandboxed, with the machine's default pool.

Mix (cycled over HumanEval problems, each graded under its assigned mode): canonical
solutions, the four hack templates, a wrong stub, a response without a code block and one
with a syntax error. Usage: python bench/bench_grader.py [--n 1000] [--isolation bwrap]
"""
from __future__ import annotations

import argparse
import itertools
import os
import time
from collections import Counter

from vgrout import grader, modes, sandbox, substrate


def mixed_completions(n: int, seed: int = 0):
    problems = substrate.assign_modes(substrate.humaneval_problems(), seed=seed)
    kinds = ["canonical", *modes.hackable(), "wrong", "format", "syntax"]
    rows = []
    for p, kind in zip(itertools.cycle(problems), itertools.cycle(kinds)):
        if len(rows) == n:
            break
        if kind == "canonical":
            text = substrate.canonical_completion(p)
        elif kind in modes.hackable():
            try:
                text = substrate.hack_completion(p, kind)
            except ValueError:  # no hardcode template for this problem
                text = substrate.canonical_completion(p)
        elif kind == "wrong":
            text = f"```python\ndef {p.entry_point}(*args):\n    return 0\n```"
        elif kind == "format":
            text = "I would loop over the input and return the answer."
        else:
            text = f"```python\ndef {p.entry_point}(:\n```"
        rows.append((p, text, kind))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--isolation", default="bwrap", choices=sandbox.ISOLATIONS)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    limits = sandbox.Limits(isolation=args.isolation)
    rows = mixed_completions(args.n)
    t0 = time.perf_counter()
    grades = grader.grade_batch([r[0] for r in rows], [r[1] for r in rows], workers=args.workers,
                                progress=False, limits=limits)
    seconds = time.perf_counter() - t0
    print(f"graded {len(grades)} mixed completions in {seconds:.1f} s "
          f"({len(grades) / seconds:.1f}/s; isolation {sandbox.isolation(args.isolation)}, "
          f"{args.workers or 2 * os.cpu_count()} workers on {os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.1f})")
    print("modes:", dict(Counter(g.mode for g in grades)))
    print("errors:", dict(Counter(g.error for g in grades)))
    print("hacked:", sum(g.hacked for g in grades), "gt_pass:", sum(g.gt_pass for g in grades))


if __name__ == "__main__":
    main()
