"""Run untrusted Python in a throwaway sandbox that leaves nothing behind.

Every program gets: its own session (process group) killed whole at the end; a CPU limit over all
its processes together (what decides `timeout`: CPU seconds do not depend on what else the machine
runs; "What a run reports" below) with a wall-clock backstop for programs that wait without
computing; RLIMIT_AS / RLIMIT_NPROC / RLIMIT_FSIZE / no core files; stdin, stdout and stderr on anonymous memory files (memfd: no path anywhere, capped by
RLIMIT_FSIZE, gone with the last descriptor); its files handed over on a descriptor and written
by a trusted prelude into its own working directory; a scrubbed environment.

Under bubblewrap (`bwrap`, the default) the program also gets no network, a private pid
namespace (--die-with-parent: nothing outlives the run, or the grader; a run returns once the
namespace is gone), only the system's read-only /usr (and the interpreter's own prefix) as its
root, and a private size-limited /tmp that holds its working directory: no project file, job
file or host temporary directory is reachable or created. Its only other writable place is a
size-limited /dev/shm (/, /dev and /proc are read-only; /dev/pts is empty: no pty of the host's
one table); it can make no namespace (--disable-userns: all sandboxes run as one host uid, whose
namespace quota one of them could otherwise hold); and all its processes together hold at most
`Limits.ram` of memory, whatever holds it (memory files included), through a memory cgroup of the
run's own where this process has a memory controller (`_memory_cgroup_parent`): past it the
kernel's OOM killer picks among the run's processes only (`Result.oom_killed` says it did). Its
processes together use at most `Limits.cpus` CPUs at once (a quota on a cpu cgroup of the run's
own, `_cpu_settings`), however many tasks it makes, and while it lives it holds as many of the
host's run slots as its quota's CPUs (`_take_run_slots`), shared by every process of ours that runs sandboxes, so the runs of
the host together ask no more CPU than it has. Every
process of a run has oom_score_adj 1000 (`_OOM_FIRST_ARGV`), so that when memory runs short above
the runs' own bounds (their sum is not bounded) the OOM killer takes a run's process before the
grader's or its caller's; with /proc read-only the program cannot lower it. A seccomp filter
(`_seccomp_program`) refuses file locks and file notifications (through the files all sandboxes
share read-only they were exact channels between concurrent sandboxes), and kernel keys, POSIX
message queues, io_uring and growing a pipe (fcntl F_SETPIPE_SZ) (counted in per-uid quotas that
all sandboxes, one host uid, share). The prelude bounds a sandbox's pending signals at 128
(RLIMIT_SIGPENDING: each sandbox's own count, in its user namespace, is charged to the host uid
too, so together they stay far below the host's limit, 96,365 here, for any concurrency the
grader runs). Two per-uid channels stay open (docs/redteam/rev6/channels6.py; one host uid per concurrent
sandbox would close both): file descriptors in flight over unix sockets (SCM_RIGHTS) count
against one per-uid limit (docs/redteam/rev5/channels_probe.py: 65 alone, 45 beside a sibling holding 20;
a filter cannot read a message's control data, and sockets are ordinary); and default pipes'
pages, counted per uid against fs.pipe-user-pages-soft (16,384): a sandbox's nproc x nofile / 2
pipes of 16 pages each (32,768) pass it, and past it every sandbox's new pipe gets one page
(channels6.py pipedef: 65,536 bytes alone, 8,192 beside 40 processes of 30 pipes), which a sibling
reads by filling one. What they carry is only what a response already knows: the grader tells no
sandbox anything that depends on a hidden test.
Each process may hold `Limits.nofile` open files (RLIMIT_NOFILE), of the host's one file table.
Without bubblewrap, `isolation="rlimit"` must be asked for by name: the rlimits alone and a host
temporary directory. It is weaker: the graded code can read every file the world may read (a problem file with its hidden tests included, so ground truth is not safe
there). A grader killed with kill -9 leaves nothing behind on either path: bwrap's sandboxes die
with it (--die-with-parent), and on the rlimit-only path a reaper process (`REAPER`) cleans up
after it.

Why the uid switch: Linux exempts real uid 0 from RLIMIT_NPROC, so a fork bomb run as root
is contained by nothing. When we are root the program runs as an unprivileged uid: under
bwrap as `nobody` inside a fresh user namespace, where the process count is per namespace
(so concurrent sandboxes do not share a quota); on the rlimit-only path as a random unused
uid of its own, whose processes are all killed and whose files in the shared temporary
directories are removed afterwards. The limits are set by the trusted prelude inside the
sandbox, after the namespace exists, so the kernel counts processes per sandbox.

`talk`: a program may also get a request/reply channel to the caller (two pipes, JSON lines),
which the caller drives while the program runs (the grader's trusted comparison).

What a run reports is what this side observed, never what the program says about itself:
- CPU: RLIMIT_CPU is per process, so it alone lets a program's children spend a limit each. Under
  bwrap each run gets a cgroup v2 of its own (`_cgroup_parent`: where one can be made, entered and
  read; checked once per process) that the run enters before bwrap starts, so every process of
  it, at any depth, is in it from birth and cannot leave (the cgroup file system is not in the
  sandbox, and is not nobody's to write). Its cpu.stat counts the CPU of every process that ever
  ran in it, exactly, whether it is running, a zombie, reaped by its parent, or reaped unseen by
  the kernel (a parent that ignores SIGCHLD). A meter here (`_Meter`, one thread for all runs)
  reads it every CPU_SAMPLE_S and kills the run (cgroup.kill) when it reaches the limit;
  `Result.cpu_s` is the count once every process of the run is gone, and `timed_out` is that
  count at the limit (RLIMIT_CPU then sits a second above, a backstop: the kernel's per-process
  check can fire a little before the cgroup's count reaches the limit). No reading's timing
  decides the label. Where no cgroup can be had (a container that delegates none), the meter
  reads the sandbox's own procfs instead (through its init's /proc/PID/root/proc, which lists
  exactly its pid namespace): each live process's own time plus what it reaped (cutime/cstime),
  the largest total read. What escapes that fallback: a child reaped automatically between two
  readings leaves no trace, and one reaped automatically (its parent ignores SIGCHLD) is counted
  only while it lives: the kernel adds its time to no parent, and the meter keeps the largest
  total read, not a sum over processes gone, so children run one after another count as the
  costliest of them, and their CPU beyond that is not counted at all (RLIMIT_CPU still bounds each
  process, and the wall backstop the run), and death
  by the CPU limit's signals is a timeout when the meter read the run within CPU_SIGNAL_SLACK_S
  of its limit. On the rlimit-only path the processes of the program's session are read from the
  host's /proc (one that leaves the session is not counted). A meter that cannot start or read
  is the run's failure (`Result.failure`), never an exception out of `run`: the run is killed and
  the caller labels that grading.
- `timed_out`: the wall backstop passed, or the CPU count (above) reached the limit. A program
  that kills itself, or prints what bwrap prints, chooses no label. `wall_stopped` says the wall
  backstop stopped it below its CPU limit: then what it got of the CPU, not only its program, may
  have decided it (a neighbour can starve a run; `Limits.cpus` bounds how much, the grader grades
  such a run again alone).
- `started`: the trusted prelude ran (it writes one byte on a pipe of its own before any of the
  program's code runs); a run that ends without it is the sandbox's failure, not the program's.
"""
from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import functools
import json
import math
import os
import pwd
import random
import secrets
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

NOBODY = 65534
KILL = shutil.which("kill", path="/usr/bin:/bin") or "kill"
SETPRIV = shutil.which("setpriv", path="/usr/bin:/bin")  # util-linux; without it, Popen's own uid switch
FIND = shutil.which("find", path="/usr/bin:/bin") or "find"
SH = shutil.which("sh", path="/usr/bin:/bin")
SANDBOX_CWD = "/tmp/sandbox"  # inside the private /tmp
ISOLATIONS = ("bwrap", "rlimit")
ISOLATION_ENV = "VGROUT_ISOLATION"  # a pipeline run's isolation when no caller names one
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # the read-only root under bwrap
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock")  # where an rlimit-only program may write
CPU_LIMIT_STATUS = {-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU, 128 + signal.SIGKILL}
CPU_SAMPLE_S = 0.05  # how often the meter reads the CPU seconds of every live run
CPU_SIGNAL_SLACK_S = 0.5  # a death by the CPU limit's signals is a timeout only this close to the limit, as read
_TICKS = os.sysconf("SC_CLK_TCK")

