"""RLIMIT_NOFILE (64) escape through io_uring registered files: a ring keeps the files registered in it after their
descriptors close, so a process holds ~60 rings x 64 files of the host's one file table (fs.file-max) instead of 64.
P processes (default 4, as files_probe.py); prints host /proc/sys/fs/file-nr before / peak."""
import sys, threading, time
from vgrout.substrate import sandbox
P = int(sys.argv[1]) if len(sys.argv) > 1 else 4
code = f'''
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
def ring():
    params = (ctypes.c_ubyte * 120)()
    return libc.syscall(425, 4, params)
kids = []
for k in range({P}):
    pid = os.fork()
    if pid == 0:
        rings = files = 0; err = None
        while True:
            r = ring()
            if r < 0: err = "setup " + os.strerror(ctypes.get_errno()); break
            fds = []
            for i in range(64):
                try: fds.append(os.open("/dev/null", os.O_RDONLY))
                except OSError: break
            arr = (ctypes.c_int * len(fds))(*fds)
            rc = libc.syscall(427, r, 2, arr, len(fds))
            for fd in fds: os.close(fd)
            if rc < 0: err = "register " + os.strerror(ctypes.get_errno()); break
            rings += 1; files += len(fds)
        print("child", k, "rings", rings, "registered files", files, err, flush=True)
        time.sleep(2); os._exit(0)
    kids.append(pid)
for p in kids: os.waitpid(p, 0)
'''
done = False; peak = [0]
def nr(): return int(open("/proc/sys/fs/file-nr").read().split()[0])
before = nr()
def watch():
    while not done: peak[0] = max(peak[0], nr()); time.sleep(0.05)
w = threading.Thread(target=watch); w.start()
r = sandbox.run({{"main.py": code}}, "main.py", limits=sandbox.Limits(cpu_s=5)) if False else sandbox.run({"main.py": code}, "main.py", limits=sandbox.Limits(cpu_s=5))
done = True; w.join()
print(r.returncode, r.stdout.strip(), r.stderr[-300:], "| host file-nr before", before, "peak", peak[0], "(+%d)" % (peak[0] - before), "cpu_s", r.cpu_s)
