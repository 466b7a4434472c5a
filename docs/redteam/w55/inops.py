import ast, pickle, collections
allt = pickle.load(open("docs/redteam/w55/tests.pkl", "rb"))
c = collections.Counter(); ex = {}
for (e, t), src in allt.items():
    for n in ast.walk(ast.parse(t)):
        if isinstance(n, ast.Compare):
            for op, r in zip(n.ops, n.comparators):
                k = (type(op).__name__, type(r).__name__); c[k] += 1; ex.setdefault(k, (src, t[:120]))
print(c)
for k, v in ex.items():
    if k[0] in ("In", "NotIn"): print(k, v)
