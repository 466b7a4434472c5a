import ast, glob, re
from vgrout.substrate import grader
for f in sorted(glob.glob("tests/**/*.py", recursive=True)):
    for n in ast.walk(ast.parse(open(f).read())):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and "assert " in n.value:
            try: ast.parse(n.value)
            except SyntaxError: continue
            for e in ({"add", "f", "rev", "is_even", "ident", "Solution", "g", "h"} & set(re.findall(r"\w+", n.value))) or {"nothing_here"}:
                if True:
                    w = grader._test_refusal(e, n.value)
                    if w: print(f"{f}:{n.lineno} [{e}] {n.value[:90]!r} -> {w[:70]}")