# Trusted code that runs first inside the sandbox: lock the limits (soft = hard, but for the CPU:
# SIGXCPU at the soft limit, SIGKILL a second later; each process has its own CPU seconds, and the
# meter outside counts them all together; RLIMIT_SIGPENDING 128: queued signals are charged to the
# one host uid of every sandbox, whose limit (96,365 here) one sandbox filled for another to read,
# issue 52 round 7, docs/redteam/rev6/channels6.py sigq), write the program's files from their descriptor into
# the working directory, say that it started (one byte on its own pipe), then run the main file as
# __main__.
PRELUDE = """\
import json, os, resource, sys
cpu, mem, nproc, fsize, nofile, files_fd, ready_fd = (int(x) for x in sys.argv[1:8])
with os.fdopen(files_fd, "rb") as f:
    files = json.loads(f.read())
for name, text in files.items():
    with open(name, "w") as f:
        f.write(text)
for lim, v in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_NPROC, nproc), (resource.RLIMIT_FSIZE, fsize),
               (resource.RLIMIT_NOFILE, nofile), (resource.RLIMIT_CORE, 0), (resource.RLIMIT_SIGPENDING, 128)):
    resource.setrlimit(lim, (v, v))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
os.write(ready_fd, b"1")
os.close(ready_fd)
sys.argv = sys.argv[8:]
with open(sys.argv[0]) as f:
    source = f.read()
del f, files, name, text, lim, v, cpu, mem, nproc, fsize, nofile, files_fd, ready_fd
exec(compile(source, sys.argv[0], "exec"), {"__name__": "__main__", "__file__": sys.argv[0], "__builtins__": __builtins__})
"""


@dataclass(frozen=True)
class Limits:
    cpu_s: float = 4.0  # RLIMIT_CPU: CPU seconds of the whole program (load moves them little); decides `timeout`
    wall_s: float | None = None  # wall-clock backstop for programs that wait; None: 3·cpu_s + 5
    # CPUs the run's processes together may use at once (a quota on its cpu cgroup, where it has one:
    # `_cpu_cgroup_parent`, or cpu.max in v2): however many tasks a run makes, it takes at most this
    # much of the host, so runs that together ask no more than the host's CPUs each get theirs
    # (docs/redteam/rev9: 63 spinning tasks of one run left a sibling run of equal cpu.shares 0.01 CPU s
    # in 5 s; with a quota of one CPU it got 2.40, with half a CPU each its whole half, sched_micro)
    cpus: float = 1.0
    memory_bytes: int = 1 << 30
    nproc: int = 64
    # open files of each process (RLIMIT_NOFILE): the host's file table (fs.file-max) is one count for
    # every process of the machine, and without it a run held nproc x 20,000 of it (issue 52 F4).
    # The harness holds about 10 and no canonical solution opens files; nproc x nofile per run.
    nofile: int = 64
    output_bytes: int = 4 << 20  # cap on stdout, stderr and every file the program writes
    tmp_bytes: int = 64 << 20  # size of the private /tmp under bwrap (files of all sizes together)
    shm_bytes: int = 8 << 20  # size of the private /dev/shm under bwrap
    # memory of all the run's processes together, whatever holds it (anonymous memory, memory files
    # (memfd), its tmpfs files) through a memory cgroup of the run's own (`_memory_cgroup_parent`):
    # RLIMIT_AS bounds one process's mappings only. None: memory_bytes + tmp_bytes + shm_bytes + 64 MiB
    ram_bytes: int | None = None
    # bwrap, or rlimit (the weaker rlimit-only path, asked for by name: here, or for a whole
    # pipeline run on a machine without bubblewrap, by VGROUT_ISOLATION=rlimit)
    isolation: str = dataclasses.field(default_factory=lambda: os.environ.get(ISOLATION_ENV, "bwrap"))

    def __post_init__(self):
        if self.isolation not in ISOLATIONS:
            raise ValueError(f"unknown isolation {self.isolation!r} (the argument, or ${ISOLATION_ENV}); "
                             f"valid: {', '.join(ISOLATIONS)}")
        if self.cpu_s <= 0:
            raise ValueError(f"cpu_s must be positive, got {self.cpu_s}")
        if not self.cpus > 0:
            raise ValueError(f"cpus must be positive, got {self.cpus}")

    @property
    def wall(self) -> float:
        return self.wall_s if self.wall_s is not None else 3 * self.cpu_s + 5

    @property
    def ram(self) -> int:
        return self.ram_bytes if self.ram_bytes is not None else (self.memory_bytes + self.tmp_bytes + self.shm_bytes
                                                                  + (64 << 20))

    def with_cpu(self, cpu_s: float | None) -> "Limits":
        """These limits with a problem's own CPU limit (None: keep ours)."""
        return self if cpu_s is None else dataclasses.replace(self, cpu_s=max(self.cpu_s, cpu_s))


@dataclass(frozen=True)
class Result:
    returncode: int  # exit status, or -N when killed by signal N
    stdout: str
    stderr: str
    timed_out: bool  # the CPU limit (all the run's processes together) or the wall backstop, as observed here
    output_exceeded: bool  # stdout or stderr reached the cap
    isolation: str  # "bwrap" or "rlimit"
    cpu_s: float  # CPU seconds of all the run's processes, as the meter here read them (see the module doc)
    started: bool  # the trusted prelude ran: False is a sandbox that failed before the program
    failure: str | None = None  # this side failed to watch the run (its CPU meter): what failed
    # the kernel's OOM killer killed a process of the run at its memory bound (`Limits.ram`), as the
    # run's memory cgroup counts it (memory.oom_control's oom_kill): never the program's own word
    oom_killed: bool = False
    # timed_out by the wall backstop, below the CPU limit: what it got of the CPU may have decided it,
    # not only its program (a program that waits, or one a busy host starved: the grader grades it again alone)
    wall_stopped: bool = False


class Timeout(BaseException):
    """The program did not answer before the wall backstop (a BaseException: no `except Exception`
    of the caller's conversation may take it for one request's failure)."""


class Channel:
    """The caller's end of a program's request/reply channel: JSON lines, each way. `recv` returns
    None when the program closed its end (it ended, or died at a limit); every wait is bounded by
    the run's wall backstop, and a line longer than the output cap ends the conversation."""

    def __init__(self, r: int, w: int, deadline: float, cap: int, stdout_fd: int):
        self.r, self.w, self.deadline, self.cap, self.stdout_fd = r, w, deadline, cap, stdout_fd
        self.buf = b""
        # POLLOUT promises room for one page, not for a whole request: a blocking write of more would
        # wait for a program that stopped reading (and shrank its pipe) past every deadline
        os.set_blocking(w, False)

    def stdout_bytes(self) -> int:
        """How many bytes the program has written to stdout so far."""
        return os.fstat(self.stdout_fd).st_size

    def _wait(self, fd, write: bool) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise Timeout()
        if not _ready(fd, left, select.POLLOUT if write else select.POLLIN):
            raise Timeout()

    def send(self, obj) -> None:
        data = (json.dumps(obj) + "\n").encode()
        while data:
            self._wait(self.w, True)
            try:
                data = data[os.write(self.w, data):]  # what fits now; the rest after the next POLLOUT
            except BlockingIOError:  # room for less than an atomic write: wait a little, within the deadline
                time.sleep(0.001)
            except BrokenPipeError:
                raise EOFError() from None

    def recv_line(self) -> bytes | None:
        """The next line, unparsed (without its newline); None as for `recv`."""
        while b"\n" not in self.buf:
            if len(self.buf) > self.cap:
                return None
            self._wait(self.r, False)
            chunk = os.read(self.r, 1 << 16)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def recv(self):
        line = self.recv_line()
        if line is None:
            return None
        try:
            return json.loads(line)
        except (ValueError, RecursionError):
            return None


def _is_root() -> bool:
    return os.geteuid() == 0


@functools.cache
def _bwrap_problem() -> str | None:
    """None when bwrap runs here as we will run it (a size-limited /tmp included); else why not
    (checked once per process)."""
    if shutil.which("bwrap") is None:
        return "bwrap not found on PATH"
    uid = NOBODY if _is_root() else None
    program = _seccomp_program()
    seccomp = _memfd("seccomp", program) if program is not None else None
    try:
        with open(os.devnull, "wb") as info:  # every option a run passes, --info-fd and --seccomp included
            argv, as_user = _as_user(_bwrap_argv(Limits(), info_fd=info.fileno(), seccomp_fd=seccomp)
                                     + [sandbox_python(), "-I", "-S", "-c", "pass"], uid)
            r = subprocess.run(argv, capture_output=True, text=True,
                               pass_fds=(info.fileno(),) + ((seccomp,) if seccomp is not None else ()), **as_user)
    finally:
        if seccomp is not None:
            os.close(seccomp)
    if r.returncode != 0:
        if "disable-userns" in r.stderr:
            return (f"this bwrap lacks --disable-userns (bubblewrap >= 0.8 has it; {_bwrap_version()}), without "
                    f"which one sandbox can take the namespace quota every sandbox shares")
        return f"bwrap failed: {r.stderr.strip()[:200]}"
    return None


def _bwrap_version() -> str:
    r = subprocess.run(["bwrap", "--version"], capture_output=True, text=True, check=False)
    return r.stdout.strip() or "its version unknown"


