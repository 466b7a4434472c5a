"""rev12: sandbox._quota_cpus / _run_slots on fake cgroup trees (files only): malformed, absent, nested, tiny."""
import os, tempfile, math
from vgrout.substrate import sandbox as S
def tree(files):  # {relpath: text}; returns the leaf "own" cgroup (dir of the deepest path)
    root = tempfile.mkdtemp(prefix="rt12q-")
    for rel, text in files.items():
        p = os.path.join(root, rel); os.makedirs(os.path.dirname(p), exist_ok=True)
        if text is not None: open(p, "w").write(text)
    return root
def show(tag, files, leaf, v2):
    root = tree(files)
    try: r = S._quota_cpus(os.path.join(root, leaf), v2=v2)
    except Exception as e: r = f"RAISES {type(e).__name__}: {e}"
    slots = (max(1, min(2, math.floor(r + 1e-9))) if isinstance(r, float) else r)
    print(f"{tag:55s} -> quota {r!r}; slots on 2 CPUs {slots!r}")
# v2 (walk ends where cpu.max is absent: our fake root's parent has none)
show("v2 leaf max, parent 150000/100000", {"c/cpu.max": "150000 100000\n", "c/o/cpu.max": "max 100000\n"}, "c/o", True)
show("v2 nested 300000 above 50000", {"c/cpu.max": "50000 100000", "c/o/cpu.max": "300000 100000"}, "c/o", True)
show("v2 cpu.max 'max' (one token)", {"c/cpu.max": "max"}, "c", True)
show("v2 cpu.max empty", {"c/cpu.max": ""}, "c", True)
show("v2 gap: middle cgroup without cpu.max, quota above", {"c/cpu.max": "100000 100000", "c/m/x": "", "c/m/o/cpu.max": "max 100000"}, "c/m/o", True)
show("v2 quota 1000/100000 (kernel's least)", {"c/cpu.max": "1000 100000"}, "c", True)
# v1
show("v1 -1 everywhere", {"c/cpu.cfs_quota_us": "-1", "c/cpu.cfs_period_us": "100000"}, "c", False)
show("v1 100000/100000", {"c/cpu.cfs_quota_us": "100000\n", "c/cpu.cfs_period_us": "100000\n"}, "c", False)
show("v1 quota file, period file absent", {"c/cpu.cfs_quota_us": "100000"}, "c", False)
show("v1 period absent on leaf, quota 1 CPU above", {"c/cpu.cfs_quota_us": "100000", "c/cpu.cfs_period_us": "100000", "c/o/cpu.cfs_quota_us": "-1"}, "c/o", False)
show("v1 quota '' (empty)", {"c/cpu.cfs_quota_us": "", "c/cpu.cfs_period_us": "100000"}, "c", False)
root = tree({"c/cpu.max": "100000 100000"}); os.chmod(os.path.join(root, "c/cpu.max"), 0)
print("(as root a mode-0 file reads anyway)" if os.getuid() == 0 else "")
print("this host: _run_slots() =", S._run_slots(), "affinity", len(os.sched_getaffinity(0)),
      "parent", S._cpu_cgroup_parent(), "v2", S._cpu_v2())
