"""Run untrusted Python in a throwaway sandbox that leaves nothing behind.

Every program gets: its own session (process group) killed whole at the end; RLIMIT_CPU (what
decides `timeout`: CPU seconds do not depend on what else the machine runs) with a wall-clock
backstop for programs that wait without computing; RLIMIT_AS / RLIMIT_NPROC / RLIMIT_FSIZE / no
core files; stdin, stdout and stderr on anonymous memory files (memfd: no path anywhere, capped by
RLIMIT_FSIZE, gone with the last descriptor); its files handed over on a descriptor and written
by a trusted prelude into its own working directory; a scrubbed environment.

Under bubblewrap (`bwrap`, the default) the program also gets no network, a private pid
namespace (--die-with-parent: nothing outlives the run, or the grader; a run returns once the
namespace is gone), only the system's read-only /usr (and the interpreter's own prefix) as its
root, and a private size-limited /tmp that holds its working directory: no project file, job
file or host temporary directory is reachable or created. Without bubblewrap, `isolation="rlimit"` must be asked for by name: the
rlimits alone and a host temporary directory. It is weaker: the graded code can read every file
the world may read (a problem file with its hidden tests included, so ground truth is not safe
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
"""
from __future__ import annotations

import dataclasses
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
SANDBOX_CWD = "/tmp/sandbox"  # inside the private /tmp
ISOLATIONS = ("bwrap", "rlimit")
ISOLATION_ENV = "VGROUT_ISOLATION"  # a pipeline run's isolation when no caller names one
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # the read-only root under bwrap
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock")  # where an rlimit-only program may write
CPU_LIMIT_STATUS = {-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU, 128 + signal.SIGKILL}

# Trusted code that runs first inside the sandbox: lock the limits (soft = hard, but for the CPU:
# SIGXCPU at the soft limit, SIGKILL a second later; each process has its own CPU seconds), write the program's
# files from their descriptor into the working directory, then run the main file as __main__.
PRELUDE = """\
import json, os, resource, sys
cpu, mem, nproc, fsize, files_fd = (int(x) for x in sys.argv[1:6])
with os.fdopen(files_fd, "rb") as f:
    files = json.loads(f.read())
for name, text in files.items():
    with open(name, "w") as f:
        f.write(text)
for lim, v in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_NPROC, nproc), (resource.RLIMIT_FSIZE, fsize),
               (resource.RLIMIT_CORE, 0)):
    resource.setrlimit(lim, (v, v))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
sys.argv = sys.argv[6:]
with open(sys.argv[0]) as f:
    source = f.read()
del f, files, name, text, lim, v, cpu, mem, nproc, fsize, files_fd
exec(compile(source, sys.argv[0], "exec"), {"__name__": "__main__", "__file__": sys.argv[0], "__builtins__": __builtins__})
"""


@dataclass(frozen=True)
class Limits:
    cpu_s: float = 4.0  # RLIMIT_CPU: CPU seconds of the whole program (load-independent); decides `timeout`
    wall_s: float | None = None  # wall-clock backstop for programs that wait; None: 3·cpu_s + 5
    memory_bytes: int = 1 << 30
    nproc: int = 64
    output_bytes: int = 4 << 20  # cap on stdout, stderr and every file the program writes
    tmp_bytes: int = 64 << 20  # size of the private /tmp under bwrap (files of all sizes together)
    # bwrap, or rlimit (the weaker rlimit-only path, asked for by name: here, or for a whole
    # pipeline run on a machine without bubblewrap, by VGROUT_ISOLATION=rlimit)
    isolation: str = dataclasses.field(default_factory=lambda: os.environ.get(ISOLATION_ENV, "bwrap"))

    def __post_init__(self):
        if self.isolation not in ISOLATIONS:
            raise ValueError(f"unknown isolation {self.isolation!r} (the argument, or ${ISOLATION_ENV}); "
                             f"valid: {', '.join(ISOLATIONS)}")
        if self.cpu_s <= 0:
            raise ValueError(f"cpu_s must be positive, got {self.cpu_s}")

    @property
    def wall(self) -> float:
        return self.wall_s if self.wall_s is not None else 3 * self.cpu_s + 5

    def with_cpu(self, cpu_s: float | None) -> "Limits":
        """These limits with a problem's own CPU limit (None: keep ours)."""
        return self if cpu_s is None else dataclasses.replace(self, cpu_s=max(self.cpu_s, cpu_s))


@dataclass(frozen=True)
class Result:
    returncode: int  # exit status, or -N when killed by signal N
    stdout: str
    stderr: str
    timed_out: bool  # RLIMIT_CPU reached, or the wall backstop
    output_exceeded: bool  # stdout or stderr reached the cap
    isolation: str  # "bwrap" or "rlimit"


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
                data = data[os.write(self.w, data):]
            except BrokenPipeError:
                raise EOFError() from None

    def recv(self):
        while b"\n" not in self.buf:
            if len(self.buf) > self.cap:
                return None
            self._wait(self.r, False)
            chunk = os.read(self.r, 1 << 16)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
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
    with open(os.devnull, "wb") as info:  # every option a run passes, --info-fd included
        argv, as_user = _as_user(_bwrap_argv(Limits(), info_fd=info.fileno()) + [sandbox_python(), "-I", "-S", "-c", "pass"],
                                 uid)
        r = subprocess.run(argv, capture_output=True, text=True, pass_fds=(info.fileno(),), **as_user)
    if r.returncode != 0:
        return f"bwrap failed: {r.stderr.strip()[:200]}"
    return None


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
                           f"'bubblewrap' package (apt-get install bubblewrap), or ask for the weaker "
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


