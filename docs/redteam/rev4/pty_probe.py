"""Does a sandbox reach the host's shared pty pool (kernel.pty.max, one count for every devpts instance)?
Opens only N ptys (default 20) and reports the host's /proc/sys/kernel/pty/nr while they are held."""
import sys, threading, time
from vgrout.substrate import sandbox
N = int(sys.argv[1]) if len(sys.argv) > 1 else 20
code = f'''
import os, time
fds = []
for i in range({N}):
    try: fds.append(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY))
    except OSError as e: print("stopped", e); break
print("opened", len(fds), "ptys; in-sandbox pty/nr:", open("/proc/sys/kernel/pty/nr").read().strip(), flush=True)
time.sleep(2)
'''
peak = [0]
def watch():
    while not done:
        peak[0] = max(peak[0], int(open("/proc/sys/kernel/pty/nr").read())); time.sleep(0.05)
done = False
before = int(open("/proc/sys/kernel/pty/nr").read())
th = threading.Thread(target=watch); th.start()
r = sandbox.run({"m.py": code}, "m.py", limits=sandbox.Limits(cpu_s=4.0))
done = True; th.join()
print(r.stdout.strip(), r.stderr[-300:], "| host pty/nr before", before, "peak", peak[0], "after", int(open("/proc/sys/kernel/pty/nr").read()))
