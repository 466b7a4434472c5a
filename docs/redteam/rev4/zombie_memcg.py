"""Do per-run memory cgroups outlive their runs (dying memcgs pinned by page cache the run charged)?
K runs that each read one cold 4 KiB page of a large /usr file (a different page each), then K runs that read
nothing; /proc/cgroups' memory count after each set, and the file's cached pages (fincore)."""
import subprocess, sys, time
from vgrout.substrate import sandbox
K = int(sys.argv[1]) if len(sys.argv) > 1 else 20
F = sys.argv[2] if len(sys.argv) > 2 else "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"
def ncg():
    return int([l for l in open("/proc/cgroups") if l.startswith("memory")][0].split()[2])
def cached():
    return subprocess.run(["fincore", "-nb", "-o", "RES", F], capture_output=True, text=True).stdout.strip()
base = ncg(); print("memory cgroups before", base, "cached", cached())
for i in range(K):
    code = f'f = open("{F}", "rb"); f.seek({i} * (1 << 20) + 7 * 4096); f.read(4096)'
    sandbox.run({"m.py": code}, "m.py", limits=sandbox.Limits(cpu_s=2.0))
time.sleep(1)
a = ncg(); print(f"after {K} runs reading a cold page each:", a, f"(+{a - base})", "cached", cached())
for i in range(K):
    sandbox.run({"m.py": "x = 1"}, "m.py", limits=sandbox.Limits(cpu_s=2.0))
time.sleep(1)
b = ncg(); print(f"after {K} runs reading nothing:", b, f"(+{b - a})")
