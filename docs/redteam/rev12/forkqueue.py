"""rev12: rev11 finding 1 on round 11's at-fork hook. Thread 1 holds every slot; thread 2 waits (holds the queue,
blocked in the slot poll); thread 3 waits behind it (blocked in flock(queue)); the main thread forks a child that
only sleeps 15 s. Then every run gives back. Are the slots and the queue free, and does another process's take
(and one here) go at once, while the child lives?"""
import os, sys, time, fcntl, threading, subprocess
from vgrout.substrate import sandbox as S
d, n = S._slots_dir(), S._run_slots()
held = S._take_run_slots(float(n))
got = []
def waiter(tag):
    t = time.time(); fds = S._take_run_slots(1.0); got.append((tag, round(time.time() - t, 2))); time.sleep(0.2); S._give_back(fds)
ws = [threading.Thread(target=waiter, args=(k,)) for k in ("t2", "t3")]
ws[0].start(); time.sleep(0.3); ws[1].start(); time.sleep(0.3)
pid = os.fork()
if pid == 0:
    time.sleep(15); os._exit(0)
print(f"forked child {pid} while: this process holds {n} slots, t2 polls holding the queue, t3 waits in flock(queue)")
time.sleep(0.5); S._give_back(held); [w.join() for w in ws]
print("waiters here got their slot after:", got)
for name in [str(k) for k in range(n)] + ["queue"]:
    fd = os.open(os.path.join(d, name), os.O_RDWR)
    try: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); r = "free"; fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError: r = "LOCKED"
    os.close(fd); print(f"  {name}: {r} (child alive: {os.waitpid(pid, os.WNOHANG)[0] == 0})")
out = subprocess.run([sys.executable, "-c", "import time; from vgrout.substrate import sandbox as S; t=time.time(); "
                      f"S._take_run_slots({float(n)}); print(f'other process took all slots after {{time.time()-t:.2f}}s')"],
                     capture_output=True, text=True, timeout=20)
print(out.stdout.strip(), out.stderr.strip()[-200:])
os.kill(pid, 9); os.waitpid(pid, 0)
