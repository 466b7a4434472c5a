V = {
 "control": "while True:\n    pass\n",
 "spin63": "import os, threading\nfor i in range(20):\n    if os.fork() == 0:\n        break\nfor j in range(2):\n    threading.Thread(target=lambda: [0 for _ in iter(int, 1)], daemon=True).start()\nwhile True:\n    pass\n",
 "membw": "import os\nfor i in range(3):\n    if os.fork() == 0:\n        break\na = bytearray(48 << 20); b = bytearray(48 << 20)\nwhile True:\n    a[:] = b; b[:] = a\n",
 "forkchurn": "import os\nfor i in range(7):\n    if os.fork() == 0:\n        break\nwhile True:\n    p = os.fork()\n    if p == 0:\n        os._exit(0)\n    os.waitpid(p, 0)\n",
 "io": ("import os\nfiles = []\nfor r, d, fs in os.walk('/usr'):\n    for f in fs:\n        p = os.path.join(r, f)\n        if os.path.isfile(p) and not os.path.islink(p):\n            files.append(p)\n"
        "for i in range(3):\n    if os.fork() == 0:\n        break\nimport random\nrandom.shuffle(files)\nwhile True:\n    for p in files:\n        try:\n            with open(p, 'rb') as fh:\n                while fh.read(1 << 20):\n                    pass\n        except OSError:\n            pass\n"),
}
def _spin():
    while True:
        pass
V["spinT"] = "import os, threading\ndef spin():\n    while True:\n        pass\nfor i in range(20):\n    if os.fork() == 0:\n        break\nfor j in range(2):\n    threading.Thread(target=spin, daemon=True).start()\nwhile True:\n    pass\n"
V["grow1"] = "x = [0 for _ in iter(int, 1)]\n"
V["grow4"] = "import os\nfor i in range(3):\n    if os.fork() == 0:\n        break\nx = [0 for _ in iter(int, 1)]\n"
V["oomloop"] = "import os\nwhile True:\n    p = os.fork()\n    if p == 0:\n        x = bytearray(1 << 20) * 2000\n        os._exit(0)\n    os.waitpid(p, 0)\n"
V["oomloop"] = "import os\nkids = set()\nwhile True:\n    while len(kids) < 8:\n        p = os.fork()\n        if p == 0:\n            x = [0 for _ in iter(int, 1)]\n        kids.add(p)\n    p, _ = os.wait()\n    kids.discard(p)\n"