def isolation(requested: str | None = None) -> str:
    """The isolation a run gets: bwrap (an error naming the package when it cannot run here), or
    rlimit when asked for by name (None: the default of Limits)."""
    requested = requested or Limits().isolation
    if requested not in ISOLATIONS:
        raise ValueError(f"unknown isolation {requested!r}; valid: {', '.join(ISOLATIONS)}")
    if requested == "rlimit":
        _warn_once()
        return "rlimit"
    problem = _bwrap_problem()
    if problem is not None:
        raise RuntimeError(f"the grader runs untrusted code under bubblewrap, and {problem}: install the "
                           f"'bubblewrap' package, 0.8 or later (apt-get install bubblewrap), or ask for the weaker "
                           f"rlimit-only sandbox by name (isolation='rlimit', `vgrout grade --isolation rlimit`, or "
                           f"{ISOLATION_ENV}=rlimit for a pipeline run)")
    return "bwrap"


@functools.cache
def _warn_once() -> None:
    warnings.warn("isolation='rlimit': untrusted code runs with rlimits only (no network, filesystem or pid "
                  "isolation; it can read what our user can read). Install bubblewrap for the isolated path.",
                  stacklevel=3)


@functools.cache
def sandbox_python() -> str:
    """An interpreter the sandbox uid may execute: ours when any user can run it, else the
    system python3 (the graded code needs the standard library only)."""
    if not _is_root():
        return os.path.realpath(sys.executable)
    for candidate in (sys.executable, shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")):
        if candidate and _world_executable(candidate):
            return os.path.realpath(candidate)
    raise RuntimeError(f"no python3 that an unprivileged user can execute ({sys.executable} is not)")


def _world_executable(path: str) -> bool:
    real = Path(os.path.realpath(path))
    return all(os.stat(p).st_mode & stat.S_IXOTH for p in [real, *real.parents])


def _bwrap_argv(limits: Limits, info_fd: int | None = None, seccomp_fd: int | None = None) -> list[str]:
    # --unshare-user --disable-userns (bwrap >= 0.8): no namespace can be made inside. Every sandbox
    # runs as the same host uid, and a namespace made anywhere under it counts against that uid's
    # quota (/proc/sys/user/max_*_namespaces): one row could hold it and fail its neighbours' bwrap.
    argv = ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"]
    argv += ["--info-fd", str(info_fd)] if info_fd is not None else []
    argv += ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            argv += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            argv += ["--ro-bind", d, d]
    prefix = Path(sandbox_python()).parents[1]  # .../bin/python3 -> its installation
    if not any(str(prefix).startswith(d + "/") or str(prefix) == d for d in SYSTEM_DIRS):
        argv += ["--ro-bind", str(prefix), str(prefix)]
    # Every writable file system is a bounded one: /tmp (tmp_bytes) and /dev/shm (shm_bytes). bwrap's
    # own tmpfs under / and under /dev are half the RAM each and outside every limit: read-only.
    # bwrap's /dev has a devpts (ptmxmode=666) whose ptys count against the host's one pty table
    # (kernel.pty.max, issue 52 F5): covered by an empty read-only tmpfs, /dev/ptmx leads nowhere.
    return argv + ["--dev", "/dev", "--size", str(limits.shm_bytes), "--tmpfs", "/dev/shm",
                   "--size", "4096", "--tmpfs", "/dev/pts", "--remount-ro", "/dev/pts", "--remount-ro", "/dev",
                   "--proc", "/proc", "--remount-ro", "/proc", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
                   "--dir", SANDBOX_CWD, "--chdir", SANDBOX_CWD, "--remount-ro", "/"]


def _user_kwargs(uid: int | None) -> dict:
    if uid is None:
        return {}
    return {"user": uid, "group": uid, "extra_groups": []}


def _as_user(argv: list[str], uid: int | None) -> tuple[list[str], dict]:
    """argv and Popen's keyword arguments that start bwrap as uid:gid uid with no supplementary
    groups (uid None: as we are). Through setpriv, which switches before it execs argv, so that Popen
    may vfork: with user= or group= CPython forks a copy of the caller instead, tens of milliseconds
    for a grader that holds a model (its grading threads wait on each), about 2 ms with vfork. The
    program ends with the same credentials either way (ids, no groups, no capabilities).
    bwrap's path only: `_bwrap_problem` starts it this way once and fails loudly where setpriv
    cannot switch, and bwrap dies with its parent. The rlimit-only path keeps Popen's switch: there
    a failed switch must raise, not end as the program's error, and the reaper's kill as the uid
    must reach the program from the moment it can outlive the grader (setpriv runs as root first)."""
    if uid is None:
        return argv, {}
    if SETPRIV is None:
        return argv, _user_kwargs(uid)
    return [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *argv], {}


def _fresh_uid() -> int:
    """A uid no account uses, so that killing 'every process of this uid' kills only this run's."""
    while True:
        uid = random.SystemRandom().randrange(1_000_000_000, 2_000_000_000)
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid


def _kill_uid(uid: int) -> None:
    """SIGKILL every process owned by `uid`: kill(-1) sent as that uid reaches only its own."""
    subprocess.run([KILL, "-KILL", "-1"], **_user_kwargs(uid), stderr=subprocess.DEVNULL, timeout=10)


def _remove_files_of(uids: set[int]) -> None:
    """Remove what `uids` left in the world-writable directories (rlimit-only path, as root), at any depth.

    The walk is `find`'s, in C and outside our interpreter: a walk over a host /tmp that holds an
    installed Python environment visits tens of thousands of entries, and done in Python, under the
    GIL that every grading thread shares, it capped grading at about one program a second."""
    match = [a for u in sorted(uids) for a in ("-o", "-uid", str(u))][1:]
    found = subprocess.run([FIND, *[t for t in SHARED_TMP if os.path.isdir(t)], "-mindepth", "1", "(", *match, ")",
                            "-prune", "-print0"], capture_output=True, timeout=600)
    if found.returncode not in (0, 1):  # 1: an entry vanished mid-walk (another run's cleanup)
        raise RuntimeError(f"sandbox cleanup: {FIND} failed ({found.returncode}): {found.stderr.decode()[-300:]}")
    for path in filter(None, found.stdout.split(b"\0")):
        try:
            st = os.lstat(path)
            if st.st_uid not in uids:  # changed hands since the walk: not ours to remove
                continue
            if stat.S_ISDIR(st.st_mode):
                _rmtree(Path(os.fsdecode(path)))
            else:
                os.unlink(path)
        except OSError:
            pass


class _Sweeper:
    """Runs _remove_files_of for finished runs, with one walk for all the runs that finish together.

    A walk costs the same for one uid as for many, so a run that asks waits for the first walk that
    starts after it asked (and leads that walk if none is under way): concurrent runs share walks,
    and when `sweep(uid)` returns, uid's files are gone."""

    def __init__(self):
        self.cond = threading.Condition()
        self.pending: set[int] = set()
        self.started = 0   # walks started so far
        self.finished = 0  # walks finished so far (in order: one walk at a time)
        self.busy = False

    def sweep(self, uid: int) -> None:
        with self.cond:
            self.pending.add(uid)
            mine = self.started + 1  # the next walk to start takes every pending uid
            while self.finished < mine:
                if self.busy:
                    self.cond.wait()
                    continue
                uids, self.pending = self.pending, set()
                self.started += 1
                self.busy = True
                self.cond.release()
                try:
                    _remove_files_of(uids)
                finally:
                    self.cond.acquire()
                    self.busy = False
                    self.finished += 1
                    self.cond.notify_all()


_sweeper = _Sweeper()


# The rlimit-only path's answer to a grader killed with kill -9: a reaper process that holds the
# read end of a pipe whose write end only the grader holds. Each run announces its uid and work
# directory before it starts (before the directory exists) and withdraws them after; at EOF (the
# grader is gone, however it died) the reaper cleans up what is still announced in the order a
# run's own `finally` does, with the same functions (imported from the package directory it is
# given): it kills the uids, removes what they left in the shared temporary directories in one walk
# for all of them (a work directory a program swapped for a symlink goes here, before _rmtree could
# follow it), then the work directories.
REAPER = """\
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from vgrout.substrate import sandbox
live = {}
for line in sys.stdin:
    sign, uid, work = line.rstrip("\\n").split(" ", 2)
    if sign == "+":
        live[(uid, work)] = True
    else:
        live.pop((uid, work), None)
uids = {int(uid) for uid, _ in live if uid != "-"}
for uid in uids:
    sandbox._kill_uid(uid)
if uids:
    sandbox._remove_files_of(uids)
for _, work in live:
    sandbox._rmtree(Path(work))
"""
_reaper_lock = threading.Lock()
_reaper: list = []


def _announce(sign: str, uid: int | None, work: Path) -> None:
    """Tell the reaper (started on first use) that a run of `uid` in `work` starts (+) or ended (-)."""
    with _reaper_lock:
        if not _reaper:
            r, w = os.pipe()
            subprocess.Popen([sys.executable, "-I", "-S", "-c", REAPER, str(Path(__file__).resolve().parents[2])], stdin=r,
                             start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            os.close(r)
            _reaper.append(w)
        os.write(_reaper[0], f"{sign} {'-' if uid is None else uid} {work}\n".encode())


def _user_process_count() -> int:
    uid = os.getuid()
    return sum(1 for p in Path("/proc").iterdir() if p.name.isdigit() and _owner(p) == uid)


def _owner(p: Path) -> int | None:
    try:
        return p.stat().st_uid
    except OSError:
        return None


def _memfd(name: str, data: bytes = b"") -> int:
    fd = os.memfd_create(f"vgrout-{name}", 0)  # no path: nothing to find on disk, nothing left behind
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _read_capped(fd: int, cap: int) -> tuple[str, bool]:
    os.lseek(fd, 0, os.SEEK_SET)
    data = os.read(fd, cap)
    return data.decode("utf-8", errors="replace"), len(data) >= cap


def _stat_fields(stat: bytes) -> list[bytes]:
    """The fields of /proc/PID/stat after the command name (which may hold spaces or parentheses):
    [0] state, [1] ppid, [2] pgrp, [3] session, [11:15] utime, stime, cutime, cstime (clock ticks)."""
    return stat[stat.rindex(b")") + 2:].split()


def _read_at(path: str, dir_fd: int | None = None) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY, dir_fd=dir_fd)
    except OSError:  # the process is gone
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


class _Meter:
    """The CPU seconds of every process of one run, read from outside the sandbox (the module doc
    says what it counts); the run is killed (`kill`) when they reach `limit_s`. Read by the
    monitor thread and once by the run itself; closed by the run before it reaps the program or
    closes the descriptors `kill` uses. Sources: the run's own cgroup (`cgroup_fd`: its cpu.stat
    counts every process that ever ran in it, exactly), else the sandbox's procfs (`proc_fd`), else
    the host's processes of the run's session (`session`, the rlimit-only path)."""

    def __init__(self, limit_s: float, kill, cgroup_fd: int | None = None, proc_fd: int | None = None,
                 session: int | None = None):
        self.limit_s, self.kill, self.cgroup_fd, self.proc_fd, self.session = limit_s, kill, cgroup_fd, proc_fd, session
        self.lock = threading.Lock()
        self.seen = 0.0  # the largest total read (processes come and go between readings)
        self.exceeded = False  # killed here for its CPU seconds
        self.closed = False
        self.failure: BaseException | None = None

    def read(self, host: dict[int, list[bytes]] | None = None) -> None:
        """One reading. From the run's cgroup; else under bwrap from the sandbox's procfs; on the
        rlimit-only path from `host` (session -> stat fields of the host's processes, read once for
        all runs), or afresh."""
        with self.lock:
            if self.closed:
                return
            if self.cgroup_fd is not None:
                seconds = _cgroup_cpu_s(self.cgroup_fd)
            elif self.proc_fd is not None:
                ticks = 0
                for name in os.listdir(self.proc_fd):
                    if name.isdigit() and (stat := _read_at(f"{name}/stat", self.proc_fd)):
                        ticks += sum(int(x) for x in _stat_fields(stat)[11:15])
                seconds = ticks / _TICKS
            else:
                host = _host_stats() if host is None else host
                seconds = sum(int(x) for f in host.get(self.session, []) for x in f[11:15]) / _TICKS
            self.seen = max(self.seen, seconds)
            if self.seen >= self.limit_s and not self.exceeded:
                self.exceeded = True
                self.kill()

    def close(self) -> None:
        """No reading or kill after this (the cgroup's descriptor is the run's to close)."""
        with self.lock:
            self.closed = True
            if self.proc_fd is not None:
                os.close(self.proc_fd)
                self.proc_fd = None


def _host_stats() -> dict[int, list[bytes]]:
    """The stat fields of every process of the host, by session."""
    by_session: dict[int, list[bytes]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (stat := _read_at(f"/proc/{name}/stat")):
            fields = _stat_fields(stat)
            by_session.setdefault(int(fields[3]), []).append(fields)
    return by_session


class _Monitor:
    """One thread that reads every live run's meter each CPU_SAMPLE_S (started on first use)."""

    def __init__(self):
        self.cond = threading.Condition()
        self.meters: set[_Meter] = set()
        self.thread: threading.Thread | None = None

    def add(self, meter: _Meter) -> None:
        with self.cond:
            self.meters.add(meter)
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="vgrout-cpu-meter", daemon=True)
                self.thread.start()
            self.cond.notify()

    def remove(self, meter: _Meter) -> None:
        with self.cond:
            self.meters.discard(meter)

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.meters:
                    self.cond.wait()
                live = list(self.meters)
            try:
                host = _host_stats() if any(m.session is not None for m in live) else None
            except BaseException as e:  # reported by the runs when they close their meters
                host, failure = None, e
            else:
                failure = None
            for m in live:
                try:
                    if failure is not None:
                        raise failure
                    m.read(host)
                except BaseException as e:
                    m.failure = e
                    self.remove(m)
            time.sleep(CPU_SAMPLE_S)


_monitor = _Monitor()
# a forked child of a grading process has no monitor thread, and may hold its lock mid-use: a fresh one
os.register_at_fork(after_in_child=_monitor.__init__)


def _cgroup_key(cgroup_fd: int, path: str, key: str) -> int:
    """The integer of one `key value` line of a cgroup's file (fail-fast: the file unreadable, the key
    absent)."""
    data = _read_at(path, cgroup_fd)
    if data is None:
        raise RuntimeError(f"sandbox: the run's cgroup has no readable {path}")
    for line in data.decode().splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    raise RuntimeError(f"sandbox: the run's cgroup's {path} has no {key}")


def _cgroup_cpu_s(cgroup_fd: int) -> float:
    """The CPU seconds of every process that ever ran in a cgroup (v2 cpu.stat usage_usec)."""
    return _cgroup_key(cgroup_fd, "cpu.stat", "usage_usec") / 1e6


def _write_at(path: str, data: bytes, dir_fd: int) -> None:
    fd = os.open(path, os.O_WRONLY, dir_fd=dir_fd)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _cgroup_join_argv(procs: str) -> list[str]:
    """A prefix of argv that moves the process into a cgroup (by its cgroup.procs) before it execs
    the rest: every process of the run is in it from the start."""
    return [SH, "-c", 'echo 0 > "$0" && exec "$@"', procs]


def _oom_kills(cgroup_fd: int) -> int:
    """How many processes the kernel's OOM killer killed in a memory cgroup (v1 memory.oom_control's
    oom_kill, Linux >= 4.13 has it)."""
    return _cgroup_key(cgroup_fd, "memory.oom_control", "oom_kill")


# A prefix of every run's argv: its processes are the OOM killer's first choice (oom_score_adj 1000,
# inherited by every process of the run), never the grader or its caller, when the machine or a
# memory cgroup above the runs' own is short of memory (the runs' bounds are each run's, not their
# sum: issue 52 F2). An unprivileged process may lower its own (to 0: seen on Linux 6.18, whatever
# root set first), so under bwrap the sandbox's /proc is read-only; on the rlimit-only path the
# program can lower it.
_OOM_FIRST_ARGV = [SH, "-c", 'echo 1000 > /proc/self/oom_score_adj && exec "$@"', "vgrout-oom-first"] if SH else []


# A seccomp filter (classic BPF, handed to bwrap's --seccomp) that refuses what lets concurrent
# sandboxes signal each other through the files they all share read-only (/usr, the interpreter):
# POSIX, OFD and flock locks (a lock taken in one is seen by F_GETLK in another: issue 52 F1), leases,
# and file-access notifications (dnotify F_NOTIFY, inotify, fanotify: one sandbox's reads are
# another's events), and what every sandbox, all being one host uid, would count in the same
# per-uid kernel quota (issue 52, round 6, F2/F4): the kernel key quota (add_key, request_key,
# keyctl: one sandbox's keys were read in /proc/key-users by another, docs/redteam/rev5/keyring_channel.py),
# POSIX message queues (mq_*: RLIMIT_MSGQUEUE's bytes, mqueue_channel.py), io_uring (its
# registered files outlive their fds past RLIMIT_NOFILE, uring_files.py), and growing a pipe past
# its default size (fcntl F_SETPIPE_SZ: 6,144 pages one sandbox held were missing from another's,
# issue 52 round 7, docs/redteam/rev6/channels6.py pipe), and setsid: every process of a run stays in
# the one session bwrap made (--new-session), so that the kernel's autogroup (one CFS group per
# session) gives a run one share however many processes it makes; 60 sessions of spinners took a
# neighbour's share and its honest canonical solution hit its wall backstop
# (docs/redteam/rev8/starve.py; the per-run CPU cgroup, `_cpu_cgroup_parent`, bounds it too). Nothing
# trusted inside the sandbox calls setsid (the prelude and the grader's harness do not). Locks fail with ENOLCK,
# everything else with EPERM; a syscall of another ABI (i386, x32) with ENOSYS. The page cache they
# share stays (what a sandbox read is faster for the next): no filter closes timing, so no sandbox
# may learn anything a sibling must not know (the grader's design); the filter closes the cheap,
# exact channels.
_SECCOMP_ARCHES = {
    # machine: (AUDIT_ARCH, fcntl, flock, refused with EPERM: (inotify_init, inotify_init1,
    # inotify_add_watch, fanotify_init, mq_open .. mq_getsetattr, add_key, request_key, keyctl,
    # io_uring_setup, io_uring_enter, io_uring_register, setsid)); aarch64's are asm-generic/unistd.h's
    "x86_64": (0xC000003E, 72, 73, (253, 294, 254, 300, *range(240, 246), 248, 249, 250, 425, 426, 427, 112)),
    "aarch64": (0xC00000B7, 25, 32, (26, 27, 262, *range(180, 186), 217, 218, 219, 425, 426, 427, 157)),
}
_FCNTL_REFUSED = {5: errno.ENOLCK, 6: errno.ENOLCK, 7: errno.ENOLCK,  # F_GETLK, F_SETLK, F_SETLKW
                  36: errno.ENOLCK, 37: errno.ENOLCK, 38: errno.ENOLCK,  # F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW
                  1024: errno.EPERM, 1025: errno.EPERM, 1026: errno.EPERM,  # F_SETLEASE, F_GETLEASE, F_NOTIFY
                  1031: errno.EPERM}  # F_SETPIPE_SZ: pipe pages, counted per uid (module doc)


@functools.cache
def _seccomp_program() -> bytes | None:
    """The filter's BPF program for this machine (None, with a warning, on a machine it has no
    syscall numbers for: the lock, notification and quota channels then stay open)."""
    import platform
    import struct
    machine = platform.machine()
    if machine not in _SECCOMP_ARCHES:
        warnings.warn(f"sandbox: no seccomp filter for machine {machine!r} (vgrout/substrate/sandbox.py "
                      f"_SECCOMP_ARCHES): concurrent sandboxes can signal each other through file locks and "
                      f"per-uid kernel quotas")
        return None
    arch, fcntl_nr, flock_nr, perm_nrs = _SECCOMP_ARCHES[machine]
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
    allow, err = 0x7FFF0000, 0x00050000  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | errno
    # (op, k, jump-if-true label, jump-if-false label): labels name the return instructions at the end
    code = [(ld, 4, None, None), (jeq, arch, None, "nosys"), (ld, 0, None, None)]
    code += [(jge, 0x40000000, "nosys", None), (jeq, flock_nr, "nolck", None)]  # x32's numbers have bit 30
    code += [(jeq, nr, "perm", None) for nr in perm_nrs]
    code += [(jeq, fcntl_nr, None, "allow"), (ld, 24, None, None)]  # args[1] (the command), its low 32 bits
    code += [(jeq, cmd, "nolck" if e == errno.ENOLCK else "perm", None) for cmd, e in _FCNTL_REFUSED.items()]
    # the returns follow the checks, "allow" first: falling through the last check allows
    returns = {"allow": allow, "nolck": err | errno.ENOLCK, "perm": err | errno.EPERM, "nosys": err | errno.ENOSYS}
    at = {name: len(code) + i for i, name in enumerate(returns)}
    out = b""
    for i, (op, k, jt, jf) in enumerate(code):  # a jump counts the instructions it skips
        out += struct.pack("=HBBI", op, 0 if jt is None else at[jt] - i - 1, 0 if jf is None else at[jf] - i - 1, k)
    return out + b"".join(struct.pack("=HBBI", ret, 0, 0, k) for k in returns.values())


@functools.cache
def _cgroup_parent() -> str | None:
    """The cgroup v2 directory under which each run gets a cgroup of its own (checked once per
    process: made, entered by a process, read, emptied and removed), or None where there is none
    we may use: no cgroup2 mount, not ours to write (a container that does not delegate one), a
    kernel without cgroup.kill. None leaves the meter on the procfs readings."""
    try:
        mount = own = None
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                if right.split(" ")[0] == "cgroup2":
                    root, mount = left.split(" ")[3:5]
                    break
        with open("/proc/self/cgroup") as f:
            own = next((line.rstrip("\n")[3:] for line in f if line.startswith("0::")), None)
        if mount is None or own is None or SH is None or not (own + "/").startswith(root.rstrip("/") + "/"):
            return None
        parent = os.path.join(mount + own[len(root.rstrip("/")):], "vgrout")
        os.makedirs(parent, exist_ok=True)
        _remove_stale_cgroups(parent)
        probe = _new_cgroup(parent)
        try:
            ok = subprocess.run([*_cgroup_join_argv(os.path.join(probe[0], "cgroup.procs")), "true"],
                                check=False, capture_output=True, timeout=30).returncode == 0
            ok = ok and _cgroup_cpu_s(probe[1]) > 0 and os.path.exists(os.path.join(probe[0], "cgroup.kill"))
        finally:
            _remove_cgroup(*probe)
        return parent if ok else None
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError):
        return None


