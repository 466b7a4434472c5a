"""rev12 (fault injection, not completion-reachable as far as I found): run()'s finally gives its slots back as its
LAST statement; anything before it that raises (here: _rmdir_once_empty raising a non-EBUSY OSError once, as its
code does for any errno but EBUSY; or warnings.warn under -W error) leaves the slot held for the process's life."""
import os, sys, time, errno, subprocess, fcntl
from vgrout.substrate import sandbox as S
print('probes first (unpatched):', S._cpu_cgroup_parent(), S._memory_cgroup_parent(), S._cgroup_parent(), S._run_slots())
_orig, hit = S._rmdir_once_empty, []
def _once(path, what):
    if not hit:
        hit.append(path); raise OSError(errno.EIO, "injected", path)
    return _orig(path, what)
S._rmdir_once_empty = _once
try:
    r = S.run({"m.py": "print(1)"}, "m.py", limits=S.Limits(cpu_s=1, cpus=2.0))
    print("run returned", r.stdout.strip())
except OSError as e:
    print("run raised:", e)
d = S._slots_dir()
print("slots held by this process now:", sorted(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) for fd in S._held))
for k in range(S._run_slots()):
    fd = os.open(os.path.join(d, str(k)), os.O_RDWR)
    try: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); print(f"slot {k}: free"); fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError: print(f"slot {k}: LOCKED after the run ended")
    os.close(fd)
try:
    out = subprocess.run([sys.executable, "-c", "import time; from vgrout.substrate import sandbox as S; t=time.time(); "
                          "r=S.run({'m.py':'print(2)'}, 'm.py', limits=S.Limits(cpu_s=1)); print(f'other process ran after {time.time()-t:.1f}s')"],
                         capture_output=True, text=True, timeout=15)
    print("another process:", out.stdout.strip(), out.stderr.strip()[-300:])
except subprocess.TimeoutExpired:
    print("another process's run (cpus=1) still waiting for a slot after 15 s (killed by the probe)")
