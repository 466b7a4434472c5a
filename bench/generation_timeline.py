"""Where a step's generation waits: a fresh generation at paper_natural's shape and lengths (as
bench/fresh_generation.py runs it), with a CUDA event recorded after each decode step's replay.
The device time between two consecutive events is that step's work plus whatever came before it:
a compaction's copies, or time the device sat idle waiting for the host (a compaction's plan, a
capture). Per (layout, span) the median of these intervals is taken as the step's work; the rest,
summed, is `extra_s` (the timeline cannot tell the copies from the idle time).
Prints one json line per run, then per compaction interval of the last run.

An experiment: it wraps `decode.Engine.replay` and `Engine.capture` in this process only.

    python -m bench.generation_timeline [N]
"""
import json
import statistics
import sys
import time
from collections import defaultdict

import torch
from fresh_generation import natural_generation  # noqa: E402 (this folder is on the path: the script's own)

from vgrout.engine import decode

EVENTS: list = []    # (event after a replay, its layout key, host time of the replay call)
CAPTURES: list = []  # (host start, host seconds) of each capture


def instrument() -> None:
    replay, capture = decode.Engine.replay, decode.Engine.capture

    def timed_replay(self, span):
        replay(self, span)
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        EVENTS.append((ev, (*self.layout(), self.packed, span), time.perf_counter()))

    def timed_capture(self, span):
        key = (*self.layout(), self.packed, span)
        t0 = time.perf_counter()
        g = capture(self, span)
        if key not in getattr(self, "_seen", set()):
            self._seen = getattr(self, "_seen", set()) | {key}
            CAPTURES.append((t0, time.perf_counter() - t0))
        return g

    decode.Engine.replay, decode.Engine.capture = timed_replay, timed_capture


def main(n: int = 2) -> None:
    instrument()
    run = natural_generation()
    for i in range(n):
        EVENTS.clear()
        CAPTURES.clear()
        wall = run()
        dts = [(a[0].elapsed_time(b[0]) / 1e3, b[1]) for a, b in zip(EVENTS, EVENTS[1:])]
        by_key = defaultdict(list)
        for dt, key in dts:
            by_key[key].append(dt)
        work = {k: statistics.median(v) for k, v in by_key.items()}
        idle = [max(0.0, dt - work[k]) for dt, k in dts]
        print(json.dumps({"run": i, "wall_s": round(wall, 3), "steps": len(EVENTS),
                          "first_to_last_step_s": round(sum(dt for dt, _ in dts), 3),
                          "step_work_s": round(sum(work[k] for _, k in dts), 3), "extra_s": round(sum(idle), 3),
                          "extra_over_10ms_s": round(sum(x for x in idle if x > 0.01), 3),
                          "captures": len(CAPTURES), "capture_host_s": round(sum(c for _, c in CAPTURES), 3)}),
              flush=True)
    # the last run, per interval of decode.COMPACT_EVERY steps: where the extra time falls
    every = decode.COMPACT_EVERY
    for s in range(0, len(idle), every):
        chunk = idle[s:s + every]
        print(json.dumps({"steps": [s + 1, s + len(chunk)], "layout": list(dts[s][1]), "extra_s": round(sum(chunk), 4),
                          "largest_extra_ms": round(1e3 * max(chunk), 2),
                          "at_step": s + 1 + chunk.index(max(chunk))}))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