def _remove_stale_cgroups(parent: str) -> None:
    """Remove the run cgroups that a grading process killed with kill -9 left (empty: bwrap's
    sandboxes died with it); each is named by the pid of the process that made it, and one whose
    maker still runs is left alone (it may be about to start its program)."""
    for name in os.listdir(parent):
        if not name.startswith("run-"):
            continue
        try:
            os.kill(int(name.split("-")[1]), 0)
            continue  # its grader is alive
        except ProcessLookupError:
            pass
        except (ValueError, IndexError, PermissionError):
            continue
        with contextlib.suppress(OSError):  # a cgroup that still holds a process stays
            os.rmdir(os.path.join(parent, name))


def _new_cgroup(parent: str) -> tuple[str, int]:
    path = os.path.join(parent, f"run-{os.getpid()}-{secrets.token_hex(8)}")
    os.mkdir(path)
    return path, os.open(path, os.O_RDONLY | os.O_DIRECTORY)


@functools.cache
def _memory_cgroup_parent() -> str | None:
    """The directory of a memory controller (cgroup v1, as on hosts whose v2 hierarchy has no
    controllers) under which each run gets a memory cgroup of its own; checked once per process
    (made, limited, entered, emptied, removed). None where there is none of ours: runs then have
    no bound on their memory together (RLIMIT_AS bounds each process's mappings only)."""
    try:
        parent = _v1_parent("memory")
        if parent is None:
            return None
        # its OOM kills can be read (what decides `memory`)
        ok = _v1_probe(parent, {"memory.limit_in_bytes": str(64 << 20)}, "the memory cgroup",
                       lambda fd: _oom_kills(fd) == 0)
        return parent if ok else None
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError):
        return None


