# rev11 probes only: with RT11_SLOTS set, every Python process of the probe (the caller, the grader's
# forkserver and its workers, which inherit the environment) uses a private run-slots directory, so the
# probe's runs take turns with each other but neither block nor are blocked by the developer's test suite
# running on the same host (whose runs use the real /tmp/vgrout-run-slots-<uid>). The sandboxed programs
# never see this (bwrap, python -I -S).
import os
if os.environ.get("RT11_SLOTS"):
    import vgrout.substrate.sandbox as _s
    _s.RUN_SLOTS_DIR = os.environ["RT11_SLOTS"]
# With RT11_LOG set, every run's slot wait and life are logged there (one line each, appended):
#   TAKE <pid> <slot> cpus=<c> waited=<s> at=<t>   and   END <pid> <slot> at=<t> wall_stopped=<b>
if os.environ.get("RT11_LOG"):
    import time as _t, threading as _th
    import vgrout.substrate.sandbox as _s
    _take, _run, _local = _s._take_run_slot, _s.run, _th.local()
    def _log(line):
        with open(os.environ["RT11_LOG"], "a") as f:
            f.write(line + "\n")
    def _take_logged(cpus):
        t = _t.time(); fd = _take(cpus)
        _local.slot = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        _log(f"TAKE {os.getpid()} {_local.slot} cpus={cpus} waited={_t.time()-t:.2f} at={_t.time():.2f}")
        return fd
    def _run_logged(*a, **k):
        _local.slot = None
        r = _run(*a, **k)
        _log(f"END {os.getpid()} {_local.slot} at={_t.time():.2f} wall_stopped={r.wall_stopped} cpu_s={r.cpu_s:.2f}")
        return r
    _s._take_run_slot, _s.run = _take_logged, _run_logged
