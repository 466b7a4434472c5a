"""SIMULATION of a row that kills its own grading process every time it is graded (the sandbox cannot do it itself: a
watcher thread here plays its part): the hostile row names itself 'vgkillme' (prctl PR_SET_NAME); the watcher finds
that process, walks up to the pool worker above it and SIGKILLs the worker. 1 hostile + 7 slow canonical rows,
workers=2. Expected: the batch ends, the 7 neighbours pass, only the hostile row is `sandbox`; kills counted."""
import os, threading, time, collections
from vgrout.substrate.easy import easy_problems
from vgrout.substrate import grader
p = [p for p in easy_problems() if p.id == "easy/is_multiple/6"][0]
HOSTILE = "```python\nimport ctypes, time\nctypes.CDLL(None).prctl(15, b'vgkillme', 0, 0, 0)\ntime.sleep(1)\ndef is_multiple(n):\n    return True\n```"
slow = "```python\nimport time\ndef is_multiple(n):\n    time.sleep(0.2)\n    return n % 180 == 0\n```"
rows = [slow] * 3 + [HOSTILE] + [slow] * 4
kills, done = [], False
def ppid(pid):
    try: return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except OSError: return 0
def watcher():
    while not done:
        workers = set()
        for pool in list(grader._pools.values()):
            workers |= set(getattr(pool, "_processes", {}) or {})
        for d in os.listdir("/proc"):
            if d.isdigit():
                try: comm = open(f"/proc/{d}/comm").read().strip()
                except OSError: continue
                if comm == "vgkillme":
                    q = int(d)
                    while q > 1 and q not in workers: q = ppid(q)
                    if q in workers:
                        try: os.kill(q, 9); kills.append(q)
                        except OSError: pass
        time.sleep(0.05)
w = threading.Thread(target=watcher, daemon=True); w.start()
t = time.time()
gs = grader.grade_batch([p] * len(rows), rows, ["none"] * len(rows), workers=2, progress=False)
done = True
print("%.1f s, workers killed %d" % (time.time() - t, len(kills)), [(i, g.gt_pass, g.error) for i, g in enumerate(gs)])