def _v1_parent(controller: str) -> str | None:
    """`vgrout` under our own cgroup of a cgroup v1 hierarchy holding `controller` (made, its stale
    run cgroups removed), or None where there is no such mount of ours (OSError where not ours to write)."""
    mount = own = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fstype, _, options = right.split(" ")[:3]
            if fstype == "cgroup" and controller in options.strip().split(","):
                root, mount = left.split(" ")[3:5]
                break
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if controller in controllers.split(","):
                own = path
    if mount is None or own is None or SH is None or not (own + "/").startswith(root.rstrip("/") + "/"):
        return None
    parent = os.path.join(mount + own[len(root.rstrip("/")):], "vgrout")
    os.makedirs(parent, exist_ok=True)
    _remove_stale_cgroups(parent)
    return parent


# Every run's CPU (docs/redteam/rev8, rev9): a cgroup of its own, of the same weight as every run's
# (v2 cpu.weight, or v1 cpu.shares: their defaults) and with a quota of `Limits.cpus` CPUs (v2 cpu.max,
# v1 cpu.cfs_quota_us). The weight alone does not hold a run's share: on a 2-CPU host (kernel 6.18,
# cgroup v1) a sibling of equal shares running 63 spinning tasks left a one-task run 0.01 CPU s in 5
# when it talked over a pipe, 0.70 when it spun (docs/redteam/rev9/sched_micro.out), and the grader's
# honest neighbours hit their wall backstop. The quota bounds what a run takes whatever its task count.
# The parent of the run cgroups weighs as one run per CPU of the host (capped at the kernel's maximum),
# so the runs together keep about what one session per run had under autogroup.
CPU_WEIGHT_V2 = 100
CPU_SHARES_V1 = 1024
CPU_PERIOD_US = 100_000  # the quota's period (the kernel's default)


