"""POSIX message queue bytes (RLIMIT_MSGQUEUE, a ucount charged up to the HOST uid's count, shared by all sandboxes
since they run as one host uid): A creates K queues (10 x 8 KiB each) and holds them; B, at the same time, counts how
many it can create before EMFILE. B alone vs B beside A. usage: mqueue_channel.py K"""
import sys, threading
from vgrout.substrate import sandbox
K = int(sys.argv[1]) if len(sys.argv) > 1 else 4
LIB = r'''
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
class Attr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long), ("msgsize", ctypes.c_long), ("curmsgs", ctypes.c_long), ("pad", ctypes.c_long * 4)]
def make(n, tag):
    got = 0
    for i in range(n):
        a = Attr(0, 10, 8192, 0)
        fd = libc.mq_open(b"/%s%d" % (tag, i), os.O_CREAT | os.O_RDWR, 0o600, ctypes.byref(a))
        if fd < 0: return got, os.strerror(ctypes.get_errno())
        got += 1
    return got, None
'''
A = LIB + f"print('A made', make({K}, b'a'), flush=True); time.sleep(3)"
B = LIB + "time.sleep(DELAY); print('B could make', make(100, b'b'), flush=True)"
def run(code):
    return sandbox.run({"main.py": code}, "main.py", limits=sandbox.Limits(cpu_s=5))
print("B alone:", run(B.replace("DELAY", "0")).stdout.strip())
res = {}
ts = [threading.Thread(target=lambda: res.__setitem__("A", run(A))), threading.Thread(target=lambda: res.__setitem__("B", run(B.replace("DELAY", "1"))))]
[t.start() for t in ts]; [t.join() for t in ts]
print(res["A"].stdout.strip(), res["A"].stderr[-200:], "|", res["B"].stdout.strip(), res["B"].stderr[-200:])
