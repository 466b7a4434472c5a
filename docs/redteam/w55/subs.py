import ast, pickle, collections
allt = pickle.load(open("docs/redteam/w55/tests.pkl", "rb"))
c = collections.Counter(); ex = {}
for (e, t), src in allt.items():
    for a in ast.walk(ast.parse(t)):
        if isinstance(a, ast.Assert):
            for n in ast.walk(a.test):
                if isinstance(n, (ast.Subscript, ast.Starred, ast.Attribute, ast.IfExp, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Dict, ast.Set)):
                    k = (type(n).__name__, type(getattr(n, "value", None)).__name__); c[k] += 1; ex.setdefault(k, (src, t[:150]))
print(c)
for k, v in ex.items(): print(k, v)
