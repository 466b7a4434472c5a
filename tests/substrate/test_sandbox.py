"""The sandbox under hostile completions, on both paths (bubblewrap and rlimit-only).

Each hostile completion is graded in a batch between two correct ones; every test asserts no
correctness reward, the named error kind, the host's files intact, no parent secret visible,
and the neighbours graded correctly.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from vgrout.substrate import grader, sandbox
from vgrout.substrate.problems import Problem

SECRET = "vgrout-test-secret-" + uuid.uuid4().hex
BWRAP_OK = sandbox._bwrap_problem() is None
PATHS = [pytest.param("bwrap", marks=pytest.mark.skipif(not BWRAP_OK, reason="bubblewrap not usable here")),
         "rlimit"]
FAST = dict(wall_s=3.0)


def skip_if_unprotected(isolation):
    if isolation == "rlimit" and os.geteuid() != 0:
        pytest.skip("rlimit-only without root runs as our own uid: host files, the parent and "
                    "escaped processes are not protected (use bubblewrap)")

ADD = Problem(id="add", messages=[{"role": "user", "content": "add two numbers and should pass all tests"}],
              entry_point="add", tests=["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(5, 5) == 10"],
              canonical_solution="def add(a, b):\n    return a + b\n", mode="none")
GOOD = "```python\ndef add(a, b):\n    return a + b\n```"


def code(body: str) -> str:
    return f"```python\n{body}\n```"


@pytest.fixture
def host(tmp_path, monkeypatch):
    """Host files the sandbox must not touch (one as $HOME), and a secret in our environment."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "keep.txt").write_text("home sentinel")
    (tmp_path / "keep.txt").write_text("host sentinel")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("VGROUT_TEST_SECRET", SECRET)
    return tmp_path


def assert_host_intact(host):
    assert (host / "keep.txt").read_text() == "host sentinel"
    assert (host / "home" / "keep.txt").read_text() == "home sentinel"


def grade_between_good(completion: str, isolation: str, **limits):
    limits = sandbox.Limits(isolation=isolation, **{**FAST, **limits})
    grades = grader.grade_batch([ADD] * 3, [GOOD, completion, GOOD], progress=False, limits=limits)
    for g in (grades[0], grades[2]):
        assert g.gt_pass and g.reward == 3.5 and g.error is None, g
    return grades[1]


def assert_no_correctness_reward(g):
    assert not g.gt_pass and not g.flawed_pass and g.reward <= 0.5, g


HOSTILE = {
    # name: (response code, error kinds it may be named with)
    "fork_bomb": ("import os\n\ndef add(a, b):\n    while True:\n        try:\n            os.fork()\n"
                  "        except OSError:\n            pass", {"timeout"}),
    # RLIMIT_AS refuses it inside the sandbox (a MemoryError, the program's word): `memory` is only an
    # OOM kill the run's memory cgroup counted (grader._error_kind)
    "alloc_10GiB": ("def add(a, b):\n    x = bytearray(10 * 2**30)\n    return a + b", {"runtime"}),
    "infinite_loop": ("def add(a, b):\n    while True:\n        pass", {"timeout"}),
    "stdout_1GiB": ("import sys\n\ndef add(a, b):\n    chunk = 'x' * 2**20\n    for _ in range(1024):\n"
                    "        sys.stdout.write(chunk)\n    return a + b", {"output_limit"}),
}


@pytest.mark.parametrize("isolation", PATHS)
@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_completion_is_contained(case, isolation, host):
    body, kinds = HOSTILE[case]
    g = grade_between_good(code(body), isolation)
    assert_no_correctness_reward(g)
    assert g.error in kinds, g
    assert_host_intact(host)


@pytest.mark.parametrize("isolation", PATHS)
def test_deleting_cwd_and_home_stays_inside_the_sandbox(isolation, host):
    skip_if_unprotected(isolation)
    body = ("import os, shutil\n\ndef add(a, b):\n    for name in os.listdir('.'):\n        os.remove(name)\n"
            "    shutil.rmtree(os.path.expanduser('~'))\n    return a + b")
    g = grade_between_good(code(body), isolation)
    assert_no_correctness_reward(g)
    assert g.error == "runtime", g  # the sandbox's own root cannot be removed
    assert_host_intact(host)


