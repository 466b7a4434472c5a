"""Issue 52 round 7: refusals of the whitelist _test_refusal over humaneval, easy, and every LeetCode file in
../shared/data/leetcode (load_any, else leetcodedataset_row per row), and over the round-6 shapes of docs/redteam/rev6."""
import glob, collections
from vgrout.substrate import problems, easy, grader
from vgrout.substrate.modes import shown_tests_of
from vgrout.io import read_numbered_jsonl
srcs = {"humaneval": problems.humaneval_problems(), "easy": easy.easy_problems()}
for f in sorted(glob.glob("../shared/data/leetcode/*.jsonl.gz")):
    try:
        srcs[f.split("/")[-1]] = problems.load_any(f)
    except Exception:
        rows, bad = [], 0
        for ln, row in read_numbered_jsonl(f):
            try: rows.append(problems.leetcodedataset_row(row, f"{f}:{ln}"))
            except Exception: bad += 1
        srcs[f.split("/")[-1] + " (leetcodedataset_row per row)"] = rows
        print(f, "rows read:", len(rows), "unreadable:", bad)
total = 0
for name, ps in srcs.items():
    c = collections.Counter(); ex = []; nt = 0
    for p in ps:
        e = grader._entry_name(p)
        for t in p.tests + [t for t in shown_tests_of(p) if t not in p.tests]:
            nt += 1; w = grader._test_refusal(e, t)
            if w: c[w] += 1; ex.append((p.id, w, t[:150]))
    total += sum(c.values())
    print(f"{name}: {len(ps)} problems, {nt} tests; refused {sum(c.values())}", dict(c), ex[:3], flush=True)
print("TOTAL REFUSED", total)
