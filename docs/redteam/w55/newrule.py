def _bound(node: ast.AST) -> list[str]:
    """The names a node binds, other than a plain `import M` (which binds M to that module): an
    assignment, a for target, :=, a comprehension variable, a def, class, `import M as N`, from-import,
    argument, except or match name, global or nonlocal."""
    if isinstance(node, ast.Name):
        return [] if isinstance(node.ctx, ast.Load) else [node.id]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler, ast.MatchAs,
                         ast.MatchStar)):
        return [node.name] if node.name else []
    if isinstance(node, ast.Import):
        return [a.asname for a in node.names if a.asname] + [a.name.split(".")[0] for a in node.names if not a.asname
                                                             and "." in a.name]
    if isinstance(node, ast.ImportFrom):
        return [a.asname or a.name for a in node.names]
    if isinstance(node, ast.arg):
        return [node.arg]
    return list(node.names) if isinstance(node, (ast.Global, ast.Nonlocal)) else []


# What an assert's condition may call besides the response (`_test_refusal`): functions that read
# their arguments and keep nothing ("M.f": M imported by the test as `import M`).
PURE_CALLS = frozenset({"abs", "bool", "float", "frozenset", "int", "isinstance", "len", "list", "max", "min", "repr",
                        "round", "set", "sorted", "str", "sum", "tuple", "math.fabs", "math.isclose", "copy.deepcopy"})
# Conversions that may wrap both sides of `assert W(f(a)) == W(f(b))` (HumanEval/33): each reads one answer alone.
_PAIR_WRAPS = frozenset({"frozenset", "list", "set", "sorted", "str", "tuple", "len"})


