"""PARTIAL measurement only (do NOT scale up on a shared host): the system-wide file table (fs.file-max, one count for
the whole host; processes without CAP_SYS_ADMIN get ENFILE past it, sandboxes included) is not bounded per run.
A sandbox forks P processes that each open /dev/null up to RLIMIT_NOFILE times and hold them 2 s. Prints the host's
allocated-file count (/proc/sys/fs/file-nr) and the run's memory cgroup usage at their peaks, and the CPU it cost.
  usage: files_probe.py P (default 4)"""
import glob, os, sys, threading, time
from vgrout.substrate import sandbox
P = int(sys.argv[1]) if len(sys.argv) > 1 else 4
code = f'''
import os, resource, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
print("RLIMIT_NOFILE", soft, hard, "RLIMIT_NPROC", resource.getrlimit(resource.RLIMIT_NPROC), flush=True)
t = time.process_time()
kids = []
for i in range({P}):
    pid = os.fork()
    if pid == 0:
        n = 0
        try:
            while True:
                os.open("/dev/null", os.O_RDONLY); n += 1
        except OSError as e:
            err = e.errno
        os.write(1, f"child {{i}} holds {{n}} (errno {{err}}) cpu {{time.process_time():.2f}}\\n".encode())
        time.sleep(2.5)
        os._exit(0)
    kids.append(pid)
for k in kids: os.waitpid(k, 0)
'''
parent = sandbox._memory_cgroup_parent()
peak = {"nr": 0, "mem": 0}
done = False
def watch():
    while not done:
        peak["nr"] = max(peak["nr"], int(open("/proc/sys/fs/file-nr").read().split()[0]))
        for d in glob.glob(parent + "/run-*"):
            try: peak["mem"] = max(peak["mem"], int(open(d + "/memory.usage_in_bytes").read()))
            except OSError: pass
        time.sleep(0.05)
before = int(open("/proc/sys/fs/file-nr").read().split()[0])
th = threading.Thread(target=watch); th.start()
r = sandbox.run({"m.py": code}, "m.py", limits=sandbox.Limits(cpu_s=4.0))
done = True; th.join()
print(r.stdout.strip(), r.stderr[-300:])
print("rc", r.returncode, "cpu_s %.2f" % r.cpu_s, "| host file-nr before", before, "peak", peak["nr"],
      "(+%d)" % (peak["nr"] - before), "file-max", open("/proc/sys/fs/file-max").read().strip(),
      "| run memcg peak %.0f MiB" % (peak["mem"] / 2**20), "of limit %.0f MiB" % (sandbox.Limits().ram / 2**20))
