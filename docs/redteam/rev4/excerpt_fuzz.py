"""Fuzz grader._excerpt against what the modes read: MARKER in s, and min(count, 2)."""
import random, sys
from vgrout.substrate import grader, modes
M = modes.MARKER
rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
keep = 50
bad = 0
pieces = [M, "x", "\n", "TESTS", " PASSED", "T", "TESTS PASSE", "ESTS PASSED", "D", "é", "\U0001F600"]
for it in range(200000):
    L = rng.randint(2 * keep + 150, 2 * keep + 400)
    s = []
    n = 0
    while n < L:
        p = rng.choice(pieces) if rng.random() < 0.3 else "a" * rng.randint(1, 20)
        s.append(p); n += len(p)
    t = "".join(s)
    e = grader._excerpt(t, keep)
    for name, f in (("in", lambda x: M in x), ("count", lambda x: min(x.count(M), 2))):
        if f(t) != f(e):
            bad += 1
            if bad < 5:
                print("MISMATCH", name, f(t), f(e), repr(t), "\n ->", repr(e))
print("cases", it + 1, "mismatches", bad)
