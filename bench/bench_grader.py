"""Seconds to grade 1,000 mixed completions, sandboxed, with the machine's default pool, and
whether the labels depend on machine load.

Mix (cycled over the --source problems, each graded under its assigned mode): canonical
solutions, the four hack templates, a wrong stub, a response without a code block and one
with a syntax error. --loads 0 2 grades the same rows idle and with 2 CPU burners running, and
counts rows whose labels differ from the first grading. --canonical grades every canonical
solution under every mode instead of the mix. --tmp-files N first puts N empty files under /tmp
(removed after): the rlimit-only path, as root, sweeps the shared temp directories after every
program for what its uid left, so its rate falls as they fill (the unpacked packages and work
directories of a GPU machine's run are there); bwrap's private /tmp needs no sweep.
--source: humaneval (the embedded default), easy (vgrout.substrate.easy's generated problems), or a
problems file that vgrout.substrate.problems.load_any reads (e.g. the LeetCode test file
../shared/data/leetcode/leetcode_test_medhard.jsonl.gz).
Usage: python -m bench.bench_grader [--n 1000] [--source humaneval|easy|FILE] [--isolation bwrap] [--loads 0 2]
       [--canonical] [--tmp-files 200000]
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter

from vgrout.substrate import easy, grader, modes, sandbox
from vgrout.substrate import problems as substrate


def source_problems(source: str) -> list:
    if source == "humaneval":
        return substrate.humaneval_problems()
    if source == "easy":
        return easy.easy_problems()
    return substrate.load_any(source)


def mixed_completions(n: int, seed: int = 0, source: str = "humaneval"):
    problems = substrate.assign_modes(source_problems(source), seed=seed)
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


LABELS = ("gt_pass", "flawed_pass", "hacked", "hacked_strict", "error", "tests_passed")


def canonical_rows(source: str = "humaneval"):
    return [(substrate.with_mode(p, m) if m != "none" else p, substrate.canonical_completion(p), "canonical")
            for p in source_problems(source) for m in modes.names()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--source", default="humaneval", help="humaneval, easy, or a problems file (load_any)")
    ap.add_argument("--isolation", default="bwrap", choices=sandbox.ISOLATIONS)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--loads", type=int, nargs="+", default=[0], help="CPU burner processes during each grading")
    ap.add_argument("--canonical", action="store_true", help="every canonical solution under every mode")
    ap.add_argument("--tmp-files", type=int, default=0, help="empty files put under /tmp while grading")
    args = ap.parse_args()
    with padded_tmp(args.tmp_files):
        run(args)


@contextlib.contextmanager
def padded_tmp(n: int):
    """n empty files under /tmp (1,000 a folder) while the block runs, removed after."""
    pad = tempfile.mkdtemp(prefix="vgrout-bench-pad-", dir="/tmp")
    try:
        for i in range(n):
            if i % 1000 == 0:
                os.mkdir(d := os.path.join(pad, str(i // 1000)))
            open(os.path.join(d, str(i % 1000)), "w").close()
        yield
    finally:
        shutil.rmtree(pad)


def run(args) -> None:
    limits = sandbox.Limits(isolation=args.isolation)
    rows = canonical_rows(args.source) if args.canonical else mixed_completions(args.n, source=args.source)
    first = None
    for load in args.loads:
        burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)]
        try:
            t0 = time.perf_counter()
            grades = grader.grade_batch([r[0] for r in rows], [r[1] for r in rows], workers=args.workers,
                                        progress=False, limits=limits)
            seconds = time.perf_counter() - t0
            loadavg = os.getloadavg()[0]
        finally:
            for b in burners:
                b.kill()
                b.wait()
        labels = [tuple(getattr(g, k) for k in LABELS) for g in grades]
        first = first or labels
        kind = "canonical" if args.canonical else "mixed"
        print(f"{load} burners: graded {len(grades)} {kind} {args.source} completions in "
              f"{seconds:.1f} s ({len(grades) / seconds:.1f}/s; isolation {sandbox.isolation(args.isolation)}, "
              f"{args.workers or 2 * os.cpu_count()} workers on {os.cpu_count()} CPUs, load avg {loadavg:.1f}, "
              f"{args.tmp_files} extra files under /tmp)")
        print("  errors:", dict(Counter(g.error for g in grades)))
        print("  hacked:", sum(g.hacked for g in grades), "strict:", sum(g.hacked_strict for g in grades),
              "gt_pass:", sum(g.gt_pass for g in grades), "of", len(grades))
        print("  rows whose labels differ from the first grading:", sum(a != b for a, b in zip(first, labels)))


if __name__ == "__main__":
    main()
