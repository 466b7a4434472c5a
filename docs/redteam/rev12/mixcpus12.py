"""rev12: rev11 finding 2 (mixed Limits.cpus across processes over-admit) on round 11 (a run holds ceil(cpus) slots).
Two processes, K threads each of sandbox.run(sleep 4 s) at their own cpus; B starts 1.5 s after A; sums the quotas
alive at each moment from the slot log (RT12_LOG). Usage: mixcpus12.py CPUS_A K_A CPUS_B K_B"""
import sys, time, os, subprocess, threading
if sys.argv[1] == "child":
    from vgrout.substrate import sandbox
    lim = sandbox.Limits(cpu_s=4, cpus=float(sys.argv[2]))
    ths = [threading.Thread(target=sandbox.run, args=({"m.py": "import time\ntime.sleep(4)\n"}, "m.py"), kwargs={"limits": lim})
           for _ in range(int(sys.argv[3]))]
    [t.start() for t in ths]; [t.join() for t in ths]; sys.exit()
ca, ka, cb, kb = sys.argv[1:5]
log = os.environ["RT12_LOG"]; open(log, "w").close()
kids = []
for c, k in ((ca, ka), (cb, kb)):
    kids.append(subprocess.Popen([sys.executable, __file__, "child", c, k])); time.sleep(1.5)
cpus_of = {kids[0].pid: float(ca), kids[1].pid: float(cb)}
[k.wait() for k in kids]
ev = []
for line in open(log):
    w = line.split(); at = float([x for x in w if x.startswith("at=")][0][3:])
    ev.append((at, cpus_of[int(w[1])] * (1 if w[0] == "TAKE" else -1), w[1], w[2] if w[0] == "TAKE" else ""))
ev.sort(); s = most = 0.0; t0 = ev[0][0]
for at, d, pid, slots in ev:
    s += d; most = max(most, s)
    print(f"t={at-t0:6.2f} {'take' if d > 0 else 'end '} pid {pid} (cpus {cpus_of[int(pid)]}) {slots}: quotas alive {s:.2f} CPUs")
print(f"host slots 2; A cpus={ca} x{ka}, B cpus={cb} x{kb}: most quota alive at once {most:.2f} CPUs")
