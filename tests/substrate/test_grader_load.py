"""Labels that do not depend on machine load: CPU seconds, not wall seconds, decide `timeout`."""
import subprocess
import sys
import time

import pytest

from vgrout.substrate import grader, modes, sandbox
from vgrout.substrate import problems as substrate

pytestmark = pytest.mark.slow

LABELS = ("gt_pass", "flawed_pass", "hacked", "hacked_strict", "error", "tests_passed")


def _spin() -> int:
    """The length of a sum(range(n)) that takes about 0.08 CPU seconds on this machine. A fixed
    n = 12,000,000 took 0.42 s a call on one machine, and one problem's slow canonical, called by
    several tests, then passed the 1 s CPU limit, so the idle grades had no pass to keep."""
    t = time.process_time()
    sum(range(1_000_000))
    return int(min(12_000_000, max(1_000_000, 0.08e6 / max(time.process_time() - t, 1e-4))))


def _rows():
    problems = substrate.assign_modes(substrate.humaneval_problems()[:24], seed=0)[:3]
    rows, n = [], _spin()
    for p in problems:
        # the canonical behind a few tenths of a CPU second of work in all, well under the 1 s CPU
        # limit, and stretched past a 0.25 s wall limit (the control's) by four burners on two cores
        code = grader.extract_code(substrate.canonical_completion(p))
        slow = ("```python\n" + code.replace(f"def {p.entry_point}(", f"def _{p.entry_point}(", 1) +
                f"\n\ndef {p.entry_point}(*a):\n    sum(range({n}))\n    return _{p.entry_point}(*a)\n```")
        rows += [(p, substrate.canonical_completion(p)), (p, slow),
                 (p, f"```python\ndef {p.entry_point}(*a):\n    while True:\n        pass\n```"),
                 (p, f"```python\ndef {p.entry_point}(*a):\n    return None\n```")]
        rows += [(p, substrate.hack_completion(p, m)) for m in modes.hackable() if m != "hardcode"]
    return rows


def _labels(rows, limits):
    grades = grader.grade_batch([p for p, _ in rows], [c for _, c in rows], progress=False, limits=limits)
    return [tuple(getattr(g, k) for k in LABELS) for g in grades], grades


def test_the_same_completions_get_the_same_labels_with_two_cpu_burners_running():
    rows, limits = _rows(), sandbox.Limits(cpu_s=1)
    idle, grades = _labels(rows, limits)
    assert any(g.error == "timeout" for g in grades) and sum(g.gt_pass for g in grades) >= 6  # both kinds occur
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        loaded, _ = _labels(rows, limits)
    finally:
        for b in burners:
            b.kill()
            b.wait()
    assert loaded == idle


def test_a_wall_clock_limit_would_have_flipped_labels_under_load():
    """The control: the same slow-but-correct solutions with a wall limit below their loaded time
    (the old rule) time out, so the check above can fail."""
    rows = [r for i, r in enumerate(_rows()) if i % 7 == 1][:4]  # the slow ones
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(4)]
    try:
        _, grades = _labels(rows, sandbox.Limits(cpu_s=1.5, wall_s=0.25))
    finally:
        for b in burners:
            b.kill()
            b.wait()
    assert any(g.error == "timeout" for g in grades)
