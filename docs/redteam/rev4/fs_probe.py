"""What a sandbox can write after round 4 (/ and /dev read-only, /dev/shm 8 MiB, /tmp 64 MiB)."""
from vgrout.substrate import sandbox
code = r'''
import os, subprocess
def tryw(p):
    try:
        with open(p, "wb") as f: f.write(b"x")
        return "WRITABLE"
    except OSError as e:
        return f"no ({e.strerror})"
for p in ["/x", "/dev/x", "/dev/shm/x", "/tmp/x", "/proc/x", "/usr/x", "/run/x", "/etc/x", "/var/x", "/home/x", "/dev/null", "/dev/mqueue/x"]:
    print(p, tryw(p))
print("mkdir /newdir:", end=" ")
try: os.mkdir("/newdir"); print("MADE")
except OSError as e: print("no", e.strerror)
print(open("/proc/self/mountinfo").read())
print("uid", os.getuid(), "ls /", sorted(os.listdir("/")))
for ns in ["user","mnt","pid","net","uts","ipc","cgroup"]:
    try: print(ns, os.readlink(f"/proc/self/ns/{ns}"))
    except OSError as e: print(ns, e)
r = subprocess.run([__import__("sys").executable, "-c", "import os; os.unshare(os.CLONE_NEWUSER) if hasattr(os,'unshare') else None; print('unshare ok')"], capture_output=True, text=True)
print("unshare user:", r.returncode, r.stdout, r.stderr[-200:])
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print("unshare(CLONE_NEWUTS) ->", libc.unshare(0x04000000), ctypes.get_errno())
import multiprocessing
try:
    l = multiprocessing.Lock(); print("multiprocessing.Lock ok")
except Exception as e: print("mp lock", type(e).__name__, e)
import tempfile
print("tempfile", tempfile.mkstemp())
'''
r = sandbox.run({"m.py": code}, "m.py", limits=sandbox.Limits(cpu_s=4.0))
print("rc", r.returncode, r.failure); print(r.stdout); print(r.stderr[-2000:])
