"""memfd fill inside the sandbox: returncode and what the memory cgroup did."""
import sys
from vgrout.substrate import sandbox
GB_ = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
code = f'''
import os, sys
n, fds, chunk = 0, [], b"x" * ((4 << 20) - 4096)
try:
    while n < {GB_} * (1 << 30):
        fd = os.memfd_create("m"); os.write(fd, chunk); fds.append(fd); n += len(chunk)
        if len(fds) % 50 == 0: print("held", n >> 20, "MiB", flush=True)
except BaseException as e:
    print("stopped", type(e).__name__, e, flush=True)
print("done", n >> 20, flush=True)
'''
r = sandbox.run({"m.py": code}, "m.py", limits=sandbox.Limits(cpu_s=4.0))
print("rc", r.returncode, "timed_out", r.timed_out, "cpu_s %.2f" % r.cpu_s, "failure", r.failure)
print("stdout tail:", r.stdout[-300:], "stderr tail:", r.stderr[-300:])
