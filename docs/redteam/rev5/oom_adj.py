"""Inside a sandbox: oom_score_adj value, and attempts to lower it (/proc/self, /proc/1, oom_adj, a child's, and
a fresh procfs mount): all should fail and stay 1000."""
from vgrout.substrate import sandbox
code = '''import os, ctypes
msgs = [open("/proc/self/oom_score_adj").read().strip(), open("/proc/1/oom_score_adj").read().strip()]
for path in ("/proc/self/oom_score_adj", "/proc/1/oom_score_adj", "/proc/self/oom_adj"):
    try:
        with open(path, "w") as f: f.write("-1000")
        msgs.append(path + " WRITTEN")
    except OSError as e: msgs.append(path + " " + e.strerror)
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("/tmp/p", exist_ok=True)
r = libc.mount(b"proc", b"/tmp/p", b"proc", 0, None); msgs.append("mount proc rc %d errno %d" % (r, ctypes.get_errno()))
r = libc.unshare(0x00020000); msgs.append("unshare(NEWNS) rc %d errno %d" % (r, ctypes.get_errno()))
msgs.append(open("/proc/self/oom_score_adj").read().strip())
print(msgs)
'''
r = sandbox.run({"main.py": code}, "main.py", limits=sandbox.Limits(cpu_s=5))
print(r.returncode, r.stdout.strip(), r.stderr.strip()[-300:])
