import sys, glob, collections, ast, pickle
from vgrout.substrate import problems, easy, grader
from vgrout.substrate.modes import shown_tests_of
from vgrout.io import read_numbered_jsonl
srcs = {"humaneval": problems.humaneval_problems(), "easy": easy.easy_problems()}
for f in sorted(glob.glob("../shared/data/leetcode/*.jsonl.gz")):
    try: srcs[f.split("/")[-1]] = problems.load_any(f)
    except Exception:
        rows = []
        for ln, row in read_numbered_jsonl(f):
            try: rows.append(problems.leetcodedataset_row(row, f"{f}:{ln}"))
            except Exception: pass
        srcs[f.split("/")[-1]] = rows
allt = {}
for name, ps in srcs.items():
    for p in ps:
        e = grader._entry_name(p)
        for t in p.tests + [t for t in shown_tests_of(p) if t not in p.tests]:
            allt.setdefault((e, t), (name, p.id))
    print(name, len(ps), flush=True)
pickle.dump(allt, open("docs/redteam/w55/tests.pkl", "wb"))
print(len(allt), "distinct (entry, test)")
