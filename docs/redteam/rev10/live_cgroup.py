"""rev10: is the quota on the run's cpu cgroup, and does it hold every task (processes and threads) of a run?
Runs spinT (63 tasks) via sandbox.run with Limits(cpu_s=6, cpus=X) in a thread; reads the run's v1 cpu cgroup."""
import sys, os, glob, threading, time
from vgrout.substrate import sandbox
X = float(sys.argv[1])
exec(open(os.path.join(os.path.dirname(__file__), "disturb_variants.py")).read())
par = sandbox._cpu_cgroup_parent()
before = set(glob.glob(par + "/run-*")) | set(glob.glob(par + "/*/"))
res = {}
th = threading.Thread(target=lambda: res.setdefault("r", sandbox.run({"m.py": V["spinT"]}, "m.py", limits=sandbox.Limits(cpu_s=6, cpus=X))))
t0 = time.time(); th.start(); time.sleep(2.0)
mine = [d for d in glob.glob(par + "/*") if os.path.isdir(d) and d not in before and os.path.isdir(d)]
print("parent", par, "new cgroups:", mine, flush=True)
for d in mine:
    rd = lambda f: open(os.path.join(d, f)).read().strip()
    tasks = rd("tasks").split(); procs = rd("cgroup.procs").split()
    u0 = int(rd("cpuacct.usage")) if os.path.exists(os.path.join(d, "cpuacct.usage")) else None
    s0 = time.time(); time.sleep(1.0)
    u1 = int(rd("cpuacct.usage")) if u0 is not None else None
    print(d, "quota", rd("cpu.cfs_quota_us"), "period", rd("cpu.cfs_period_us"), "shares", rd("cpu.shares"),
          "tasks", len(tasks), "procs", len(procs), "cpu/s over 1 s:", u1 and round((u1 - u0) / 1e9 / (time.time() - s0), 3),
          "stat:", rd("cpu.stat").replace("\n", " "), flush=True)
    # are all the sandbox's threads (by /proc) in this cgroup?
    outside = []
    for t in tasks[:1]:
        pass
th.join(); r = res["r"]
print(f"result: timed_out={r.timed_out} wall_stopped={r.wall_stopped} cpu_s={r.cpu_s:.2f} wall={time.time()-t0:.1f}s")
