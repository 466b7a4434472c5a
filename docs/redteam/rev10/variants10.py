V["sleep"] = "import time\ntime.sleep(1000)\n"
# bursty: 63 tasks that spin 0.3 s then sleep 0.2 s (keeps the hostile's own run below CPU limit longer)
V["burst63"] = ("import os, threading, time\ndef spin():\n    while True:\n        t = time.time()\n        while time.time() - t < 0.3:\n            pass\n        time.sleep(0.2)\n"
                "for i in range(20):\n    if os.fork() == 0:\n        break\nfor j in range(2):\n    threading.Thread(target=spin, daemon=True).start()\nspin()\n")
# many short-lived processes (fork churn with 63 slots)
V["forkchurn63"] = "import os\nfor i in range(40):\n    if os.fork() == 0:\n        break\nwhile True:\n    p = os.fork()\n    if p == 0:\n        os._exit(0)\n    os.waitpid(p, 0)\n"
# memory bandwidth / cache thrash, 8 processes x 2x24 MiB
V["membw8"] = "import os\nfor i in range(7):\n    if os.fork() == 0:\n        break\na = bytearray(24 << 20); b = bytearray(24 << 20)\nwhile True:\n    a[:] = b; b[:] = a\n"
# tmpfs write/delete churn
V["tmpfs"] = "import os\nfor i in range(3):\n    if os.fork() == 0:\n        break\nd = os.environ.get('TMPDIR', '/tmp')\nb = os.urandom(1 << 20)\nn = 0\nwhile True:\n    p = os.path.join(d, f'f{os.getpid()}_{n % 50}')\n    with open(p, 'wb') as f:\n        f.write(b * 8)\n    os.unlink(p)\n    n += 1\n"
# no CPU, no regrade: the neighbour only gets the batch's quota (0.5 CPU with 4 workers) and no contention
V["nap"] = "import time\ntime.sleep(8)\n"
