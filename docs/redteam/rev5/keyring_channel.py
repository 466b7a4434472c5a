"""Cross-sandbox channel through the kernel key quota (kernel.keys.maxkeys, counted per HOST uid: every sandbox
runs as the same host uid) and /proc/key-users. Sandbox A adds K keys (add_key syscall, not refused by the seccomp
filter) and holds them; sandbox B, running at the same time, reads the count (/proc/key-users, and by adding keys
until EDQUOT). usage: keyring_channel.py K (default 37)"""
import sys, threading, time
from vgrout.substrate import sandbox
K = int(sys.argv[1]) if len(sys.argv) > 1 else 37
LIB = r'''
import ctypes, os, time, errno
libc = ctypes.CDLL(None, use_errno=True)
def add_key(i):
    # add_key(type, desc, payload, plen, keyring): KEY_SPEC_PROCESS_KEYRING = -2
    r = libc.syscall(248, b"user", b"k%d" % i, b"x", 1, -2)
    return r, ctypes.get_errno()
def key_users():
    try: return open("/proc/key-users").read().strip()
    except OSError as e: return "ERR " + str(e)
'''
A = LIB + f'''
n = 0
for i in range({K}):
    r, e = add_key(i)
    if r < 0: print("A add_key failed errno", e, flush=True); break
    n += 1
print("A added", n, "key-users:", key_users(), flush=True)
time.sleep(3)
'''
B = LIB + '''
time.sleep(1)
print("B key-users:", key_users(), flush=True)
n = 0
while True:
    r, e = add_key(10000 + n)
    if r < 0: print("B stopped after", n, "errno", errno.errorcode.get(e, e), flush=True); break
    n += 1
'''
out = {}
def go(name, code):
    out[name] = sandbox.run({"main.py": code}, "main.py", limits=sandbox.Limits(cpu_s=5))
ts = [threading.Thread(target=go, args=(k, c)) for k, c in (("A", A), ("B", B))]
[t.start() for t in ts]; [t.join() for t in ts]
for k in "AB":
    r = out[k]; print(k, "rc", r.returncode, "stdout:", r.stdout.strip(), "stderr:", r.stderr.strip()[-300:])
