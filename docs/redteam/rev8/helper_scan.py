"""Every helper a real test calls (a name neither builtin, entry, nor bound by the test), by source, and
whether any test reads the trusted namespace's shared `random` module without importing it."""
import glob, collections, ast, builtins, inspect
from vgrout.substrate import problems, easy, grader
from vgrout.substrate.modes import shown_tests_of
from vgrout.io import read_numbered_jsonl
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
    used = collections.Counter(); rnd = []; ex = {}
    for p in ps:
        e = grader._entry_name(p)
        for t in p.tests + [t for t in shown_tests_of(p) if t not in p.tests]:
            tree = ast.parse(t)
            bound = {b for n in ast.walk(tree) for b in grader._bound(n)}
            mods = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            for n in ast.walk(tree):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound and n.id not in mods \
                        and n.id != e and not hasattr(builtins, n.id):
                    used[n.id] += 1; ex.setdefault(n.id, p.id)
                    if n.id == "random": rnd.append(p.id)
    print(f"== {name}: names read from the trusted namespace:", dict(used))
    print("   tests using the shared random module without importing it:", len(rnd), rnd[:5])
    print("   examples:", {k: ex[k] for k in list(ex)[:30]})
