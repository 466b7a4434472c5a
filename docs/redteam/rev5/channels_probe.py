"""Other cross-sandbox channels, two sandboxes at once: A sets, B (0.8 s later) reads.
 sysv: A semget/msgget/shmget key 0x5eed, B looks them up;  abstract: A binds abstract unix socket, B connects;
 pagecache: B mincore()s pages of a shared /usr file that A read after B... (A: fadvise DONTNEED whole file, then read
 page 7 only; B: mincore per page = exact bits, no timing);  inflight: A keeps K=20 fds in flight over a socketpair
 (SCM_RIGHTS, counted per host uid against RLIMIT_NOFILE), B sends until ETOOMANYREFS and reports how many it could."""
import threading
from vgrout.substrate import sandbox
COMMON = r'''
import ctypes, ctypes.util, mmap, os, socket, sys, time, array, glob
libc = ctypes.CDLL(None, use_errno=True)
F = sorted(glob.glob("/usr/lib/python3*/pydoc_data/topics.py") + glob.glob(os.path.dirname(os.__file__) + "/pydoc_data/topics.py"))[0]
def inflight(n):
    a, b = socket.socketpair(); got = 0; keep = [a, b]
    for i in range(n):
        try:
            a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [b.fileno()]))]); got += 1
        except OSError as e:
            return got, e.strerror, keep
    return got, None, keep
'''
A = COMMON + r'''
out = []
try: out.append(("sem", libc.semget(0x5eed, 1, 0o1666), ctypes.get_errno()))
except Exception as e: out.append(str(e))
out.append(("msg", libc.msgget(0x5eed, 0o1666), ctypes.get_errno()))
s = socket.socket(socket.AF_UNIX); 
try: s.bind("\0vgrout-rev5"); s.listen(); out.append("abstract bound")
except OSError as e: out.append("abstract " + e.strerror)
fd = os.open(F, os.O_RDONLY); size = os.fstat(fd).st_size
out.append(("fadvise", os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)))
os.pread(fd, 10, 7 * 4096)
g, err, keep = inflight(20); out.append(("inflight held", g, err))
print("A", out, flush=True); time.sleep(3)
'''
B = COMMON + r'''
time.sleep(0.8); out = []
out.append(("sem lookup", libc.semget(0x5eed, 1, 0), ctypes.get_errno()))
out.append(("msg lookup", libc.msgget(0x5eed, 0), ctypes.get_errno()))
c = socket.socket(socket.AF_UNIX)
try: c.connect("\0vgrout-rev5"); out.append("abstract CONNECTED")
except OSError as e: out.append("abstract " + e.strerror)
fd = os.open(F, os.O_RDONLY); size = os.fstat(fd).st_size
import ctypes as C
vec = (ctypes.c_ubyte * ((size + 4095) // 4096))()
libc.mmap.restype = C.c_void_p; libc.mmap.argtypes = [C.c_void_p, C.c_size_t, C.c_int, C.c_int, C.c_int, C.c_long]
ptr = C.c_void_p(libc.mmap(None, size, 1, 1, fd, 0))
r = libc.mincore(ptr, C.c_size_t(size), vec); out.append(("mincore rc", r, C.get_errno(), "resident pages", [i for i, v in enumerate(vec) if v & 1][:20], "of", len(vec)))
g, err, keep = inflight(200); out.append(("inflight B could", g, err))
print("B", out, flush=True)
'''
res = {}
def go(k, c): res[k] = sandbox.run({"main.py": c}, "main.py", limits=sandbox.Limits(cpu_s=5))
ts = [threading.Thread(target=go, args=kc) for kc in (("A", A), ("B", B))]
[t.start() for t in ts]; [t.join() for t in ts]
for k in "AB": print(res[k].returncode, res[k].stdout.strip(), res[k].stderr.strip()[-400:])
