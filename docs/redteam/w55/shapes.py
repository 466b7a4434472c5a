import ast, pickle, collections
allt = pickle.load(open("docs/redteam/w55/tests.pkl", "rb"))
pos = collections.Counter(); callees = collections.Counter(); stmts = collections.Counter(); ex = {}
for (e, t), src in allt.items():
    tree = ast.parse(t); par = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    for s in tree.body: stmts[type(s).__name__] += 1; ex.setdefault(type(s).__name__, (src, t[:200]))
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id == e:
            p = par[n]
            if isinstance(p, ast.Call) and p.func is n:
                pp = par[p]
                k = "E().m(" if isinstance(pp, ast.Attribute) and isinstance(par[pp], ast.Call) and par[pp].func is pp and not p.args else "E("
                if k == "E(" and e == "Solution": k = "Solution(args or no attr)"
            else: k = "other:" + type(p).__name__
            pos[k] += 1; ex.setdefault(k, (src, t[:200]))
        if isinstance(n, ast.Assert):
            for m in ast.walk(n.test):
                if isinstance(m, ast.Call):
                    f = m.func
                    key = f.id if isinstance(f, ast.Name) else ("." + f.attr if isinstance(f, ast.Attribute) and not (isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name) and f.value.func.id == e) else ("E().m" if isinstance(f, ast.Attribute) else type(f).__name__))
                    if key != e: callees[key] += 1; ex.setdefault("call " + key, (src, t[:200]))
print(pos); print(stmts); print(callees)
for k, v in ex.items():
    if not k.startswith("call") or callees[k[5:]] < 50: print(k, v)
