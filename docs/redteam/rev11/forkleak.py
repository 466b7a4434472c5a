"""rev11 LEAK: a run's slot descriptor and the queue's descriptor are O_CLOEXEC, which a fork without
exec (multiprocessing's default "fork" start method on Linux up to 3.13, a DataLoader worker, os.fork)
does not close. The flock belongs to the open file description, so a child forked while a run holds a
slot keeps that slot after the run ends, for the child's whole life; a child forked while a thread waits
for a slot keeps the QUEUE lock, and then every run of the host (every process, every uid-mate) blocks in
flock(queue, LOCK_EX), which has no timeout, until that child exits.
Usage: RT11_SLOTS=/tmp/rt11-slots-{uid} forkleak.py [slots|queue] CHILD_S"""
import os, sys, time, threading, fcntl, subprocess, multiprocessing as mp
from vgrout.substrate import sandbox
case, CHILD = sys.argv[1], float(sys.argv[2])
lim = sandbox.Limits(cpu_s=1)
out = {}
def run(sec, tag):
    t = time.time()
    r = sandbox.run({"m.py": f"import time\ntime.sleep({sec})\n"}, "m.py", limits=lim)
    out[tag] = (round(time.time() - t, 1), r.returncode, r.timed_out, r.wall_stopped)
    print(f"  {tag}: wall {out[tag][0]} s (program sleeps {sec} s) rc={r.returncode}", flush=True)
def locked(name):
    fd = os.open(os.path.join(sandbox._slots_dir(), name), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); fcntl.flock(fd, fcntl.LOCK_UN); return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
n = sandbox._run_slots(lim.cpus)
print(f"slots dir {sandbox._slots_dir()} slots {n}; case {case}; child lives {CHILD} s", flush=True)
T0 = time.time()
HOLD = ("import sys, threading; from vgrout.substrate import sandbox\n"
        "ts = [threading.Thread(target=sandbox.run, args=({'m.py': 'import time; time.sleep(4)'}, 'm.py'), "
        "kwargs={'limits': sandbox.Limits(cpu_s=1)}) for _ in range(int(sys.argv[1]))]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n")
if case == "slots":  # this process's runs hold every slot when it forks
    ths = [threading.Thread(target=run, args=(3, f"run{k}")) for k in range(n)]
    for t in ths: t.start()
    time.sleep(1.5)  # both runs hold their slots now
else:  # queue: ANOTHER process's runs hold every slot; a run of this one waits for a slot (its thread holds
       # the queue's flock) when this one forks; this process holds no slot
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(n)]); time.sleep(2.5)
    ths = [threading.Thread(target=run, args=(1, "waiter"))]; ths[0].start(); time.sleep(0.5)
print(f"t={time.time()-T0:.1f}: fork a child (multiprocessing 'fork', it only sleeps {CHILD} s)", flush=True)
child = mp.get_context("fork").Process(target=time.sleep, args=(CHILD,)); child.start()
for t in ths: t.join()
if case != "slots": holder.wait()
print(f"t={time.time()-T0:.1f}: all runs returned; locked now: " +
      ", ".join(f"{k}={locked(k)}" for k in [*map(str, range(n)), "queue"]), flush=True)
# a run in THIS process and one in ANOTHER process (a second grader of the host)
other = subprocess.Popen([sys.executable, "-c", "import time; from vgrout.substrate import sandbox; t=time.time(); "
    "r=sandbox.run({'m.py':'print(1)'}, 'm.py', limits=sandbox.Limits(cpu_s=1)); "
    "print(f'  other process: a print(1) run took {time.time()-t:.1f} s, stdout {r.stdout!r}', flush=True)"])
t1 = time.time(); run(0, "next run here")
other.wait()
print(f"t={time.time()-T0:.1f}: child alive {child.is_alive()}; next run waited {time.time()-t1:.1f} s", flush=True)
child.join()
