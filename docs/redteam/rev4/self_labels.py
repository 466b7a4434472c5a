"""Issue 52 item 8 recheck + OOM label: what error label does a row get when it SIGKILLs itself, SIGTERMs itself
after writing 'bwrap:' to stderr, or is OOM-killed in its memory cgroup (harness killed)?"""
from vgrout.substrate.easy import easy_problems
from vgrout.substrate import grader
p = [p for p in easy_problems() if p.id == "easy/is_multiple/6"][0]
bodies = {
 "sigkill_self": "import os\nos.kill(os.getpid(), 9)\ndef is_multiple(n):\n    return n % 180 == 0",
 "bwrap_sigterm": "import os, sys\nsys.stderr.write('bwrap: Creating new namespace failed: No space left on device\\n'); sys.stderr.flush()\nos.kill(1, 15)\nos.kill(os.getpid(), 15)\ndef is_multiple(n):\n    return n % 180 == 0",
 "oom_harness": "import os\nfds, chunk = [], b'x' * ((4 << 20) - 4096)\nwhile True:\n    fd = os.memfd_create('m'); os.write(fd, chunk); fds.append(fd)\ndef is_multiple(n):\n    return n % 180 == 0",
 "memoryerror_raise": "def is_multiple(n):\n    raise MemoryError",
}
names = list(bodies)
gs = grader.grade_batch([p] * len(names), ["```python\n" + bodies[k] + "\n```" for k in names], ["exit_code"] * len(names), workers=2, progress=False)
for k, g in zip(names, gs):
    print(k, "gt", g.gt_pass, "error", g.error, "cpu_s", g.cpu_s, "reward", g.reward)
