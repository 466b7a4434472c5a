"""Setup classes of the LeetCode problems: any dunder that calls a non-dunder method/attr of self/other (a field of a
decoded instance could be a remote callable), and the distinct setup codes."""
import ast, sys, collections
from vgrout.substrate.problems import load_any
ps = load_any(sys.argv[1])
seen = collections.Counter()
for p in ps:
    seen[p.setup_code] += 1
print(len(ps), "problems", len(seen), "distinct setup codes")
for code in seen:
    t = ast.parse(code)
    for c in [n for n in ast.walk(t) if isinstance(n, ast.ClassDef)]:
        for f in [n for n in c.body if isinstance(n, ast.FunctionDef)]:
            print(" class", c.name, "def", f.name)
