"""A reply the grader's json.loads must recurse through: the response writes its own raw reply line on the channel
(fd sys.argv[1] of the harness) nested D deep (cost 4*D+... < REPLY_COST for D < 62,000). Does the grading process
survive (C stack in json's scanner), and what do the neighbours get? 1 hostile + 3 canonical rows, workers=2.
usage: deep_reply.py D"""
import sys, time
from vgrout.substrate.easy import easy_problems
from vgrout.substrate import grader
D = int(sys.argv[1])
p = [p for p in easy_problems() if p.id == "easy/is_multiple/6"][0]
HOSTILE = f'''
import os, sys
_UP = int(sys.argv[1])
def is_multiple(n):
    os.write(_UP, b'{{"v": ' + b"[" * {D} + b"]" * {D} + b'}}\\n')
    return n % 180 == 0
'''
rows = ["```python\n" + HOSTILE + "\n```"] + ["```python\n" + p.canonical_solution + "\n```"] * 3
t = time.time()
gs = grader.grade_batch([p] * 4, rows, ["none"] * 4, workers=2, progress=False)
print("D", D, "%.1f s" % (time.time() - t), [(g.gt_pass, g.error, g.tests_passed) for g in gs])
