"""Run untrusted Python in a throwaway sandbox.

Every program gets: its own session (process group) killed whole on a wall timeout;
RLIMIT_CPU / RLIMIT_AS / RLIMIT_NPROC / RLIMIT_FSIZE / no core files; stdout and stderr
written to files capped by RLIMIT_FSIZE (a flood ends at the cap, it never reaches our
memory); a scrubbed environment; a fresh working directory removed afterwards.

Under bubblewrap (`bwrap`) the program also gets no network, a read-only root, a private
/tmp and a private pid namespace (--die-with-parent: nothing outlives the run). Without
it (or with isolation="rlimit") it runs with the rlimits alone, after a one-time warning.

Why the uid switch: Linux exempts real uid 0 from RLIMIT_NPROC, so a fork bomb run as root
is contained by nothing. When we are root the program runs as an unprivileged uid: under
bwrap as `nobody` inside a fresh user namespace, where the process count is per namespace
(so concurrent sandboxes do not share a quota); on the rlimit-only path as a random unused
uid of its own, whose processes are all killed afterwards. The limits are set by a trusted
prelude inside the sandbox, after the namespace exists, so the kernel counts processes
per sandbox rather than per host user. rlimit-only without root has no uid to switch to:
the process quota is then shared with our user, and host files, the parent process and
processes that leave the session are not protected; use bubblewrap there.
"""
from __future__ import annotations

import functools
import math
import os
import pwd
import random
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

NOBODY = 65534
KILL = shutil.which("kill", path="/usr/bin:/bin") or "kill"
SANDBOX_CWD = "/tmp/sandbox"  # inside the private /tmp: the read-only root has no room for a mount point
ISOLATIONS = ("auto", "bwrap", "rlimit")

# Trusted code that runs first inside the sandbox: lock the limits (soft = hard, so the
# program cannot raise them back), then run the program file as __main__.
PRELUDE = """\
import resource, sys
cpu, mem, nproc, fsize = (int(x) for x in sys.argv[1:5])
for lim, v in ((resource.RLIMIT_CPU, cpu), (resource.RLIMIT_AS, mem), (resource.RLIMIT_NPROC, nproc),
               (resource.RLIMIT_FSIZE, fsize), (resource.RLIMIT_CORE, 0)):
    resource.setrlimit(lim, (v, v))
sys.argv = sys.argv[5:]
with open(sys.argv[0]) as f:
    source = f.read()
exec(compile(source, sys.argv[0], "exec"), {"__name__": "__main__", "__file__": sys.argv[0], "__builtins__": __builtins__})
"""


@dataclass(frozen=True)
class Limits:
    wall_s: float = 10.0
    memory_bytes: int = 1 << 30
    nproc: int = 64
    output_bytes: int = 4 << 20  # cap on stdout, stderr and every file the program writes
    isolation: str = "auto"  # auto: bwrap when usable, else rlimit-only with a warning

    def __post_init__(self):
        if self.isolation not in ISOLATIONS:
            raise ValueError(f"unknown isolation {self.isolation!r}; valid: {', '.join(ISOLATIONS)}")


@dataclass(frozen=True)
class Result:
    returncode: int  # exit status, or -N when killed by signal N
    stdout: str
    stderr: str
    timed_out: bool  # wall timeout or RLIMIT_CPU
    output_exceeded: bool  # stdout or stderr reached the cap
    isolation: str  # "bwrap" or "rlimit"


def _is_root() -> bool:
    return os.geteuid() == 0


@functools.cache
def _bwrap_problem() -> str | None:
    """None when bwrap runs here as we will run it; else why not (checked once per process)."""
    if shutil.which("bwrap") is None:
        return "bwrap not found on PATH"
    with tempfile.TemporaryDirectory() as d:
        work = Path(d) / "work"
        work.mkdir()
        uid = NOBODY if _is_root() else None
        _prepare_dirs(Path(d), work, uid)
        argv = _bwrap_argv(work) + ["/bin/true"]
        r = subprocess.run(argv, capture_output=True, text=True, **_user_kwargs(uid))
    if r.returncode != 0:
        return f"bwrap failed: {r.stderr.strip()[:200]}"
    return None


def isolation(requested: str = "auto") -> str:
    """Resolve `requested` to the isolation actually used: "bwrap" or "rlimit"."""
    if requested == "rlimit":
        return "rlimit"
    problem = _bwrap_problem()
    if problem is None:
        return "bwrap"
    if requested == "bwrap":
        raise RuntimeError(f"isolation='bwrap' requested but {problem}")
    _warn_once(problem)
    return "rlimit"


