"""Per-host-uid kernel counters still shared by concurrent sandboxes under the 6b50c5e seccomp filter (all sandboxes
run as host uid 65534). Two sandboxes at once (sandbox.run, two threads): A takes K units and holds them 4 s; B, 1 s
later, counts how many it can take before the kernel refuses. B alone first, for the baseline.
 pipe:  pipe buffer pages (fs.pipe-user-pages-soft = 16384, counted in the host user_struct of uid 65534): A grows
        pipes to 1 MiB (256 pages) with fcntl F_SETPIPE_SZ (1031, not refused) in 3 forked processes; B grows pipes
        until EPERM and reports the pages it got; also F_GETPIPE_SZ of a fresh pipe (65536 normally, 8192 past soft).
 sigq:  RLIMIT_SIGPENDING (ucounts charged up to the host uid): A queues K real-time signals to itself (blocked,
        sigqueue), B queues until EAGAIN.
 nproc: processes (RLIMIT_NPROC 64 per sandbox): A forks K, B forks until EAGAIN (a per-sandbox count: no channel expected).
 pipedef: no F_SETPIPE_SZ: A holds K processes x 30 default pipes (16 pages each); B reads a fresh pipe's size.
usage: channels6.py pipe|sigq|nproc|pipedef K"""
import sys, threading, time
from vgrout.substrate import sandbox
KIND = sys.argv[1]; K = int(sys.argv[2])
PIPE = r'''
import fcntl, os, sys, time
def grow(limit_pages, tag):
    got = 0; keep = []
    while got < limit_pages:
        try:
            r, w = os.pipe()
        except OSError as e:
            return got, keep, "pipe " + e.strerror
        keep += [r, w]
        try:
            fcntl.fcntl(w, 1031, 1 << 20); got += 256
        except OSError as e:
            return got, keep, e.strerror
    return got, keep, None
def fresh():
    r, w = os.pipe(); s = fcntl.fcntl(w, 1032); os.close(r); os.close(w); return s
ROLE = "@ROLE@"; K = @K@
if ROLE == "A":
    per = K // 3
    for i in range(3):
        if os.fork() == 0:
            got, keep, err = grow(per, "A"); print("A child pages", got, err, flush=True); time.sleep(4); os._exit(0)
    time.sleep(4.5)
else:
    time.sleep(1 if ROLE == "B" else 0)
    size = fresh(); total = 0; kids = []
    for i in range(4):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            got, keep, err = grow(10 ** 9, "B"); os.write(w, b"%d %s\n" % (got, (err or "").encode())); time.sleep(2); os._exit(0)
        os.close(w); kids.append(r)
    outs = [os.read(r, 100).decode().split() for r in kids]
    print(ROLE, "fresh pipe size", size, "pages B got", sum(int(o[0]) for o in outs), "stops", [o[1:] for o in outs], flush=True)
'''
SIGQ = r'''
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
class SV(ctypes.Union): _fields_ = [("i", ctypes.c_int), ("p", ctypes.c_void_p)]
def queue(n):
    got = 0
    while got < n:
        if libc.sigqueue(os.getpid(), int(signal.SIGRTMIN), SV(0)) != 0:
            return got, os.strerror(ctypes.get_errno())
        got += 1
    return got, None
ROLE = "@ROLE@"; K = @K@
if ROLE == "A":
    print("A queued", queue(K), flush=True); time.sleep(4)
else:
    time.sleep(1 if ROLE == "B" else 0)
    print(ROLE, "could queue", queue(10 ** 7), flush=True)
'''
NPROC = r"""
import os, sys, time
ROLE = "@ROLE@"; K = @K@
def forks(n):
    got = 0
    while got < n:
        try:
            if os.fork() == 0: time.sleep(3); os._exit(0)
        except OSError as e: return got, e.strerror
        got += 1
    return got, None
if ROLE == "A":
    print("A forked", forks(K), flush=True); time.sleep(4)
else:
    time.sleep(1 if ROLE == "B" else 0)
    print(ROLE, "could fork", forks(10 ** 6), flush=True)
"""
PIPEDEF = r"""
import fcntl, os, time
ROLE = "@ROLE@"; K = @K@
def fresh():
    r, w = os.pipe(); s = fcntl.fcntl(w, 1032); os.close(r); os.close(w); return s
if ROLE == "A":
    for i in range(K):
        if os.fork() == 0:
            keep = []
            try:
                for j in range(30): keep.append(os.pipe())
            except OSError: pass
            time.sleep(4); os._exit(0)
    time.sleep(4.5)
else:
    time.sleep(1.5 if ROLE == "B" else 0)
    print(ROLE, "fresh default pipe size", fresh(), flush=True)
"""
code = {"pipe": PIPE, "sigq": SIGQ, "nproc": NPROC, "pipedef": PIPEDEF}[KIND]
lim = sandbox.Limits(cpu_s=8)
def run(role, out):
    out[role] = sandbox.run({"main.py": code.replace("@ROLE@", role).replace("@K@", str(K))}, "main.py", limits=lim)
def show(out):
    for k in sorted(out):
        r = out[k]; print(" ", k, "rc", r.returncode, r.stdout.strip().replace("\n", " | "), r.stderr.strip()[-300:])
o = {}; run("Balone", o); print(KIND, "B alone:"); show(o)
o = {}
ts = [threading.Thread(target=run, args=(k, o)) for k in ("A", "B")]
[t.start() for t in ts]; [t.join() for t in ts]
print(KIND, f"B beside A holding {K}:"); show(o)
