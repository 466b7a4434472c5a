"""Sandboxed programs per second under one isolation, with N extra empty files under /tmp: the
sandbox alone, without the grader (each program prints a sum). The rlimit-only path, as root,
sweeps the shared temp directories for what each program's uid left, so its rate falls as /tmp
fills; bwrap gives each program a private /tmp. Runs 400 programs on 2 threads per CPU.
Usage: python -m bench.bench_sandbox {bwrap|rlimit} N   (from the repository root)"""
import os
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.getcwd())
from bench_grader import padded_tmp  # noqa: E402 (this folder is on the path: the script's own)

from vgrout.substrate import sandbox  # noqa: E402

iso, n = sys.argv[1], int(sys.argv[2])
with padded_tmp(n):
    lim = sandbox.Limits(isolation=iso)
    t0, c0 = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    with ThreadPoolExecutor(2 * os.cpu_count()) as pool:
        res = list(pool.map(lambda i: sandbox.run({"m.py": "print(sum(range(1000)))"}, "m.py", limits=lim), range(400)))
    t1, c1 = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
ok = sum(r.stdout.strip() == "499500" for r in res)
print(f"{iso} pad={n}: {len(res)} runs in {t1 - t0:.1f}s = {len(res) / (t1 - t0):.0f}/s, ok {ok}; children cpu "
      f"{(c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime) / len(res) * 1000:.0f} ms/run")