@functools.cache
def _warn_once(problem: str) -> None:
    warnings.warn(f"{problem}; untrusted code runs with rlimits only (no network, filesystem "
                  "or pid isolation). Install bubblewrap for the isolated path.", stacklevel=3)


@functools.cache
def sandbox_python() -> str:
    """An interpreter the sandbox uid may execute: ours when any user can run it, else the
    system python3 (the graded code needs the standard library only)."""
    if not _is_root():
        return sys.executable
    for candidate in (sys.executable, shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")):
        if candidate and _world_executable(candidate):
            return candidate
    raise RuntimeError(f"no python3 that an unprivileged user can execute ({sys.executable} is not)")


def _world_executable(path: str) -> bool:
    real = Path(os.path.realpath(path))
    return all(os.stat(p).st_mode & stat.S_IXOTH for p in [real, *real.parents])


def _bwrap_argv(work: Path) -> list[str]:
    return ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--bind", str(work), SANDBOX_CWD, "--chdir", SANDBOX_CWD]


def _user_kwargs(uid: int | None) -> dict:
    if uid is None:
        return {}
    return {"user": uid, "group": uid, "extra_groups": []}


def _prepare_dirs(tmp: Path, work: Path, uid: int | None) -> None:
    if uid is not None:
        os.chmod(tmp, 0o711)  # the sandbox uid may pass through to work/, not list it
        os.chown(work, uid, uid)


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


def _user_process_count() -> int:
    uid = os.getuid()
    return sum(1 for p in Path("/proc").iterdir() if p.name.isdigit() and _owner(p) == uid)


def _owner(p: Path) -> int | None:
    try:
        return p.stat().st_uid
    except OSError:
        return None


def _read_capped(path: Path, cap: int) -> tuple[str, bool]:
    with open(path, "rb") as f:
        data = f.read(cap)
    return data.decode("utf-8", errors="replace"), len(data) >= cap


def run(files: dict[str, str], main: str, stdin: str = "", limits: Limits = Limits()) -> Result:
    """Run `python main` in a fresh directory holding `files`, with `stdin` on standard input."""
    iso = isolation(limits.isolation)
    tmp = Path(tempfile.mkdtemp(prefix="vgrout-sandbox-"))
    uid = None
    try:
        work = tmp / "work"
        work.mkdir()
        for name, text in files.items():
            (work / name).write_text(text)
        if _is_root():
            uid = NOBODY if iso == "bwrap" else _fresh_uid()
        _prepare_dirs(tmp, work, uid)

        nproc = limits.nproc
        if iso == "rlimit" and uid is None:
            # Not root and no namespaces: RLIMIT_NPROC counts every process of our user,
            # so the quota sits on top of what the user already runs (and is shared).
            nproc += _user_process_count()
        cpu = math.ceil(limits.wall_s) + 1
        python = [sandbox_python(), "-I", "-S", "-c", PRELUDE, str(cpu), str(limits.memory_bytes),
                  str(nproc), str(limits.output_bytes), main]
        home = SANDBOX_CWD if iso == "bwrap" else str(work)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": "/tmp" if iso == "bwrap" else home,
               "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        argv = _bwrap_argv(work) + python if iso == "bwrap" else python
        in_path, out_path, err_path = tmp / "stdin", tmp / "stdout", tmp / "stderr"
        # stdin is a file, not a pipe, so writing it can never block on a stuck program; all
        # three live outside work/ and are 0600, so the program reaches them only through its fds.
        for p, data in ((in_path, stdin.encode()), (out_path, b""), (err_path, b"")):
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            p.write_bytes(data)
        with open(in_path, "rb") as inp, open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(argv, stdin=inp, stdout=out, stderr=err, cwd=work, env=env,
                                    start_new_session=True, **_user_kwargs(uid))
            timed_out = not _wait_exit(proc.pid, limits.wall_s)
            _killpg(proc.pid)
            proc.wait()
        if uid is not None and iso == "rlimit":
            _kill_uid(uid)  # stragglers that left the process group (setsid) die here
        stdout, out_full = _read_capped(out_path, limits.output_bytes)
        stderr, err_full = _read_capped(err_path, limits.output_bytes)
        timed_out = timed_out or proc.returncode == -signal.SIGXCPU
        return Result(proc.returncode, stdout, stderr, timed_out, out_full or err_full, iso)
    finally:
        _rmtree(tmp)


def _wait_exit(pid: int, timeout: float) -> bool:
    """Block until `pid` exits (True) or `timeout` passes (False), without polling."""
    fd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready)
    finally:
        os.close(fd)


def _killpg(pgid: int) -> None:
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
    shutil.rmtree(path)