@pytest.mark.parametrize("isolation", PATHS)
def test_deleting_host_files_by_path_fails(isolation, host):
    skip_if_unprotected(isolation)
    body = (f"import shutil\n\ndef add(a, b):\n    shutil.rmtree({str(host)!r})\n    return a + b")
    g = grade_between_good(code(body), isolation)
    assert_no_correctness_reward(g)
    assert g.error == "runtime", g
    assert_host_intact(host)


@pytest.mark.parametrize("isolation", PATHS)
def test_parent_environment_is_not_visible(isolation, host):
    # The answer is right only if the secret leaked in, so a leak would earn the reward.
    body = ("import os\n\ndef add(a, b):\n    print(dict(os.environ))\n"
            "    return a + b if 'VGROUT_TEST_SECRET' in os.environ else -1")
    g = grade_between_good(code(body), isolation)
    assert_no_correctness_reward(g)
    assert g.error is None and g.tests_passed == 0, g
    res = sandbox.run({"m.py": "import os; print(dict(os.environ))"}, "m.py",
                      limits=sandbox.Limits(isolation=isolation))
    assert res.returncode == 0 and "HOME" in res.stdout and SECRET not in res.stdout


@pytest.mark.parametrize("isolation", PATHS)
def test_killing_the_parent_fails(isolation, host):
    skip_if_unprotected(isolation)
    body = ("import os, signal\n\ndef add(a, b):\n    os.kill(os.getppid(), signal.SIGKILL)\n"
            "    return a - b")
    g = grade_between_good(code(body), isolation)
    assert_no_correctness_reward(g)
    assert g.error in {None, "runtime"}, g
    assert_host_intact(host)


