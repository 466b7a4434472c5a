"""How many hidden tests leak a bit through the request pattern: a call of the entry point that can run only after
an assert (or a comparison in a loop) of an earlier call passed."""
import ast, sys, collections
from vgrout.substrate.problems import load_any
from vgrout.substrate.easy import easy_problems
def leaky(test, entry):
    name = entry.split("(")[0].split(".")[0] if not entry.startswith("Solution") else "Solution"
    tree = ast.parse(test)
    asserts = [n for n in ast.walk(tree) if isinstance(n, ast.Assert)]
    calls_after = False
    # statement-level: an assert followed (in source order) by a use of the entry name
    lines_assert = sorted(a.lineno for a in asserts)
    uses = sorted(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name)
    loops = any(isinstance(n, (ast.For, ast.While)) and any(isinstance(m, ast.Assert) for m in ast.walk(n)) for n in ast.walk(tree))
    return (lines_assert and uses and uses[-1] > lines_assert[0]) or (loops and bool(uses)), len(asserts)
for label, ps in (("easy", easy_problems()), ("medhard", load_any(sys.argv[1]))):
    c = collections.Counter(); probs = 0
    for p in ps:
        l = [leaky(t, p.entry_point)[0] for t in p.tests]
        c[sum(l)] += 1
    print(label, len(ps), "problems; problems by number of leaky tests:", sorted(c.items())[:15])
