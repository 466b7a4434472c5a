"""rev9 DISTURB probes on grader round 8 (ead7f1f). Usage: disturb.py PROBLEM N AT VARIANT [VARIANT...]
For each variant: the neighbour (canonical) alone, then beside N hostile copies of the variant (grade_batch, 2 workers,
neighbour at batch position AT). Variants: control (one plain spinner: a legitimately slow reply), spin63 (63 tasks
spinning, no setsid), membw (4 processes memcpy 2x48 MiB buffers: memory bandwidth / L3 thrash), forkchurn (8
processes fork+exit+wait as fast as they can), io (4 processes reading every file under /usr: page cache / disk)."""
import sys, time
from vgrout.substrate import grader, problems
ps = {p.id: p for p in problems.load_any("../shared/data/leetcode/leetcode_test_medhard.jsonl.gz")}
pid, N, AT = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
P = ps[pid]
canon = "```python\n" + P.canonical_solution + "\n```"
exec(open("docs/redteam/rev9/disturb_variants.py").read())
V_OLD = {
 "control": "while True:\n    pass\n",
 "spin63": "import os, threading\nfor i in range(20):\n    if os.fork() == 0:\n        break\nfor j in range(2):\n    threading.Thread(target=lambda: [0 for _ in iter(int, 1)], daemon=True).start()\nwhile True:\n    pass\n",
 "membw": "import os\nfor i in range(3):\n    if os.fork() == 0:\n        break\na = bytearray(48 << 20); b = bytearray(48 << 20)\nwhile True:\n    a[:] = b; b[:] = a\n",
 "forkchurn": "import os\nfor i in range(7):\n    if os.fork() == 0:\n        break\nwhile True:\n    p = os.fork()\n    if p == 0:\n        os._exit(0)\n    os.waitpid(p, 0)\n",
 "io": ("import os\nfiles = []\nfor r, d, fs in os.walk('/usr'):\n    for f in fs:\n        p = os.path.join(r, f)\n        if os.path.isfile(p) and not os.path.islink(p):\n            files.append(p)\n"
        "for i in range(3):\n    if os.fork() == 0:\n        break\nimport random\nrandom.shuffle(files)\nwhile True:\n    for p in files:\n        try:\n            with open(p, 'rb') as fh:\n                while fh.read(1 << 20):\n                    pass\n        except OSError:\n            pass\n"),
}
def show(tag, g, t):
    print(f"{tag}: gt_pass={g.gt_pass} error={g.error} tests={g.tests_passed}/{g.tests_total} cpu_s={g.cpu_s} (batch wall {t:.1f}s)", flush=True)
def alone(tag):
    t = time.time(); (g,) = grader.grade_batch([P], [canon], workers=2, progress=False); show(tag, g, time.time() - t)
print("problem", pid, "cpu_limit_s", P.cpu_limit_s, "N", N, "AT", AT, flush=True)
alone("alone")
for v in sys.argv[4:]:
    comps = ["```python\n" + V[v] + "```"] * N; comps.insert(AT, canon)
    t = time.time(); out = grader.grade_batch([P] * (N + 1), comps, workers=2, progress=False)
    show(f"beside {N} {v}", out[AT], time.time() - t)
    print(f"  {v} hostile labels:", sorted({(g.gt_pass, g.error, g.cpu_s and round(g.cpu_s, 1)) for i, g in enumerate(out) if i != AT}), flush=True)
    alone("alone")
