"""(env NICE0=1: the tasks inside A and B at nice 0, 4 s, spin only.)
Kernel-only check (no grader): does a v1 cpu cgroup of cpu.shares 1024 hold its share against a sibling
of the same shares that runs 63 spinning tasks? Own parent /sys/fs/cgroup/cpu/rev9probe (shares 2048, as vgrout),
children A (the hostile) and B (the neighbour). B runs one task: 'spin' (always runnable) or 'pingpong' (5 ms of
work, then a pipe round trip with a helper outside the cgroups, like a harness talking to the trusted side).
Prints B's CPU seconds in 5 s (cpuacct of the thread) for A = empty, 1 spinner, 63 spinning tasks (21 procs x 3 threads)."""
import os, sys, time, threading, signal
R = "/sys/fs/cgroup/cpu/rev9probe"
SECS = 4 if os.environ.get("NICE0") else 5
os.makedirs(R + "/A", exist_ok=True); os.makedirs(R + "/B", exist_ok=True)
open(R + "/cpu.shares", "w").write("2048"); open(R + "/A/cpu.shares", "w").write("1024"); open(R + "/B/cpu.shares", "w").write("1024")
def join(g):
    open(f"{R}/{g}/cgroup.procs", "w").write(str(os.getpid()))
    if os.environ.get("NICE0"): os.setpriority(os.PRIO_PROCESS, 0, 0)  # only inside the probe cgroups
def spin():
    while True: pass
def hostile(n_procs, n_threads):
    pids = []
    for i in range(n_procs):
        p = os.fork()
        if p == 0:
            join("A")
            for j in range(n_threads - 1): threading.Thread(target=spin, daemon=True).start()
            spin()
        pids.append(p)
    return pids
def neighbour(kind, secs):
    r1, w1 = os.pipe(); r2, w2 = os.pipe()
    helper = os.fork()
    if helper == 0:  # stays in the root cgroup: the 'trusted side'
        while os.read(r1, 1): os.write(w2, b"x")
        os._exit(0)
    rr, ww = os.pipe()
    p = os.fork()
    if p == 0:
        join("B"); t0 = time.process_time(); end = time.time() + secs; n = 0
        while time.time() < end:
            if kind == "spin":
                pass
            else:
                x = time.process_time() + 0.005
                while time.process_time() < x: pass
                os.write(w1, b"x"); os.read(r2, 1); n += 1
        os.write(ww, f"{time.process_time() - t0:.2f} cpu_s, {n} round trips".encode()); os._exit(0)
    os.waitpid(p, 0); res = os.read(rr, 200).decode(); os.kill(helper, signal.SIGKILL); os.waitpid(helper, 0); [os.close(f) for f in (r1, w1, r2, w2, rr, ww)]
    return res
KINDS = ("spin",) if os.environ.get("NICE0") else ("spin", "pingpong")
CONF = (("A 1 spinner", 1, 1), ("A 63 tasks", 21, 3)) if os.environ.get("NICE0") else (("A empty", 0, 0), ("A 1 spinner", 1, 1), ("A 63 tasks", 21, 3), ("A empty", 0, 0))
for kind in KINDS:
    for name, np_, nt in CONF:
        pids = hostile(np_, nt); time.sleep(0.5)
        print(f"B {kind} 5 s, {name}: {neighbour(kind, SECS)}", flush=True)
        for p in pids: os.kill(p, signal.SIGKILL); os.waitpid(p, 0)
for g in ("A", "B", ""):
    time.sleep(0.2); os.rmdir(f"{R}/{g}".rstrip("/"))
