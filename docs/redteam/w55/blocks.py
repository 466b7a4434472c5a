import ast, pickle
allt = pickle.load(open("docs/redteam/w55/tests.pkl", "rb"))
for (e, t), src in allt.items():
    b = ast.parse(t).body
    if not all(isinstance(s, ast.Assert) for s in b) or any(isinstance(n, ast.Assert) and sum(isinstance(m, ast.Name) and m.id == e for m in ast.walk(n)) > 1 for n in ast.walk(ast.parse(t))):
        print("=====", src, e); print(t[:1500])
