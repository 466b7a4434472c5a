"""rev10: does what else runs on this host inflate a process's CPU time for a fixed amount of work?
(the CPU-limit `timeout` is NOT re-graded by round 9: only wall-stopped runs are). Fixed work: a pure-Python
loop of 1.5e7 iterations; CPU by resource.getrusage(RUSAGE_CHILDREN). Also /proc/stat steal over each trial."""
import subprocess, resource, time, sys, os
WORK = [sys.executable, "-c", "s=0\nfor i in range(15_000_000): s+=i"]
SPIN = [sys.executable, "-c", "while True: pass"]
MEMBW = [sys.executable, "-c", "a=bytearray(48<<20);b=bytearray(48<<20)\nwhile True:\n a[:]=b;b[:]=a"]
def steal():
    f = open("/proc/stat").readline().split(); return int(f[8])
def trial():
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN); s0 = steal(); t0 = time.time()
    subprocess.run(WORK)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 2), round(time.time() - t0, 2), steal() - s0
for tag, bg in (("alone", []), ("beside 2 spinners", [SPIN] * 2), ("alone", []), ("beside 2 membw", [MEMBW] * 2), ("alone", [])):
    ps = [subprocess.Popen(b) for b in bg]; time.sleep(0.3)
    try:
        print(tag, "load", round(os.getloadavg()[0], 1), "(cpu_s, wall_s, steal ticks):", [trial() for _ in range(3)], flush=True)
    finally:
        for p in ps: p.kill(); p.wait()