def _cpu_settings(cpus: float, v2: bool) -> dict[str, str]:
    """A run's cpu cgroup files: its weight, and its quota of `cpus` CPUs per period."""
    quota = max(1000, round(cpus * CPU_PERIOD_US))  # the kernel's least quota is 1 ms
    if v2:
        return {"cpu.weight": str(CPU_WEIGHT_V2), "cpu.max": f"{quota} {CPU_PERIOD_US}"}
    return {"cpu.shares": str(CPU_SHARES_V1), "cpu.cfs_period_us": str(CPU_PERIOD_US), "cpu.cfs_quota_us": str(quota)}


def _parent_weight(one: int, most: int) -> bytes:
    return str(min(most, one * (os.cpu_count() or 1))).encode()


@functools.cache
def _cpu_v2() -> bool:
    """Whether the run cgroups (`_cgroup_parent`) have the cpu controller: where our cgroup offers it
    (cgroup.controllers), it is enabled for them here (+cpu in the parent's cgroup.subtree_control;
    the parent holds no process, only run cgroups) and each run's gets `_cpu_settings`.
    Checked once per process (a run cgroup made, set, removed)."""
    parent = _cgroup_parent()
    if parent is None:
        return False
    try:
        with open(os.path.join(parent, "cgroup.controllers")) as f:
            if "cpu" not in f.read().split():
                return False
        with open(os.path.join(parent, "cgroup.subtree_control"), "w") as f:
            f.write("+cpu")
        with open(os.path.join(parent, "cpu.weight"), "wb") as f:
            f.write(_parent_weight(CPU_WEIGHT_V2, 10000))
        probe = _new_cgroup(parent)
        try:
            _write_settings(probe[1], _cpu_settings(1.0, v2=True))
        finally:
            _remove_cgroup(*probe)
        return True
    except (OSError, RuntimeError):
        return False


@functools.cache
def _cpu_cgroup_parent() -> str | None:
    """Where the run cgroups have no cpu controller (`_cpu_v2` False; hosts whose v2 hierarchy has no
    controllers): the directory of a cgroup v1 cpu controller under which each run gets a cpu cgroup
    of its own (`_cpu_settings`), entered before bwrap starts as the memory cgroup is; checked once
    per process (made, set, entered, emptied, removed). None where there is none of ours: runs then
    have no CPU share or quota of their own, and what holds is that every process of a run stays in
    the one session bwrap made (the seccomp filter refuses setsid), so the kernel's autogroup, where
    enabled, gives each run one share, and the grader grades again alone a run its wall backstop
    stopped below its CPU limit (the rlimit-only path has neither: its programs may setsid)."""
    if _cpu_v2():
        return None
    try:
        parent = _v1_parent("cpu")
        if parent is None:
            return None
        with open(os.path.join(parent, "cpu.shares"), "wb") as f:
            f.write(_parent_weight(CPU_SHARES_V1, 262144))
        return parent if _v1_probe(parent, _cpu_settings(1.0, v2=False), "the cpu cgroup") else None
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError):
        return None


# Where the run slots of the host live: one directory per user (it is ours alone, 0700), the same
# path for every process of ours on the host whatever its TMPDIR, under a /tmp that no bwrap
# sandbox sees (each has a private one).
RUN_SLOTS_DIR = "/tmp/vgrout-run-slots-{uid}"
SLOT_POLL_S = 0.02  # how often a run waiting for a slot tries them again


@functools.cache
def _run_slots() -> int:
    """How many run slots the host has: one per CPU the runs may use, the CPUs this process may run
    on or, where a quota on the cgroup above the runs' (ours, or an ancestor's: a container's) allows
    fewer, that many (docs/redteam/rev11 container.sh: under a 1-CPU quota 2 slots ran 2 runs). At
    least one."""
    parent = _cpu_cgroup_parent() or (_cgroup_parent() if _cpu_v2() else None)
    quota = _quota_cpus(os.path.dirname(parent), v2=_cpu_v2()) if parent else None
    cpus = len(os.sched_getaffinity(0))
    return max(1, cpus if quota is None else min(cpus, math.floor(quota + 1e-9)))


def _quota_cpus(cgroup: str, v2: bool) -> float | None:
    """The fewest CPUs a quota on `cgroup` or a cgroup above it allows; None where none has one."""
    fewest = None
    while True:
        try:
            if v2:
                quota, period = Path(cgroup, "cpu.max").read_text().split()
            else:
                quota = Path(cgroup, "cpu.cfs_quota_us").read_text().strip()
                period = Path(cgroup, "cpu.cfs_period_us").read_text().strip()
        except FileNotFoundError:  # above the hierarchy's root (v2's root has no cpu.max)
            return fewest
        if quota not in ("max", "-1"):
            fewest = min(fewest or math.inf, int(quota) / int(period))
        if os.path.dirname(cgroup) == cgroup:
            return fewest
        cgroup = os.path.dirname(cgroup)


def _slots_dir() -> str:
    path = RUN_SLOTS_DIR.format(uid=os.getuid())
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise RuntimeError(f"{path}: the run slots' directory is not a directory of ours that only we can "
                           f"open (mode {stat.filemode(st.st_mode)}, uid {st.st_uid}); remove it")
    return path


# The slot and queue descriptors this process holds: a forked child (a fork without exec, in a
# process whose other threads run sandboxes) closes its copies, so that no lock outlives the run
# that took it (an flock belongs to the open file, which a fork shares: docs/redteam/rev11 forkleak.py)
_held: set[int] = set()
_held_lock = threading.Lock()


def _drop_held_in_child() -> None:
    global _held_lock
    _held_lock = threading.Lock()  # another thread may have held it at the fork
    for fd in _held:
        os.close(fd)
    _held.clear()


os.register_at_fork(after_in_child=_drop_held_in_child)


def _hold(fd: int) -> int:
    with _held_lock:
        _held.add(fd)
    return fd


def _give_back(fds: list[int]) -> None:
    with _held_lock:
        for fd in fds:
            _held.discard(fd)
            os.close(fd)


def _take_run_slots(cpus: float) -> list[int]:
    """Wait until ceil(cpus) of the host's run slots (`_run_slots`, all of them at most) are ours,
    and return their descriptors: each slot is held (an flock on its file) until its descriptor
    closes (`_give_back`). Every grading process of the host shares the slots, so however many
    graders run, the quotas (`Limits.cpus`) of the runs alive together ask no more than the host's
    CPUs, whatever quota each caller chose: a neighbour's many tasks, in this process or another,
    cannot take a run's CPU (docs/redteam/rev10/cross.py: a second grading process's 63-task runs
    starved a canonical solution to `timeout`, its regrade too). The wait is before the run's wall
    backstop starts. Waiting runs take turns (the queue file's flock, which the kernel hands on in
    the order asked, as a rule): one whose slot was just freed cannot take it again ahead of a run
    that was waiting, from this process or another."""
    d, n = _slots_dir(), _run_slots()
    # a run of any quota holds one slot at least (rev12 tinycpus.py: 1e-9 CPUs wanted 0, and took every one)
    want = max(1, min(n, math.ceil(cpus - 1e-9)))
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    queue, taken = _hold(os.open(os.path.join(d, "queue"), flags, 0o600)), []
    try:
        fcntl.flock(queue, fcntl.LOCK_EX)
        while True:
            for k in range(n):
                fd = _hold(os.open(os.path.join(d, str(k)), flags, 0o600))
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    taken.append(fd)
                except BlockingIOError:
                    _give_back([fd])
                if len(taken) == want:
                    return taken
            time.sleep(SLOT_POLL_S)
    except BaseException:
        _give_back(taken)
        raise
    finally:
        _give_back([queue])


def _v1_probe(parent: str, settings: dict[str, str], what: str, check=lambda fd: True) -> bool:
    """Whether a run's v1 cgroup with `settings` can be made under `parent` and entered (by a
    process that joins it and exits), and `check` holds of it; the probe is removed."""
    probe = _new_v1_cgroup(parent, settings)
    try:
        ok = subprocess.run([*_cgroup_join_argv(os.path.join(probe[0], "cgroup.procs")), "true"],
                            check=False, capture_output=True, timeout=30).returncode == 0
        return ok and check(probe[1])
    finally:
        _remove_v1_cgroup(*probe, what)


def _write_settings(cgroup_fd: int, settings: dict[str, str]) -> None:
    for name, value in settings.items():
        _write_at(name, value.encode(), cgroup_fd)


def _new_v1_cgroup(parent: str, settings: dict[str, str]) -> tuple[str, int]:
    """A run's cgroup (v1) under `parent`, its `settings` (file: value) written."""
    path, fd = _new_cgroup(parent)
    try:
        _write_settings(fd, settings)
    except BaseException:
        os.close(fd)
        os.rmdir(path)
        raise
    return path, fd


