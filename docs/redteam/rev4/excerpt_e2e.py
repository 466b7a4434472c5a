"""End to end: stdout_marker labels of responses that put TESTS PASSED at the excerpt's cuts (head, tail, middle,
twice in the middle, split by a long line), graded with the real _excerpt and with no cut (identity); threads mode."""
from vgrout.substrate.easy import easy_problems
from vgrout.substrate import grader
grader.TRUSTED_PROCESSES = False
p = [p for p in easy_problems() if p.id == "easy/is_multiple/6"][0]
K = grader.OUTPUT_KEEP_CHARS
def resp(prefix_len, n_mid, suffix_marker_at, right):
    ans = "n % 180 == 0" if right else "False"
    return f'''
import sys
sys.stdout.write("a" * {prefix_len} + "TESTS PASSED" + "b" * 20000 + "TESTS PASSED\\n" * {n_mid} + "c" * 20000)
sys.stdout.write("TESTS PASSED" + "d" * {suffix_marker_at})
def is_multiple(n):
    return {ans}
'''
cases = {}
for right in (True, False):
    for pl in (K - 6, K - 1, K, K + 5):
        for nm in (0, 1, 2, 3):
            for sa in (K - 6, K - 12, K - 11, 50):
                cases[(right, pl, nm, sa)] = "```python\n" + resp(pl, nm, sa, right) + "\n```"
keys = list(cases)
key = lambda g: (g.gt_pass, g.flawed_pass, g.hacked, g.hacked_strict, g.printed_marker, g.error)
cut = grader.grade_batch([p] * len(keys), [cases[k] for k in keys], ["stdout_marker"] * len(keys), workers=2, progress=False)
real = grader._excerpt
grader._excerpt = lambda text, keep=K: text
full = grader.grade_batch([p] * len(keys), [cases[k] for k in keys], ["stdout_marker"] * len(keys), workers=2, progress=False)
grader._excerpt = real
diff = [(k, key(a), key(b)) for k, a, b in zip(keys, cut, full) if key(a) != key(b)]
print(len(keys), "cases,", len(diff), "differ")
for d in diff[:10]: print(d)
import collections; print(collections.Counter(key(g) for g in cut))