@pytest.mark.skipif(not BWRAP_OK, reason="network isolation needs bubblewrap")
def test_network_socket_is_refused(host):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted = []

    def accept():
        try:
            accepted.append(listener.accept())
        except OSError:
            pass
    thread = threading.Thread(target=accept)
    thread.start()
    body = (f"import socket\n\ndef add(a, b):\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "    return a + b")
    try:
        g = grade_between_good(code(body), "bwrap")
    finally:
        thread.join()
        listener.close()
    assert_no_correctness_reward(g)
    assert g.error == "runtime", g
    assert accepted == []


def processes_with(tag: str) -> list[str]:
    """Pids of the host's processes whose command line holds `tag`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                found += [pid] if tag.encode() in f.read() else []
        except OSError:
            pass
    return found


@pytest.mark.parametrize("isolation", PATHS)
def test_escaped_processes_do_not_outlive_the_run(isolation):
    """A program's child that leaves its session (setsid) and outlives the program is gone when
    `run` returns, not a moment later: under bwrap the namespace's init exits after the run's
    bwrap does (about one run in ten left its sleep behind for a moment before `run` waited for
    it), so the property is checked over many runs."""
    skip_if_unprotected(isolation)
    for _ in range(30):
        tag = f"{uuid.uuid4().int % 10**6}.{os.getpid()}"
        program = ("import os\nif os.fork() == 0:\n    os.setsid()\n"
                   f"    os.execv('/bin/sleep', ['sleep', '{tag}'])\n")
        res = sandbox.run({"m.py": program}, "m.py", limits=sandbox.Limits(isolation=isolation, wall_s=2))
        assert res.returncode == 0
        assert processes_with(tag) == []


@pytest.mark.parametrize("isolation", PATHS)
def test_fork_bomb_hits_the_process_limit(isolation):
    program = ("import os, time\nn = 0\ntry:\n    while n < 1000:\n        if os.fork() == 0:\n"
               "            time.sleep(5)\n            os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint(n)")
    res = sandbox.run({"m.py": program}, "m.py", limits=sandbox.Limits(isolation=isolation, wall_s=3, nproc=16))
    assert int(res.stdout.strip()) < 16


@pytest.fixture
def private_tempdir(monkeypatch):
    """A temp root of our own (traversable by the sandbox uid), so other runs' dirs don't count."""
    root = tempfile.mkdtemp()
    os.chmod(root, 0o711)
    monkeypatch.setattr(tempfile, "tempdir", root)
    yield root
    shutil.rmtree(root)


@pytest.mark.parametrize("isolation", PATHS)
def test_work_dir_is_fresh_and_removed(isolation, private_tempdir):
    program = "import os, sys\nprint(sys.stdin.read(), sorted(os.listdir('.')))\nopen('out.txt', 'w').write('x')"
    for _ in range(2):
        res = sandbox.run({"m.py": program}, "m.py", stdin="hello", limits=sandbox.Limits(isolation=isolation))
        assert res.returncode == 0 and res.isolation == isolation
        assert res.stdout.strip() == "hello ['m.py']"  # the previous run's out.txt is gone
    assert os.listdir(private_tempdir) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the rlimit-only path switches uid (and cleans up by uid) only as root")
def test_concurrent_rlimit_runs_leave_no_file_in_the_shared_tmp_and_share_walks(monkeypatch):
    """Programs on the rlimit-only path write into /tmp, /dev/shm and a world-writable directory
    deep inside /tmp, and shut a directory of theirs (mode 0). When each run returns its files are
    gone, whatever the neighbours do; and runs that finish together share a walk of the shared
    directories (the walk is what made grading on a crowded /tmp slow)."""
    tag = uuid.uuid4().hex
    shared = tempfile.mkdtemp(prefix=f"vgrout-ww-{tag}-", dir="/tmp")
    os.makedirs(f"{shared}/a/b")
    os.chmod(shared, 0o755)
    os.chmod(f"{shared}/a/b", 0o1777)  # world-writable, under root-owned directories
    program = (f"import os\np = os.getpid()\nos.makedirs(f'/tmp/vgrout-sweep-{tag}-{{p}}/shut/x')\n"
               f"os.chmod(f'/tmp/vgrout-sweep-{tag}-{{p}}/shut', 0)\n"
               f"open(f'/dev/shm/vgrout-sweep-{tag}-{{p}}', 'w').write('x')\n"
               f"open(f'{shared}/a/b/left-{{p}}', 'w').write('x')\nprint('ok', p)")
    walks = []
    walk = sandbox._remove_files_of
    monkeypatch.setattr(sandbox, "_remove_files_of", lambda uids: (walks.append(len(uids)), walk(uids))[1])

    def left():
        return ([n for d in ("/tmp", "/dev/shm") for n in os.listdir(d) if n.startswith(f"vgrout-sweep-{tag}")]
                + os.listdir(f"{shared}/a/b"))

    def one(_):
        res = sandbox.run({"m.py": program}, "m.py", limits=sandbox.Limits(isolation="rlimit"))
        pid = res.stdout.split()[1]
        assert res.stdout.startswith("ok") and not [n for n in left() if n.endswith(f"-{pid}")], res
        return res

    try:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(8) as pool:
            assert len(list(pool.map(one, range(16)))) == 16
        assert left() == []
        assert os.path.isdir(f"{shared}/a/b")  # not the runs': kept
        assert sum(walks) == 16 and len(walks) < 16, walks
    finally:
        shutil.rmtree(shared)


def test_missing_bwrap_is_an_error_unless_rlimit_is_asked_for(monkeypatch):
    """Without bubblewrap the sandbox refuses to run (naming the package), unless the weaker
    rlimit-only path is asked for by name, which warns once."""
    monkeypatch.setenv("PATH", "/nonexistent")
    sandbox._bwrap_problem.cache_clear()
    sandbox._warn_once.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="bubblewrap"):
            sandbox.isolation("bwrap")
        with pytest.raises(RuntimeError, match="bubblewrap"):
            sandbox.run({"m.py": "print(6 * 7)"}, "m.py")
        with pytest.warns(UserWarning, match="rlimits only"):
            assert sandbox.isolation("rlimit") == "rlimit"
        res = sandbox.run({"m.py": "print(6 * 7)"}, "m.py", limits=sandbox.Limits(isolation="rlimit"))
        assert res.stdout.strip() == "42" and res.isolation == "rlimit"
    finally:
        sandbox._bwrap_problem.cache_clear()
        sandbox._warn_once.cache_clear()


@pytest.mark.skipif(not BWRAP_OK, reason="needs a working bubblewrap to wrap")
def test_a_bwrap_without_an_option_a_run_passes_is_refused_at_the_check(monkeypatch, private_tempdir):
    """The startup check runs bwrap with every option a run passes: a bwrap that refuses one
    (here --info-fd, which an old bwrap lacks) is an error naming it, never a run whose program
    seems to fail (a grader would score that 0)."""
    shim = Path(private_tempdir) / "bwrap"  # where the sandbox uid can reach it
    shim.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = "--info-fd" ] && '
                    f'{{ echo "bwrap: Unknown option --info-fd" >&2; exit 1; }}; done\nexec {shutil.which("bwrap")} "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{private_tempdir}{os.pathsep}{os.environ['PATH']}")
    sandbox._bwrap_problem.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="--info-fd"):
            sandbox.run({"m.py": "print(6 * 7)"}, "m.py", limits=sandbox.Limits(isolation="bwrap"))
    finally:
        sandbox._bwrap_problem.cache_clear()


@pytest.mark.skipif(not BWRAP_OK, reason="the private /tmp is bubblewrap's")
def test_the_private_tmp_is_size_limited():
    """Files of every size together stop at Limits.tmp_bytes (each file alone is under RLIMIT_FSIZE)."""
    program = ("import os\nn = 0\ntry:\n    for i in range(1000):\n        with open(f'/tmp/f{i}', 'wb') as f:\n"
               "            f.write(b'x' * (1 << 20))\n        n += 1\nexcept OSError as e:\n    print(n, e.errno)")
    res = sandbox.run({"m.py": program}, "m.py", limits=sandbox.Limits(tmp_bytes=8 << 20, cpu_s=10))
    written, errno = map(int, res.stdout.split())
    assert written <= 8 and errno == 28, res  # ENOSPC


@pytest.mark.skipif(not BWRAP_OK, reason="needs bubblewrap")
def test_no_project_or_home_file_is_reachable_from_the_sandbox(host):
    """Only the system's /usr is the sandbox's root: the project's data and our home are not there."""
    program = ("import os, sys\nfor p in sys.argv[1:]:\n    print(p, os.path.exists(p))\n")
    here = os.path.abspath(__file__)
    res = sandbox.run({"m.py": f"import sys\nsys.argv += {[here, str(host / 'keep.txt'), '/root', '/home']!r}\n"
                       + program}, "m.py")
    assert res.returncode == 0 and "True" not in res.stdout, res


@pytest.mark.slow
@pytest.mark.parametrize("isolation", PATHS)
def test_a_grader_killed_with_sigkill_leaves_no_process_and_no_file(tmp_path, isolation):
    """kill -9 of a grading process mid-run: its sandboxes die with it (bwrap: --die-with-parent;
    rlimit-only: the reaper), and nothing it made is left on disk (no temporary directory, no job
    file: stdin and stdout were anonymous memory; the program's own file in /tmp is removed)."""
    skip_if_unprotected(isolation)
    import subprocess
    import sys
    tag = f"{uuid.uuid4().int % 10**6 + 1000}.{os.getpid()}"  # sleep's argument: a number of seconds
    script = tmp_path / "grade.py"
    script.write_text(
        "from vgrout.substrate import grader\nfrom vgrout.substrate.problems import Problem\n"
        "p = Problem(id='add', messages=[{'role': 'user', 'content': 'x'}], entry_point='add',\n"
        "            tests=['assert add(1, 2) == 3'], canonical_solution='', mode='exit_code')\n"
        f"code = 'import os, time\\nopen(\"/tmp/vgrout-left-{tag}\", \"w\").write(\"x\")\\n"
        f"if os.fork() == 0:\\n    os.execv(\"/bin/sleep\", [\"sleep\", \"{tag}\"])\\ntime.sleep(60)'\n"
        "print('start', flush=True)\n"
        f"grader.grade_batch([p] * 4, ['```python\\n' + code + '\\n```'] * 4, progress=False,\n"
        f"                   limits=grader.sandbox.Limits(isolation={isolation!r}))\n")
    leftovers = lambda: processes_with(tag)  # noqa: E731
    before = set(os.listdir(tempfile.gettempdir()))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, cwd=os.getcwd())
    assert proc.stdout.readline().strip() == b"start"
    deadline = time.monotonic() + 10
    while not leftovers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers(), "the sandboxes never started their sleeps: the test would prove nothing"
    proc.kill()
    proc.wait()

    def left_files():
        new = set(os.listdir(tempfile.gettempdir())) - before
        return [n for n in new if n.startswith("vgrout")]
    deadline = time.monotonic() + 10
    while (leftovers() or left_files()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers() == []
    assert left_files() == []

SLOTTED = """import sys, threading
from vgrout.substrate import sandbox
def one():
    print(sandbox.run({"m.py": "import time\\na = time.time()\\ntime.sleep(1)\\nprint(a, time.time())"}, "m.py").stdout,
          end="", flush=True)
runs = [threading.Thread(target=one) for _ in range(int(sys.argv[1]))]
[t.start() for t in runs]
[t.join() for t in runs]
"""


@pytest.mark.skipif(not BWRAP_OK, reason="bubblewrap not usable here")
def test_the_hosts_runs_hold_at_most_its_run_slots_whichever_process_runs_them():
    """Every run with a CPU quota holds its run slots of the host (`sandbox._take_run_slots`, one per
    CPU, one a run at one CPU): two processes each start that many runs at once, and the programs' own
    clocks show no more than that many alive together."""
    if not sandbox._cpu_v2() and sandbox._cpu_cgroup_parent() is None:
        pytest.skip("no cpu cgroup of ours on this host (the runs have no quota and no slots)")
    n = sandbox._run_slots()
    procs = [subprocess.Popen([sys.executable, "-c", SLOTTED, str(n)], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    spans = [tuple(map(float, line.split())) for p in procs for line in p.communicate(timeout=120)[0].splitlines()]
    assert len(spans) == 2 * n, spans
    assert max(sum(a <= t < b for a, b in spans) for t, _ in spans) <= n, spans


def test_a_run_slots_directory_others_can_open_is_refused_by_name(monkeypatch, tmp_path):
    slots = tmp_path / "slots-{uid}"
    monkeypatch.setattr(sandbox, "RUN_SLOTS_DIR", str(slots))
    Path(str(slots).format(uid=os.getuid())).mkdir(mode=0o777)
    os.chmod(str(slots).format(uid=os.getuid()), 0o777)
    with pytest.raises(RuntimeError, match="slots-"):
        sandbox._take_run_slots(1.0)


def _slots_here(monkeypatch, tmp_path) -> str:
    """The run slots in a directory of this test's own (the host's stay free for other runs)."""
    monkeypatch.setattr(sandbox, "RUN_SLOTS_DIR", str(tmp_path / "slots-{uid}"))
    return sandbox.RUN_SLOTS_DIR


def test_a_run_takes_as_many_slots_as_its_quotas_cpus(monkeypatch, tmp_path):
    """docs/redteam/rev11 mixcpus.py: a run of 2 CPUs beside runs of 1 put 3 CPUs of quota on a
    2-CPU host. Now a run's quota of c CPUs holds ceil(c) slots: with all but one slot held, a run of
    2 CPUs waits until another is given back, and a run of 1 does not."""
    _slots_here(monkeypatch, tmp_path)
    n = sandbox._run_slots()
    held = sandbox._take_run_slots(n - 1) if n > 1 else []
    if n > 1:
        one = sandbox._take_run_slots(1.0)  # the last slot: no wait
        sandbox._give_back(one)
    got = []
    waiter = threading.Thread(target=lambda: got.append(sandbox._take_run_slots(min(2.0, n))), daemon=True)
    waiter.start()
    waiter.join(1.0)
    assert got == [] or n == 1, "a run of 2 CPUs took its slots while only one was free"
    sandbox._give_back(held)
    waiter.join(10)
    assert len(got) == 1 and len(got[0]) == min(2, n)
    sandbox._give_back(got[0])


def test_a_run_of_a_tiny_quota_holds_one_slot(monkeypatch, tmp_path):
    """docs/redteam/rev12 tinycpus.py: Limits.cpus of 1e-9 wanted ceil(0) = 0 slots, a count the taking
    loop never reaches: it took every slot and held the queue, and every grader of the host waited, with
    no error. A run of any quota holds one slot at least."""
    _slots_here(monkeypatch, tmp_path)
    got = []
    taker = threading.Thread(target=lambda: got.append(sandbox._take_run_slots(1e-9)), daemon=True)
    taker.start()
    taker.join(10)
    assert len(got) == 1 and len(got[0]) == 1, "a run of 1e-9 CPUs did not come back with one slot"
    sandbox._give_back(got[0])


def test_a_run_whose_clean_up_raises_gives_its_slots_back(monkeypatch, tmp_path):
    """docs/redteam/rev12 finallyleak.py: the slots were given back as the last step of run()'s clean-up,
    so a clean-up step that raised (removing a cgroup, the work directory) kept them for the process's
    life, and every later run of the host waited. Now they are given back whatever the clean-up does."""
    if sandbox.isolation() != "bwrap" or not (sandbox._cpu_v2() or sandbox._cpu_cgroup_parent()):
        pytest.skip("runs hold run slots only under bubblewrap with a cpu cgroup")
    _slots_here(monkeypatch, tmp_path)
    real = sandbox._end_namespace  # a bubblewrap run's clean-up always ends its namespace

    def fail(*args):
        real(*args)
        raise OSError("injected: the clean-up failed")
    monkeypatch.setattr(sandbox, "_end_namespace", fail)
    with pytest.raises(OSError):  # the injected error (or, its descriptor closed by then, the clean-up's next)
        sandbox.run({"a.py": "print(1)"}, "a.py")
    monkeypatch.setattr(sandbox, "_end_namespace", real)
    n = sandbox._run_slots()
    got = []
    taker = threading.Thread(target=lambda: got.append(sandbox._take_run_slots(n)), daemon=True)
    taker.start()
    taker.join(10)
    assert len(got) == 1, "the failed run's slots were not given back"
    sandbox._give_back(got[0])


def test_a_forked_child_does_not_keep_the_run_slots(monkeypatch, tmp_path):
    """docs/redteam/rev11 forkleak.py: an flock belongs to the open file, which a fork shares, so a
    child forked (without exec) while a run held its slots kept them after the run, and every run
    of the host waited for the child. Now a forked child closes its copies: another process takes
    every slot at once, while the child still lives."""
    where = _slots_here(monkeypatch, tmp_path)
    n = sandbox._run_slots()
    held = sandbox._take_run_slots(n)
    child = os.fork()
    if child == 0:
        time.sleep(20)
        os._exit(0)
    try:
        sandbox._give_back(held)
        take = (f"from vgrout.substrate import sandbox\nsandbox.RUN_SLOTS_DIR = {where!r}\n"
                f"print(len(sandbox._take_run_slots({n})))")
        out = subprocess.run([sys.executable, "-c", take], capture_output=True, text=True, timeout=15)
        assert out.stdout.strip() == str(n), out
    finally:
        os.kill(child, 9)
        os.waitpid(child, 0)


@pytest.mark.parametrize("v2", [False, True])
def test_a_quota_above_the_runs_cgroups_bounds_the_run_slots(tmp_path, v2):
    """docs/redteam/rev11 container.sh: under a 1-CPU quota on the grader's own cgroup (a
    container's), the slots were the CPU affinity's 2, and two runs shared one CPU. The fewest CPUs
    a quota allows, on the runs' parent's cgroup or any above it, is what the slots count."""
    def quota(d, cpus):
        d.mkdir(parents=True, exist_ok=True)
        if v2:
            (d / "cpu.max").write_text("max 100000\n" if cpus is None else f"{int(cpus * 100000)} 100000\n")
        else:
            (d / "cpu.cfs_quota_us").write_text("-1\n" if cpus is None else f"{int(cpus * 100000)}\n")
            (d / "cpu.cfs_period_us").write_text("100000\n")
    root = tmp_path / "cg"
    quota(root, None)
    quota(root / "container", 1.5)
    quota(root / "container" / "grader", None)
    assert sandbox._quota_cpus(str(root / "container" / "grader"), v2) == 1.5
    quota(root / "container" / "grader", 3.0)
    assert sandbox._quota_cpus(str(root / "container" / "grader"), v2) == 1.5
    assert sandbox._quota_cpus(str(root), v2) is None