@functools.lru_cache(maxsize=4096)  # every row of a problem asks again
def _test_refusal(entry: str, test: str) -> str | None:
    """Why the grader cannot run this test without telling the sandbox something that depends on
    whether its answers are right (None: it can). Checked for every test of a problem before any
    grading (`_prepare`). A whitelist of test shapes (issue 52, round 7: the round-6 blacklist, the
    entry's name inside and/or, if, all(), ..., let 19 shapes through, docs/redteam/rev6/trace6.py: an
    alias, a helper def or lambda, a generator, builtins.all, range(answer), match, takewhile,
    try/except, contextlib.suppress, an exception between two calls of one assert; forge6.py forged
    gt_pass with them). A test is run only if all of these hold; each clause closes a way for an
    answer to decide, here, whether a later call comes:
    1. It binds neither the entry's name (such a test ran whole on the canonical solution, round 6
       F3) nor anything with def, lambda, class or := (a function or a walrus carries an answer out
       of the assert that computed it: helper-def-and, generator + all(), walrus + for).
    2. Every read of the entry is a whole call: `f(args)`, or `Solution().m(args)` for a Solution
       entry, args free of the entry. So no response object (the function, a class, a bound
       method) is handed to trusted code that calls it lazily (map, filter, takewhile, a helper).
    3. Every such call is in an assert's condition, not inside a comprehension (a generator is lazy:
       `x in gen`, all(gen), zip), or is the value of a statement `v = f(args)` whose v is read only
       in assert conditions (HumanEval/32). A condition's verdict and exceptions are only recorded
       (`_EveryAssert`), so nothing outside the asserts ever sees an answer: no if, for, while,
       match, try or with of the test's runs by one.
    4. A condition calls the entry at most once (an exception raised here on the first answer would
       stop the second call: `({F: 0}[f(7)], f(0))`, list.index), except `W(f(a)) == W(f(b))` with W
       one of _PAIR_WRAPS or none (HumanEval/33): W reads one answer alone, the == runs after both.
    5. Everything else a condition calls is in PURE_CALLS, or is a name the test neither binds nor
       imports and no builtin has (the problem's own helpers: is_same_list, tree_node, poly). So no
       answer reaches the test's state through a method (`seen.append(f(7))`), setattr, operator.setitem,
       random.seed or globals(), to steer a later statement.
    What the rule trusts: the problem's helpers (setup and canonical code) keep nothing of what they
    are given, which is plain data only (`_Referee.ask`: a response object reaches no trusted code).
    No test of humaneval, easy or the LeetCode files is refused (docs/redteam/w55/scan.py)."""
    tree = ast.parse(test)
    parent = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    bound = {name for node in ast.walk(tree) for name in _bound(node)}
    modules = {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names if not a.asname}
    if entry in bound or entry in modules:
        return f"it binds the entry point's name {entry!r} itself"
    if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.NamedExpr))
           for n in ast.walk(tree)):
        return "it defines a function, lambda or class, or uses :=, which can carry an answer out of its assert"

    def call_of(read):  # the whole call a read of the entry begins, else None
        callee = read
        if entry == "Solution":  # Solution().m(args): the instance, then its method
            new, attr = parent.get(read), parent.get(parent.get(read))
            if not (isinstance(new, ast.Call) and new.func is read and not new.args and not new.keywords
                    and isinstance(attr, ast.Attribute)):
                return None
            callee = attr
        call = parent.get(callee)
        if not (isinstance(call, ast.Call) and call.func is callee):
            return None
        args = call.args + [k.value for k in call.keywords]
        return None if any(isinstance(m, ast.Name) and m.id == entry for a in args for m in ast.walk(a)) else call

    def enclosing(node, kinds):
        while node in parent and not isinstance(node, kinds):
            node = parent[node]
        return node if isinstance(node, kinds) else None
    comprehensions = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    answers = set()  # the v of each statement `v = f(args)`
    for read in (n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == entry):
        call = call_of(read)
        if call is None:
            return f"it reads {entry!r} other than as a whole call ({entry}(args) or Solution().m(args))"
        if enclosing(read, comprehensions) is not None:
            return f"it calls {entry!r} inside a comprehension or generator"
        statement = parent[call]
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0],
                                                                                             ast.Name):
            answers.add(statement.targets[0].id)
        elif (a := enclosing(read, ast.Assert)) is None or not any(n is read for n in ast.walk(a.test)):
            return f"it calls {entry!r} outside an assert's condition"
    for name in answers:
        for n in ast.walk(tree):
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and (
                    (a := enclosing(n, ast.Assert)) is None or not any(m is n for m in ast.walk(a.test))):
                return f"it reads {name!r}, an answer of {entry!r}, outside an assert's condition"

    def wrapped_call(side):  # W(call) or call, W in _PAIR_WRAPS: the call, else None
        if (isinstance(side, ast.Call) and isinstance(side.func, ast.Name) and side.func.id in _PAIR_WRAPS
                and len(side.args) == 1 and not side.keywords):
            side = side.args[0]
        return side if any(call_of(m) is side for m in ast.walk(side) if isinstance(m, ast.Name)) else None
    for a in (n for n in ast.walk(tree) if isinstance(n, ast.Assert)):
        cond = a.test
        calls = [call_of(m) for m in ast.walk(cond) if isinstance(m, ast.Name) and m.id == entry]
        pair = (isinstance(cond, ast.Compare) and len(cond.ops) == 1 and isinstance(cond.ops[0], ast.Eq)
                and wrapped_call(cond.left) is not None and wrapped_call(cond.comparators[0]) is not None)
        if len(calls) > 1 and not pair:
            return f"one assert calls {entry!r} more than once (an exception on one answer would stop the next call)"
        for call in (n for n in ast.walk(cond) if isinstance(n, ast.Call) and n not in calls
                     and not (entry == "Solution" and isinstance(n.func, ast.Name) and n.func.id == entry)):
            f = call.func
            name = f.id if isinstance(f, ast.Name) else (
                f"{f.value.id}.{f.attr}" if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None)
            module = name.split(".")[0] if name else None  # the name itself, or M of M.f
            pure = name in PURE_CALLS and module not in bound and ("." not in name or module in modules)
            helper = isinstance(f, ast.Name) and name not in bound and name not in modules and not hasattr(builtins,
                                                                                                           name)
            if not (pure or helper):
                return (f"an assert's condition calls {ast.unparse(f)!r}, neither a pure function (PURE_CALLS) nor "
                        f"one of the problem's own helpers")
    return None
