"""rev11 MIXED QUOTAS: the number of slots is computed per run from ITS Limits.cpus (_run_slots: host CPUs /
cpus), over the same slot files 0..n-1. Two grading processes whose callers pass different Limits.cpus
(e.g. an eval at cpus=0.5 beside training at the default 1, or cpus=2) then admit runs whose quotas sum
above the host's CPUs. Each process runs K threads of sandbox.run(sleep S); the runs log (RT11_LOG) when
they got their slot and when they ended; this sums the quotas alive at each moment.
Usage: RT11_SLOTS=... RT11_LOG=... mixcpus.py CPUS_A K_A CPUS_B K_B"""
import sys, time, os, subprocess, threading
if sys.argv[1] == "child":
    from vgrout.substrate import sandbox
    cpus, K = float(sys.argv[2]), int(sys.argv[3])
    lim = sandbox.Limits(cpu_s=4, cpus=cpus)
    ths = [threading.Thread(target=sandbox.run, args=({"m.py": "import time\ntime.sleep(4)\n"}, "m.py"),
                            kwargs={"limits": lim}) for _ in range(K)]
    for t in ths: t.start()
    for t in ths: t.join()
    sys.exit()
ca, ka, cb, kb = sys.argv[1:5]
log = os.environ["RT11_LOG"]
open(log, "w").close()
kids = []
for c, k in ((ca, ka), (cb, kb)):  # B starts 1.5 s after A
    kids.append(subprocess.Popen([sys.executable, __file__, "child", c, k])); time.sleep(1.5)
cpus_of = {kids[0].pid: float(ca), kids[1].pid: float(cb)}
for k in kids: k.wait()
ev = []
take = {}
for line in open(log):
    w = line.split()
    if w[0] == "TAKE":
        at = float(w[5].split("=")[1]); take.setdefault((w[1], w[2]), []).append(at)
        ev.append((at, +float(w[3].split("=")[1]), w[1], w[2]))
    elif w[0] == "END":
        ev.append((float(w[3].split("=")[1]), -cpus_of[int(w[1])], w[1], w[2]))
ev.sort()
s, most, t0 = 0.0, 0.0, ev[0][0]
for at, d, pid, slot in ev:
    s += d; most = max(most, s)
    print(f"t={at-t0:6.2f} {'take' if d > 0 else 'end '} pid {pid} (cpus {cpus_of[int(pid)]}) slot {slot}: quotas alive {s:.2f} CPUs", flush=True)
print(f"host CPUs {len(os.sched_getaffinity(0))}; process A cpus={ca} x{ka}, B cpus={cb} x{kb}: most quota alive at once {most:.2f} CPUs")