def _remove_v1_cgroup(path: str, cgroup_fd: int, what: str) -> None:
    """Remove a run's v1 cgroup once it is empty: the run's processes are gone (its pid namespace,
    or the cgroup v2's kill) or on their way out."""
    try:
        _rmdir_once_empty(path, what)
    finally:
        os.close(cgroup_fd)


def _rmdir_once_empty(path: str, what: str) -> None:
    """rmdir a cgroup, retried for 2 s while it is busy (rmdir fails while a process is still in
    it: a killed process leaves it a moment later); warns and leaves it in place after that."""
    for _ in range(200):
        try:
            os.rmdir(path)
            return
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            time.sleep(0.01)
    warnings.warn(f"sandbox: {what} {path} still holds processes; left in place")


def _kill_cgroup(cgroup_fd: int) -> None:
    """SIGKILL every process in the cgroup (its descendants included, wherever they went)."""
    _write_at("cgroup.kill", b"1", cgroup_fd)


def _remove_cgroup(path: str, cgroup_fd: int) -> None:
    """Kill what is left in the cgroup and remove it once it is empty."""
    try:
        _kill_cgroup(cgroup_fd)
        _rmdir_once_empty(path, "the cgroup (after a kill)")
    finally:
        os.close(cgroup_fd)


def _sandbox_procfs(init_pid: int, init_fd: int, ns: int) -> int | None:
    """A descriptor of the sandbox's own /proc (it lists the sandbox's pid namespace only), reached
    through its init's root once the sandbox is set up; checked to be the procfs of that namespace
    (its pid 1 is the init bwrap named). None when the init is gone (the program has ended); an
    error when the init is there and its /proc is not what bwrap mounted: no run goes unmetered."""
    fd, ours = None, False
    try:
        fd = os.open(f"/proc/{init_pid}/root/proc", os.O_RDONLY | os.O_DIRECTORY)
        ours = os.readlink("1/ns/pid", dir_fd=fd) == f"pid:[{ns}]"
    except OSError as e:
        error = e
    else:
        error = None
    if ours:
        return fd
    if fd is not None:
        os.close(fd)
    # An init on its way out has let go of its root (ENOENT) before its pidfd says it exited.
    if _ready(init_fd, 1.0 if isinstance(error, FileNotFoundError) else 0):
        return None
    raise RuntimeError(f"sandbox: cannot read the CPU seconds of the sandbox's processes: /proc/{init_pid}/root/proc "
                       f"is not its pid namespace's procfs ({error or 'another namespace'})")


def run(files: dict[str, str], main: str, stdin: str = "", limits: Limits = Limits(),
        talk=None) -> Result:
    """Run `python main` in a fresh directory holding `files`, with `stdin` on standard input.

    talk: called as talk(channel) while the program runs, with a `Channel` to the program (whose
    end is the descriptors in sys.argv[1:3]: write, read); when it returns the channel closes."""
    iso = isolation(limits.isolation)
    uid = (NOBODY if iso == "bwrap" else _fresh_uid()) if _is_root() else None
    fds, work, proc, ns_init, meter, cgroup, memory, failure = [], None, None, None, None, None, None, None
    cpu_group = None
    # a run with a CPU quota holds its run slots of the host while it lives (`_take_run_slots`)
    slots = _take_run_slots(limits.cpus) if iso == "bwrap" and (_cpu_v2() or _cpu_cgroup_parent()) else []
    try:
        files_fd = _memfd("files", json.dumps(files).encode())
        in_fd, out_fd, err_fd = _memfd("stdin", stdin.encode()), _memfd("stdout"), _memfd("stderr")
        fds += [files_fd, in_fd, out_fd, err_fd]
        up_r, up_w = os.pipe()      # program -> caller
        down_r, down_w = os.pipe()  # caller -> program
        ready_r, ready_w = os.pipe()  # the prelude's one byte: it started
        fds += [up_r, up_w, down_r, down_w, ready_r, ready_w]
        nproc = limits.nproc
        if iso == "rlimit" and uid is None:
            # Not root and no namespaces: RLIMIT_NPROC counts every process of our user,
            # so the quota sits on top of what the user already runs (and is shared).
            nproc += _user_process_count()
        cpu = max(1, math.ceil(limits.cpu_s))
        if iso == "bwrap" and _cgroup_parent() is not None:
            # a cgroup of the run's own, entered (as we are, before the uid switch) before bwrap starts
            try:
                cgroup = _new_cgroup(_cgroup_parent())
            except OSError as e:  # (a limit on descendants, a full disk): this run's failure, not the caller's
                return Result(-1, "", "", False, False, iso, 0.0, False, f"the run's cgroup could not be made: {e}")
            if _cpu_v2():  # every run's weight, and its quota of limits.cpus (docs/redteam/rev9)
                try:
                    _write_settings(cgroup[1], _cpu_settings(limits.cpus, v2=True))
                except OSError as e:
                    return Result(-1, "", "", False, False, iso, 0.0, False, f"the run's CPU quota could not be set: {e}")
        if iso == "bwrap" and _cpu_cgroup_parent() is not None:
            # a v1 cpu cgroup of the run's own: every run's weight, and its quota of limits.cpus, which
            # it cannot exceed however many processes, threads or sessions it makes (docs/redteam/rev9)
            try:
                cpu_group = _new_v1_cgroup(_cpu_cgroup_parent(), _cpu_settings(limits.cpus, v2=False))
            except OSError as e:
                return Result(-1, "", "", False, False, iso, 0.0, False, f"the run's cpu cgroup could not be made: {e}")
        if iso == "bwrap" and _memory_cgroup_parent() is not None:
            # every byte the run's processes hold, counted together: past it the kernel's OOM killer
            # picks among the run's processes only, never the caller (memfd pages are no one's RSS)
            try:
                memory = _new_v1_cgroup(_memory_cgroup_parent(), {"memory.limit_in_bytes": str(limits.ram)})
            except OSError as e:
                return Result(-1, "", "", False, False, iso, 0.0, False,
                              f"the run's memory cgroup could not be made: {e}")
        # With a cgroup the meter's exact total is the limit, and RLIMIT_CPU only a backstop a second
        # later (the kernel's per-process check can fire a little before the cgroup's count reaches it).
        rlimit_cpu = cpu + 1 if cgroup is not None else cpu
        python = [sandbox_python(), "-I", "-S", "-c", PRELUDE, str(rlimit_cpu), str(limits.memory_bytes),
                  str(nproc), str(limits.output_bytes), str(limits.nofile), str(files_fd), str(ready_w), main,
                  str(up_w), str(down_r)]
        passed = [files_fd, ready_w, up_w, down_r]
        if iso == "bwrap":
            info_r, info_w = os.pipe()  # bwrap names the namespace's init on it (--info-fd)
            fds += [info_r, info_w]
            passed.append(info_w)
            seccomp_fd = None
            if _seccomp_program() is not None:  # bwrap reads it (to its end) before it starts the program
                seccomp_fd = _memfd("seccomp", _seccomp_program())
                fds.append(seccomp_fd)
                passed.append(seccomp_fd)
            argv, cwd, home = _bwrap_argv(limits, info_fd=info_w, seccomp_fd=seccomp_fd) + python, "/", SANDBOX_CWD
        else:
            # named, announced, then made: a grader killed between the two leaves nothing unannounced
            name = Path(tempfile.gettempdir()) / f"vgrout-sandbox-{secrets.token_hex(8)}"
            _announce("+", uid, name)
            try:
                name.mkdir(mode=0o700)  # never an existing path: what is removed after is only ours
            except BaseException:
                _announce("-", uid, name)
                raise
            work = name
            if uid is not None:
                os.chown(work, uid, uid)
            argv, cwd, home = python, str(work), str(work)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": "/tmp" if iso == "bwrap" else home,
               "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        deadline = time.monotonic() + limits.wall
        argv, as_user = _as_user(argv, uid) if iso == "bwrap" else (argv, _user_kwargs(uid))
        if cgroup is not None:  # entered as we are, before the uid switch and before bwrap starts
            argv = _cgroup_join_argv(os.path.join(cgroup[0], "cgroup.procs")) + argv
        if memory is not None:
            argv = _cgroup_join_argv(os.path.join(memory[0], "cgroup.procs")) + argv
        if cpu_group is not None:
            argv = _cgroup_join_argv(os.path.join(cpu_group[0], "cgroup.procs")) + argv
        argv = _OOM_FIRST_ARGV + argv
        proc = subprocess.Popen(argv, stdin=in_fd, stdout=out_fd, stderr=err_fd, cwd=cwd, env=env,
                                pass_fds=passed, start_new_session=True, **as_user)
        for fd in passed:  # the program's ends: closed here, so EOF means it is gone
            os.close(fd)
            fds.remove(fd)
        if iso == "bwrap":
            ns_init = _namespace_init(info_r, deadline)
        # the prelude's byte comes once the sandbox is set up (its /proc mounted) and before any of
        # the program's code runs; EOF without it: the sandbox failed to start the program
        started = _read_before(ready_r, deadline) == b"1"
        if started and (iso == "rlimit" or ns_init is not None):
            try:
                meter = _start_meter(cpu, iso, proc, ns_init, cgroup)
            except (OSError, RuntimeError) as e:  # no run goes unmetered: this one ends here, the grading's error
                failure = f"the CPU meter could not start: {e}"
                _kill_pidfd(ns_init[1]) if ns_init is not None else killpg(proc.pid)
        timed_out = False
        if talk is not None and failure is None:
            try:
                talk(Channel(up_r, down_w, deadline, limits.output_bytes, out_fd))
            except Timeout:
                timed_out = True
            except EOFError:
                pass
        if meter is not None:
            _read_meter(meter)  # the caller's conversation is over; the program is still there
        os.close(down_w)
        fds.remove(down_w)
        if not timed_out:
            timed_out = not _wait_exit(proc.pid, max(deadline - time.monotonic(), 0))
        cpu_s, cpu_exceeded = 0.0, False
        if meter is not None:  # closed before the program is reaped: its kill names it by pid
            _monitor.remove(meter)
            meter.close()
            cpu_s, cpu_exceeded = meter.seen, meter.exceeded
            if meter.failure is not None:
                failure = failure or f"the CPU meter failed: {meter.failure!r}"
        killpg(proc.pid)
        proc.wait()
        if ns_init is not None:
            _end_namespace(ns_init[1])
            ns_init = None
        oom_killed = False
        if memory is not None:  # every process of the run is gone: its OOM kills are all counted
            try:
                oom_killed = _oom_kills(memory[1]) > 0
            except (OSError, RuntimeError) as e:
                failure = failure or f"the run's memory cgroup could not be read: {e!r}"
        if cgroup is not None and meter is not None and failure is None:
            # every process of the run is gone: the cgroup's count is exact, and what decides `timeout`
            try:
                cpu_s = max(cpu_s, _cgroup_cpu_s(cgroup[1]))
            except (OSError, RuntimeError) as e:
                failure = f"the CPU meter failed: {e!r}"
            cpu_limit = cpu_s >= cpu
        else:
            # From the procfs readings: the CPU limit's signals (the program's own status, or bwrap's
            # 128 + N for its child's) are the limit's only when the meter saw the run near it: a
            # program can send them to itself.
            cpu_limit = proc.returncode in CPU_LIMIT_STATUS and cpu_s >= cpu - CPU_SIGNAL_SLACK_S
        stdout, out_full = _read_capped(out_fd, limits.output_bytes)
        stderr, err_full = _read_capped(err_fd, limits.output_bytes)
        wall_stopped = timed_out and not (cpu_exceeded or cpu_limit)
        timed_out = timed_out or cpu_exceeded or cpu_limit
        return Result(proc.returncode, stdout, stderr, timed_out, out_full or err_full, iso, cpu_s, started, failure,
                      oom_killed, wall_stopped)
    finally:  # whatever happened above (the caller's talk raising included), nothing is left running
        try:
            _end_run(meter, proc, ns_init, cgroup, memory, cpu_group, uid, iso, fds, work)
        finally:  # the run's processes are all gone (or its clean-up raised): the next run may have its CPU
            _give_back(slots)  # (rev12 finallyleak.py: a clean-up that raised kept the slots for the process's life)


