"""rev12: Limits.cpus is only checked > 0; _take_run_slots wants ceil(cpus - 1e-9) slots. cpus <= 1e-9 -> want 0:
does the take ever return? What does it hold meanwhile (another process's ordinary take)?"""
import os, sys, time, threading, subprocess, math
from vgrout.substrate import sandbox as S
cpus = float(sys.argv[1])
print("Limits accepts cpus:", S.Limits(cpus=cpus).cpus, " want =", min(S._run_slots(), math.ceil(cpus - 1e-9)), flush=True)
done = []
threading.Thread(target=lambda: done.append(S._take_run_slots(cpus)), daemon=True).start()
time.sleep(2)
print("after 2 s: the take returned =", bool(done), flush=True)
other = subprocess.run([sys.executable, "-c", "import time; from vgrout.substrate import sandbox as S; t=time.time(); "
                        "S._take_run_slots(1.0); print(f'other process took 1 slot after {time.time()-t:.1f}s')"],
                       capture_output=True, text=True, timeout=None if done else 10) if done else None
if not done:
    try:
        r = subprocess.run([sys.executable, "-c", "import time; from vgrout.substrate import sandbox as S; t=time.time(); "
                            "S._take_run_slots(1.0); print(f'other took a slot after {time.time()-t:.1f}s')"],
                           capture_output=True, text=True, timeout=10)
        print("other process:", r.stdout.strip(), r.stderr.strip()[-200:])
    except subprocess.TimeoutExpired:
        print("another process's take of 1 slot (cpus=1) was still waiting after 10 s (killed by the probe)")
else:
    print("other process:", other.stdout.strip())