def _bwrap_argv(limits: Limits, info_fd: int | None = None) -> list[str]:
    argv = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session"]
    argv += ["--info-fd", str(info_fd)] if info_fd is not None else []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            argv += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            argv += ["--ro-bind", d, d]
    prefix = Path(sandbox_python()).parents[1]  # .../bin/python3 -> its installation
    if not any(str(prefix).startswith(d + "/") or str(prefix) == d for d in SYSTEM_DIRS):
        argv += ["--ro-bind", str(prefix), str(prefix)]
    return argv + ["--dev", "/dev", "--proc", "/proc", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
                   "--dir", SANDBOX_CWD, "--chdir", SANDBOX_CWD]


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


def run(files: dict[str, str], main: str, stdin: str = "", limits: Limits = Limits(),
        talk=None) -> Result:
    """Run `python main` in a fresh directory holding `files`, with `stdin` on standard input.

    talk: called as talk(channel) while the program runs, with a `Channel` to the program (whose
    end is the descriptors in sys.argv[1:3]: write, read); when it returns the channel closes."""
    iso = isolation(limits.isolation)
    uid = (NOBODY if iso == "bwrap" else _fresh_uid()) if _is_root() else None
    fds, work, proc, ns_init = [], None, None, None
    try:
        files_fd = _memfd("files", json.dumps(files).encode())
        in_fd, out_fd, err_fd = _memfd("stdin", stdin.encode()), _memfd("stdout"), _memfd("stderr")
        fds += [files_fd, in_fd, out_fd, err_fd]
        up_r, up_w = os.pipe()      # program -> caller
        down_r, down_w = os.pipe()  # caller -> program
        fds += [up_r, up_w, down_r, down_w]
        nproc = limits.nproc
        if iso == "rlimit" and uid is None:
            # Not root and no namespaces: RLIMIT_NPROC counts every process of our user,
            # so the quota sits on top of what the user already runs (and is shared).
            nproc += _user_process_count()
        cpu = max(1, math.ceil(limits.cpu_s))
        python = [sandbox_python(), "-I", "-S", "-c", PRELUDE, str(cpu), str(limits.memory_bytes),
                  str(nproc), str(limits.output_bytes), str(files_fd), main, str(up_w), str(down_r)]
        passed = [files_fd, up_w, down_r]
        if iso == "bwrap":
            info_r, info_w = os.pipe()  # bwrap names the namespace's init on it (--info-fd)
            fds += [info_r, info_w]
            passed.append(info_w)
            argv, cwd, home = _bwrap_argv(limits, info_fd=info_w) + python, "/", SANDBOX_CWD
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
        proc = subprocess.Popen(argv, stdin=in_fd, stdout=out_fd, stderr=err_fd, cwd=cwd, env=env,
                                pass_fds=passed, start_new_session=True, **as_user)
        for fd in passed:  # the program's ends: closed here, so EOF means it is gone
            os.close(fd)
            fds.remove(fd)
        if iso == "bwrap":
            ns_init = _namespace_init(info_r, deadline)
        timed_out = False
        if talk is not None:
            try:
                talk(Channel(up_r, down_w, deadline, limits.output_bytes, out_fd))
            except Timeout:
                timed_out = True
            except EOFError:
                pass
        os.close(down_w)
        fds.remove(down_w)
        if not timed_out:
            timed_out = not _wait_exit(proc.pid, max(deadline - time.monotonic(), 0))
        killpg(proc.pid)
        proc.wait()
        stdout, out_full = _read_capped(out_fd, limits.output_bytes)
        stderr, err_full = _read_capped(err_fd, limits.output_bytes)
        # the CPU limit's signals, as the program's own status or as bwrap reports its child's (128 + N)
        timed_out = timed_out or proc.returncode in CPU_LIMIT_STATUS
        return Result(proc.returncode, stdout, stderr, timed_out, out_full or err_full, iso)
    finally:  # whatever happened above (the caller's talk raising included), nothing is left running
        if proc is not None and proc.returncode is None:
            killpg(proc.pid)
            proc.wait()
        if ns_init is not None:
            _end_namespace(ns_init)
        if uid is not None and iso == "rlimit":
            _kill_uid(uid)  # stragglers that left the process group (setsid) die here
            _sweeper.sweep(uid)
        for fd in fds:
            os.close(fd)
        if work is not None:
            _rmtree(work)
            _announce("-", uid, work)


def _namespace_init(info_fd: int, deadline: float) -> int | None:
    """A pidfd of the sandbox's pid-namespace init, named by bwrap's --info-fd. bwrap returns when
    the program exits, while the namespace (every process the program left, setsid or not) dies
    with this init a moment later. None when there is nothing to wait for: bwrap wrote no info
    (it failed to start; the run reports its error), or the pid no longer names a process of the
    sandbox's namespace (the init exited and its pid was taken: never signal a stranger)."""
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
    return pidfd


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