def _end_run(meter, proc, ns_init, cgroup, memory, cpu_group, uid, iso, fds, work) -> None:
    """A run's clean-up (`run`'s finally): its meter, every process left, its namespace, cgroups, descriptors
    and work directory."""
    if meter is not None and not meter.closed:
        _monitor.remove(meter)
        meter.close()
    if proc is not None and proc.returncode is None:
        killpg(proc.pid)
        proc.wait()
    if ns_init is not None:
        _end_namespace(ns_init[1])
    if cgroup is not None:
        _remove_cgroup(*cgroup)
    if memory is not None:
        _remove_v1_cgroup(*memory, "the memory cgroup")
    if cpu_group is not None:
        _remove_v1_cgroup(*cpu_group, "the cpu cgroup")
    if uid is not None and iso == "rlimit":
        _kill_uid(uid)  # stragglers that left the process group (setsid) die here
        _sweeper.sweep(uid)
    for fd in fds:
        os.close(fd)
    if work is not None:
        _rmtree(work)
        _announce("-", uid, work)


def _start_meter(cpu: int, iso: str, proc: subprocess.Popen, ns_init, cgroup) -> _Meter | None:
    """The run's CPU meter, on the monitor: from its cgroup, else (bwrap) its procfs, else (rlimit)
    its session's processes on the host. None when the sandbox's init is gone already (the
    program has ended, and with no cgroup nothing is left to read)."""
    if cgroup is not None:
        meter = _Meter(cpu, functools.partial(_kill_cgroup, cgroup[1]), cgroup_fd=cgroup[1])
    elif iso == "bwrap":
        pid, pidfd, ns = ns_init
        procfs = _sandbox_procfs(pid, pidfd, ns)
        if procfs is None:
            return None
        meter = _Meter(cpu, functools.partial(_kill_pidfd, pidfd), proc_fd=procfs)
    else:
        meter = _Meter(cpu, functools.partial(killpg, proc.pid), session=proc.pid)
    _monitor.add(meter)
    return meter


def _read_meter(meter: _Meter) -> None:
    """One reading by the run itself; a failure is the meter's, reported as the monitor's are."""
    try:
        meter.read()
    except Exception as e:  # noqa: BLE001 -- recorded: the run's error, not the batch's
        meter.failure = meter.failure or e


def _kill_pidfd(pidfd: int) -> None:
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _namespace_init(info_fd: int, deadline: float) -> tuple[int, int, int] | None:
    """(pid, pidfd, pid-namespace inode) of the sandbox's pid-namespace init, named by bwrap's
    --info-fd. bwrap returns when the program exits, while the namespace (every process the
    program left, setsid or not) dies with this init a moment later. None when there is nothing to
    wait for: bwrap wrote no info (it failed to start; the run reports its error), or the pid no
    longer names a process of the sandbox's namespace (the init exited and its pid was taken:
    never signal a stranger)."""
    data = b""
    while chunk := _read_before(info_fd, deadline):
        data += chunk
    if not data:
        return None
    try:
        info = json.loads(data)
        pid, ns = info["child-pid"], info["pid-namespace"]
    except (ValueError, KeyError) as e:
        raise RuntimeError(f"sandbox: bwrap's --info-fd output is not what bwrap 0.8 writes: {data[:200]!r}") from e
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:  # gone already, and the namespace with it
        return None
    try:  # the pidfd holds the process it was opened on; is it still the init?
        ours = os.stat(f"/proc/{pid}/ns/pid").st_ino == ns
    except OSError:
        ours = False
    if not ours:
        os.close(pidfd)
        return None
    return pid, pidfd, ns


def _ready(fd: int, timeout: float | None, event: int = select.POLLIN) -> bool:
    """Whether fd is readable (or writable: event POLLOUT) within timeout seconds (poll, not
    select: a grader's threads may hold descriptors numbered above select's 1024)."""
    p = select.poll()
    p.register(fd, event)
    return bool(p.poll(None if timeout is None else max(timeout, 0) * 1000))


def _read_before(fd: int, deadline: float) -> bytes:
    return os.read(fd, 4096) if _ready(fd, deadline - time.monotonic()) else b""


NAMESPACE_GRACE_S = 10.0  # how long the namespace's init may take to exit before it is killed


def _end_namespace(pidfd: int) -> None:
    """Return once the pid namespace is gone: its init exits after every process in it (Linux
    kills and reaps them first), so the init's exit is the namespace's end. An init that outlives
    the grace is killed; one that outlives the kill too (stuck in the kernel) is reported."""
    try:
        if _ready(pidfd, NAMESPACE_GRACE_S):
            return
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except ProcessLookupError:  # exited meanwhile
            return
        if not _ready(pidfd, NAMESPACE_GRACE_S):
            warnings.warn(f"sandbox: a pid namespace's init survived SIGKILL for {NAMESPACE_GRACE_S} s; "
                          f"its processes may still run")
    finally:
        os.close(pidfd)


def _wait_exit(pid: int, timeout: float) -> bool:
    """Block until `pid` exits (True) or `timeout` passes (False), without polling."""
    fd = os.pidfd_open(pid)
    try:
        return _ready(fd, timeout)
    finally:
        os.close(fd)


def killpg(pgid: int) -> None:
    """SIGKILL process group pgid, if it is still there."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _rmtree(path: Path) -> None:
    # The program may have chmod-ed its own directories shut; reopen them (never through a
    # symlink, which could point anywhere on the host) before removing the tree.
    for root, dirs, _ in os.walk(path):
        for d in dirs:
            p = os.path.join(root, d)
            if not os.path.islink(p):
                os.chmod(p, 0o700)
    shutil.rmtree(path, ignore_errors=True)
