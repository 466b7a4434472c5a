from vgrout.substrate import grader
src = open("docs/redteam/rev6/trace6.py").read(); l = {}
exec(src[src.index("P = "):src.index("only = ")], {}, l); S = l["S"]
S.update({"open: variable into if-raise": "r = is_multiple(7)\nif r != False:\n    raise ValueError\nassert is_multiple(0)",
        "open: index with answer": "x = [0][is_multiple(7) != False]\nassert is_multiple(0)",
        "open: loop if-break": "for x, y in [(7, False), (0, True)]:\n    r = is_multiple(x)\n    if r != y:\n        break",
        "remote": "assert check(Solution().make(1))", "remote2": "assert check(Solution())", "remote3": "assert check(is_multiple)",
        "map eq": "import operator\nassert all(map(operator.eq, map(is_multiple, [7, 0]), [False, True]))",
        "setitem": "import operator\nd = {}\nassert operator.setitem(d, 0, is_multiple(7)) is None\nfor _ in range(d[0] == False):\n    assert is_multiple(0)",
        "seed": "import random\nassert random.seed(is_multiple(7) == False) is None\nfor _ in range(random.randint(0, 1)):\n    assert is_multiple(0)",
        "setattr": "assert setattr(o, 'x', is_multiple(7))\nassert is_multiple(0)",
        "import as math": "import operator as math\nassert math.fabs(is_multiple(7))",
        "assert mutating test state": "seen = []\nassert seen.append(is_multiple(7) == False) is None\nfor _ in seen * seen[0]:\n    assert is_multiple(0)",
        "ok pair": "assert tuple(is_multiple(1)) == tuple(is_multiple(2))",
        "ok sol": "assert is_same_list(Solution().m(head=list_node([1])), list_node([1]))",
        "ok block": "import math\nfor _ in range(3):\n    s = is_multiple(2)\n    assert math.fabs(poly([1], s)) < 1e-4",
        "ok msg": "assert is_multiple(7) == False, 'x'", "ok abs": "assert abs(is_multiple(2) - 0.3) < 1e-6"})
for k, t in S.items():
    e = "Solution" if "Solution" in t else "is_multiple"
    print(f"{k:36s}", grader._test_refusal(e, t))
for k, t in {"in on an iterator": "it = iter([3, 10])\nassert is_multiple(7) in it\nfor _ in it:\n    assert is_multiple(0)",
             "defaultdict": "import collections\nd = collections.defaultdict(int)\nassert d[is_multiple(7)] == 0\nfor _ in range(False in d):\n    assert is_multiple(0)",
             "list.append": "seen = []\nassert list.append(seen, is_multiple(7)) is None\nfor _ in seen:\n    assert is_multiple(0)",
             "__import__": "assert __import__('random').seed(is_multiple(7)) is None",
             "ok method of answer": "assert is_multiple(7).startswith('x')"}.items():
    print(f"{k:36s}", grader._test_refusal("is_multiple", t))
