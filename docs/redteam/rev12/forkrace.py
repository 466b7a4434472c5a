"""rev12: round 11's at-fork hook closes the descriptors in sandbox._held. Is a descriptor ever open but NOT in
_held at a fork (between os.open and _hold's add; between _give_back's discard and close)? Threads take and give
back slots (no sandbox: _take_run_slots/_give_back directly); the main thread forks children that only sleep.
After every thread has given everything back: which children still hold a slots-dir descriptor, and which slot
or queue files are still locked (a fresh open + LOCK_NB here). Usage: forkrace.py SECONDS THREADS"""
import os, sys, time, fcntl, threading
from vgrout.substrate import sandbox as S
T, K = float(sys.argv[1]), int(sys.argv[2])
sys.setswitchinterval(1e-5)  # preempt often: widens nothing, only makes the windows reachable sooner
d, n = S._slots_dir(), S._run_slots()
print(f"slots dir {d}, n={n}, threads={K}", flush=True)
stop = threading.Event()
def worker():
    while not stop.is_set():
        fds = S._take_run_slots(1.0)
        S._give_back(fds)
ths = [threading.Thread(target=worker) for _ in range(K)]
[t.start() for t in ths]
kids, t0, nforks = [], time.time(), 0
while time.time() - t0 < T:
    pid = os.fork()
    if pid == 0:  # after the at-fork hook: does this child still hold a slots-dir descriptor?
        held = [f for f in os.listdir("/proc/self/fd") if os.path.realpath(f"/proc/self/fd/{f}").startswith(d)]
        if held: time.sleep(40)
        os._exit(0)
    kids.append(pid); nforks += 1
    if len(kids) % 50 == 0:  # reap the children that found nothing
        for p in list(kids):
            if os.waitpid(p, os.WNOHANG)[0]: kids.remove(p)
stop.set(); [t.join() for t in ths]
time.sleep(0.5)
for p in list(kids):
    if os.waitpid(p, os.WNOHANG)[0]: kids.remove(p)
print(f"forked {nforks}, {len(kids)} children still alive (they found a descriptor) in {T}s; workers done, _held here = {S._held}", flush=True)
leaky = {}
for p in kids:
    fds = []
    for fd in os.listdir(f"/proc/{p}/fd"):
        with __import__("contextlib").suppress(OSError):
            tgt = os.readlink(f"/proc/{p}/fd/{fd}")
            if tgt.startswith(d): fds.append((int(fd), os.path.basename(tgt)))
    if fds: leaky[p] = fds
print(f"children holding a slots-dir descriptor: {len(leaky)}: {dict(list(leaky.items())[:10])}", flush=True)
for name in [str(k) for k in range(n)] + ["queue"]:
    fd = os.open(os.path.join(d, name), os.O_RDWR)
    try: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB); locked = False; fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError: locked = True
    os.close(fd); print(f"  {name}: locked after all runs gave back = {locked}", flush=True)
t1 = time.time(); fds = S._take_run_slots(1.0)
print(f"a next take here waited {time.time()-t1:.2f}s", flush=True); S._give_back(fds)
for p in kids: os.kill(p, 9); os.waitpid(p, 0)
