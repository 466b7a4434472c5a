"""Can a sandboxed program see or leave its cgroups? Runs one probe program in sandbox.run and prints what it saw."""
from vgrout.substrate import sandbox
PROBE = r'''
import os
print("cgroup:", open("/proc/self/cgroup").read().replace("\n", " | "))
for p in ["/sys", "/sys/fs/cgroup", "/proc/1/cgroup"]:
    print(p, os.path.exists(p), os.listdir(p) if os.path.isdir(p) else "")
for target in ["/sys/fs/cgroup/cpu/cgroup.procs", "/sys/fs/cgroup/unified/cgroup.procs", "/proc/sys/kernel/sched_autogroup_enabled", "/proc/self/autogroup"]:
    try:
        with open(target, "w") as f: f.write(str(os.getpid()) if "procs" in target else "0")
        print("WROTE", target)
    except OSError as e:
        print("refused", target, e)
try:
    print("autogroup:", open("/proc/self/autogroup").read().strip())
except OSError as e: print("autogroup read", e)
try:
    os.setsid(); print("setsid OK")
except OSError as e: print("setsid", e)
try:
    os.setpgid(0, 0); print("setpgid OK")
except OSError as e: print("setpgid", e)
try:
    os.nice(-5); print("nice -5 OK")
except OSError as e: print("nice -5", e)
import ctypes
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)); print("SCHED_FIFO OK")
except OSError as e: print("SCHED_FIFO", e)
try:
    os.sched_setaffinity(0, {0}); print("affinity OK", os.sched_getaffinity(0))
except OSError as e: print("affinity", e)
try:
    import mmap; m = mmap.mmap(-1, 1 << 20); m.madvise(mmap.MADV_HUGEPAGE); print("madvise ok")
except Exception as e: print("madvise", e)
try:
    os.unshare(os.CLONE_NEWCGROUP); print("unshare cgroup OK")
except (OSError, AttributeError) as e: print("unshare cgroup", e)
try:
    os.mount if hasattr(os, "mount") else None
except Exception: pass
'''
r = sandbox.run({"main.py": PROBE}, "main.py")
print(r.stdout); print("stderr:", r.stderr[-2000:])
