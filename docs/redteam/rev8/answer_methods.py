"""Which real tests (every source scan.py reads) call a method of an answer, or hand an answer to a helper
(a non-builtin, non-PURE name) -- the places where a decoded value's attribute would be read by trusted code."""
import glob, collections, ast
from vgrout.substrate import problems, easy, grader
from vgrout.substrate.modes import shown_tests_of
from vgrout.io import read_numbered_jsonl
import builtins
srcs = {"humaneval": problems.humaneval_problems(), "easy": easy.easy_problems()}
for f in sorted(glob.glob("../shared/data/leetcode/*.jsonl.gz")):
    try:
        srcs[f.split("/")[-1]] = problems.load_any(f)
    except Exception:
        rows = []
        for ln, row in read_numbered_jsonl(f):
            try: rows.append(problems.leetcodedataset_row(row, f"{f}:{ln}"))
            except Exception: pass
        srcs[f.split("/")[-1]] = rows
for name, ps in srcs.items():
    meth = collections.Counter(); helpers = collections.Counter(); ex = {}
    for p in ps:
        e = grader._entry_name(p)
        for t in p.tests + [t for t in shown_tests_of(p) if t not in p.tests]:
            tree = ast.parse(t)
            for n in ast.walk(tree):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                    v = n.func.value
                    if isinstance(v, ast.Call) and any(isinstance(m, ast.Name) and m.id == e for m in ast.walk(v)) \
                            and not (isinstance(v.func, ast.Name) and v.func.id == e):
                        meth[(e == "Solution", n.func.attr)] += 1; ex.setdefault((e == "Solution", n.func.attr), (p.id, t[:200]))
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id != e \
                        and not hasattr(builtins, n.func.id) and any(isinstance(m, ast.Name) and m.id == e for a in n.args for m in ast.walk(a)):
                    helpers[(e == "Solution", n.func.id)] += 1; ex.setdefault((e == "Solution", n.func.id), (p.id, t[:200]))
    print(f"== {name}: {len(ps)} problems")
    print("  methods of answers (solution_entry, name):", dict(meth))
    print("  helpers given an answer:", dict(helpers))
    for k in list(meth) + list(helpers): print("   ex", k, ex[k])
