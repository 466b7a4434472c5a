# rev12 probes only (as rev11's): with RT12_SLOTS set, every Python process of a probe (caller, forkserver,
# pool workers) uses a PRIVATE run-slots directory, so neither my runs nor the developer's suite (real
# /tmp/vgrout-run-slots-<uid>) wait on the other. RT12_LOG: one line per slot take and per run end.
import os
if os.environ.get("RT12_SLOTS"):
    import vgrout.substrate.sandbox as _s
    _s.RUN_SLOTS_DIR = os.environ["RT12_SLOTS"]
if os.environ.get("RT12_LOG"):
    import time as _t
    import vgrout.substrate.sandbox as _s
    _take, _run = _s._take_run_slots, _s.run
    def _log(line):
        with open(os.environ["RT12_LOG"], "a") as f:
            f.write(line + "\n")
    def _take_logged(cpus):
        t = _t.time(); fds = _take(cpus)
        names = ",".join(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) for fd in fds)
        _log(f"TAKE {os.getpid()} {names} cpus={cpus} waited={_t.time()-t:.2f} at={_t.time():.2f}")
        return fds
    def _run_logged(*a, **k):
        t = _t.time(); r = _run(*a, **k)
        _log(f"END {os.getpid()} at={_t.time():.2f} life={_t.time()-t:.2f} wall_stopped={r.wall_stopped} cpu_s={r.cpu_s:.2f} timed_out={r.timed_out}")
        return r
    _s._take_run_slots, _s.run = _take_logged, _run_logged
# RT12_CONV_LOG: each phase-A conversation's thread CPU on the trusted side (pid, problem id, seconds, bound)
if os.environ.get("RT12_CONV_LOG"):
    import time as _t2
    import vgrout.substrate.grader as _g
    _ref_a = _g._referee_a
    def _ref_logged(ch, g):
        t = _t2.thread_time()
        try: return _ref_a(ch, g)
        finally:
            with open(os.environ["RT12_CONV_LOG"], "a") as f:
                f.write(f"CONV {os.getpid()} {g.problem.id} cpu_limit={g.limits.cpu_s} thread_cpu={_t2.thread_time()-t:.3f} "
                        f"bound={g.trusted_cpu_s} cpu_spent={g.cpu_spent} at={_t2.time():.2f}\n")
    _g._referee_a = _ref_logged
