"""Fan-out: the arm × seed grid's runs as Ray tasks, with exactly the outputs, dvc.lock entries
and metrics a serial `dvc repro` would have written. Read `fanout` top to bottom:

1. The head (this checkout) runs, with `dvc repro`, every stage the runs read (model,
   substrate, pairs, v_act, teacher pool): one copy for all runs.
2. Every run stage (RUN_STAGES: train, train_yoked, eval, eval_yoked, eval_base) that is stale,
   or reads one that is, becomes a Ray task. Its arguments are the tasks of the run stages it
   reads, taken from DVC's own graph: a yoked run waits for its seed's run of the arm it copies, an
   eval for its train. Ray keeps the DAG's order.
3. A task unpacks a snapshot of the head's tree into its run's own work directory, which shares
   the head's DVC cache (or pulls from and pushes to a DVC remote), and runs
   `dvc repro --single-item STAGE` there. DVC itself hashes the deps, runs the command and
   writes the lock entry.
4. The head adopts each finished stage. First its git-tracked outputs (metrics, checked against
   the entry's hashes), then its lock entry, spliced into dvc.lock, then `dvc checkout` of its
   cached outputs (`dvc checkout`, or `dvc pull` from the remote). Only the driver writes the
   head's dvc.lock, one entry at a time, under DVC's repository lock and by atomic rename, so
   tasks that finish together queue, and no entry is half written or lost.
5. `dvc repro` on the head runs what reads the runs (aggregate). Every run stage is current by
   then, so it runs none of them.

A fan-out killed and started again skips every adopted stage (it is current in dvc.lock). Each
train resumes from the checkpoint in its work directory. A stage is adopted only after its
`dvc repro` succeeded, so partial output is never recorded as done.
"""
from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from vgrout import config
from vgrout.io import InputError, atomic_path, write_json
from vgrout.substrate.sandbox import killpg

RUN_STAGES = ("train", "train_yoked", "eval", "eval_yoked", "eval_base")  # the stages fanned out
DVC = (sys.executable, "-m", "dvc")  # this interpreter's DVC, on the head and in the tasks
WORK = Path(".dvc", "tmp", "fanout")  # default work root, inside the head: ignored by git and by DVC


# ---------------------------------------------------------------------------- the plan

@dataclass(frozen=True)
class RunStage:
    """One stage to run as a task, as DVC's graph of the head describes it."""
    name: str                     # train@routeA-0
    reads: tuple[str, ...]        # the stages whose outputs it reads (direct)
    after: tuple[str, ...]        # those of them that are run stages (their tasks go first)
    tracked: tuple[str, ...]      # its cache: false outputs (git-tracked metrics), relative paths

    @property
    def workdir(self) -> str:
        """A run's stages share one work directory (train's checkpoints stay there for eval)."""
        return self.name.split("@")[-1]


@dataclass(frozen=True)
class Plan:
    upstream: tuple[str, ...]     # stages the head runs first (what the run stages read)
    runs: tuple[RunStage, ...]    # every run stage, in a topological order
    outputs: tuple[str, ...]      # every stage's outputs (with dvc.lock, what the pipeline writes in the tree)


def is_run_stage(name: str) -> bool:
    return name.split("@")[0] in RUN_STAGES


def plan(root: Path) -> Plan:
    """The run stages and what they read, from DVC's graph of root/dvc.yaml."""
    import networkx as nx
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        graph = repo.index.graph  # an edge runs from a stage to each stage it reads
        name = {s: s.name for s in graph.nodes}  # one dvc.yaml: a name is its address
        order = list(reversed(list(nx.topological_sort(graph))))  # what a stage reads comes first
        runs, upstream = [], set()
        for s in order:
            if not is_run_stage(name[s]):
                continue
            reads = tuple(sorted(name[d] for d in graph.successors(s)))
            upstream |= {name[d] for d in nx.descendants(graph, s) if not is_run_stage(name[d])}
            tracked = tuple(o.def_path for o in s.outs if not o.use_cache)
            for o in s.outs:
                if not o.use_cache and Path(root, o.def_path).is_dir():
                    raise InputError(f"dvc.yaml: stage {name[s]}: the fan-out adopts tracked (cache: false) "
                                     f"files, not the directory '{o.def_path}'; cache it, or run the stage on the head")
            runs.append(RunStage(name[s], reads, tuple(r for r in reads if is_run_stage(r)), tracked))
        up = tuple(name[s] for s in order if name[s] in upstream)
        outputs = tuple(sorted(o.def_path for s in order for o in s.outs))
    return Plan(up, tuple(runs), outputs)


def seed_major(todo: list[RunStage]) -> list[RunStage]:
    """The run stages in seed order, topological within a seed (a stable sort of a topological order; stages of no
    seed, eval_base, first), so the tasks start seed by seed and a budget that ends mid-grid leaves whole leading
    seeds (a plan's seeds_run leading decides on those). Where a stage reads another seed's (no preset does), the
    topological order as it was."""
    def seed(r: RunStage) -> int:
        tail = r.workdir.rpartition("-")[2] if "@" in r.name else ""
        return int(tail) if tail.isdigit() else -1
    out = sorted(todo, key=seed)
    at = {r.name: i for i, r in enumerate(out)}
    return todo if any(at.get(a, -1) > at[r.name] for r in out for a in r.after) else out


def stale(root: Path, runs: tuple[RunStage, ...]) -> list[RunStage]:
    """Run stages `dvc status` calls changed, and every run stage that reads one of them."""
    out = dvc(root, "status", "--json", *(r.name for r in runs), capture=True)
    changed = set(json.loads(out or "{}"))
    todo: list[RunStage] = []
    for r in runs:  # topological: what r reads was decided before r
        if r.name in changed or any(a in changed for a in r.after):
            changed.add(r.name)
            todo.append(r)
    return todo


# ---------------------------------------------------------------------------- DVC, the lock file

def dvc(cwd: Path, *args: str, capture: bool = False) -> str:
    """`dvc ARGS` in cwd with this interpreter's DVC: its stdout captured, or printed."""
    res = subprocess.run([*DVC, *args], cwd=cwd, text=True, env=dvc_env(),
                         stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE if capture else None)
    if res.returncode:
        raise RuntimeError(f"dvc {' '.join(args)} failed in {cwd} ({res.returncode})"
                           + (f":\n{res.stderr[-2000:]}" if capture else ""))
    return res.stdout if capture else ""


def dvc_env() -> dict:
    """Our environment, without DVC's usage report (a daemon per call, on nodes that may have no
    network), unless the user set DVC_NO_ANALYTICS themselves."""
    return {"DVC_NO_ANALYTICS": "1", **os.environ}


@contextmanager
def only_fanout(root: Path) -> Iterator[None]:
    """Hold root's fan-out lock (one fan-out per head); another holder is an error, not a wait."""
    path = Path(root, ".dvc", "tmp", "fanout.lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(f"another `vgrout fanout` runs on this checkout (it holds {path})") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def lock_stages(root: Path) -> dict:
    """root/dvc.lock's entries by stage name ({} without a dvc.lock)."""
    from dvc.utils.serialize import load_yaml
    path = Path(root, "dvc.lock")
    return dict(load_yaml(str(path)).get("stages", {})) if path.exists() else {}


def merge_lock_entry(root: Path, name: str, entry: dict) -> None:
    """Set stage `name`'s entry in root/dvc.lock, leaving every other entry as it is.

    Under DVC's own repository lock (so neither another merge nor a `dvc` command in root writes
    dvc.lock meanwhile), and by atomic rename: two callers that finish together both land, in
    either order, and a reader sees the old file or the new one.
    """
    from dvc.lock import make_lock
    from dvc.utils.serialize import dump_yaml, parse_yaml_for_update

    path = Path(root, "dvc.lock")
    tmp_dir = Path(root, ".dvc", "tmp")
    tmp_dir.mkdir(parents=True, exist_ok=True)
    with make_lock(tmp_dir / "lock", tmp_dir=str(tmp_dir), wait=True):
        data = parse_yaml_for_update(path.read_text(), str(path)) if path.exists() else None
        if not data:
            data = {"schema": "2.0"}
        data.setdefault("stages", {})[name] = entry
        with atomic_path(path) as tmp:
            dump_yaml(str(tmp), data)


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


# ---------------------------------------------------------------------------- a task

@dataclass
class Done:
    """A run stage that ran to the end in its work directory: what the head adopts."""
    name: str
    entry: dict                   # its dvc.lock entry, as DVC wrote it there
    files: dict[str, bytes]       # its git-tracked outputs
    where: str                    # node and GPU ids
    seconds: float
    log: str


@dataclass(frozen=True)
class Context:
    """What every task needs from the head."""
    work: str                     # the work root (absolute): runs/<run>/, logs/<stage>.log
    cache: str | None             # the head's DVC cache dir, shared by the tasks; None with a remote
    remote: str | None            # a DVC remote the tasks pull from and push to
    gpu: bool                     # the cluster has GPUs (else: CPU only, CUDA hidden)
    cpus: int                     # threads of a CPU task
    env: tuple[tuple[str, str], ...] = field(default=())  # extra environment of the stage commands


class StageFailed(RuntimeError):
    """One attempt of a run stage failed (Ray retries it)."""


class FanoutFailed(RuntimeError):
    """Some run stages failed every attempt (the others are adopted)."""


def tree_files(root: Path) -> list[str]:
    """The head's tree as DVC sees it: the files git tracks and untracked unignored ones (params,
    code, pair files, dvc.yaml, dvc.lock, metrics), and .dvc/config.local (remotes kept out of git)."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, check=True,
                           capture_output=True).stdout.decode().split("\0")
    local = str(Path(".dvc", "config.local"))
    return sorted(f for f in set(files) | {local} if f and Path(root, f).is_file())


def snapshot(root: Path) -> bytes:
    """tree_files as a gzip tar."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for f in tree_files(root):
            tar.add(Path(root, f), arcname=f, recursive=False)
    return buf.getvalue()


def inputs_digest(root: Path, outputs: tuple[str, ...]) -> dict[str, str]:
    """Per file, a hash of the tree less what the pipeline writes (dvc.lock, outputs, the .gitignore
    entries DVC adds for cached ones): it changes when params, code or pair files do, and names them."""
    return {f: hashlib.sha256(Path(root, f).read_bytes()).hexdigest() for f in tree_files(root)
            if f != "dvc.lock" and Path(f).name != ".gitignore"
            and not any(f == o or f.startswith(o.rstrip("/") + "/") for o in outputs)}


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The files added, removed or edited between two inputs_digest's."""
    return sorted(f for f in before.keys() | after.keys() if before.get(f) != after.get(f))


MANIFEST = Path(".dvc", "tmp", "fanout-manifest.json")  # in a work dir: the files its last snapshot put there


def unpack(tree: bytes, wd: Path, keep: tuple[str, ...]) -> None:
    """Make wd's tree the snapshot's: write its files, and delete those an earlier snapshot put
    there that this one lacks (a module or pair file deleted in the head must not be imported or
    read here). `keep`: the stage's own tracked outputs, left as an attempt cut off here wrote
    them, beside its checkpoints (the head's copy is another run's, and a resumed train would
    append to it)."""
    wd.mkdir(parents=True, exist_ok=True)
    Path(wd, ".dvc", "config.local").unlink(missing_ok=True)  # rewritten from the head's and ours
    with tarfile.open(fileobj=io.BytesIO(tree), mode="r:gz") as tar:
        members = [m for m in tar.getmembers() if not (m.name in keep and Path(wd, m.name).exists())]
        tar.extractall(wd, members=members, filter="data")
        names = set(tar.getnames())
    manifest = Path(wd, MANIFEST)
    before = set(json.loads(manifest.read_text())) if manifest.exists() else set()
    for gone in before - names:
        Path(wd, gone).unlink(missing_ok=True)
    write_json(manifest, sorted(names))


def run_stage(stage: RunStage, tree: bytes, ctx: Context, board: Any, *upstream: Done) -> Done:
    """Run one stage through DVC in its work directory (a Ray task's body)."""
    import ray

    wd = Path(ctx.work, "runs", stage.workdir)
    log = Path(ctx.work, "logs", f"{stage.name}.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    accel = ray.get_runtime_context().get_accelerator_ids().get("GPU", [])
    where = f"{ray.util.get_node_ip_address()} " + (f"GPU {','.join(accel)}" if accel else "CPU")
    ray.get(board.started.remote(stage.name, where, str(log)))
    t0 = time.time()
    with open(log, "a") as f:
        f.write(f"\n=== {stage.name} on {where}, {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    kill_leftover(wd)
    unpack(tree, wd, keep=stage.tracked)
    from configobj import ConfigObj
    conf = ConfigObj(str(Path(wd, ".dvc", "config.local")))  # the head's own (remotes), if any, plus:
    conf.setdefault("core", {})["no_scm"] = "true"  # the work dir is no git repository; DVC needs none
    if ctx.cache:
        conf.setdefault("cache", {}).update({"dir": ctx.cache, "type": "reflink,hardlink,copy"})
    conf.write()
    for up in upstream:  # what the run stages it reads wrote: their lock entries and tracked files
        merge_lock_entry(wd, up.name, up.entry)
        for rel, data in up.files.items():
            with atomic_path(wd / rel) as tmp:
                tmp.write_bytes(data)

    path = os.pathsep.join([str(wd)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    env = dict(dvc_env(), PYTHONPATH=path,  # the stage imports the snapshot's vgrout first
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **dict(ctx.env))
    if not ctx.gpu:
        env.update(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS=str(ctx.cpus))
    try:
        if ctx.remote:
            dvc_logged(wd, log, env, "pull", "-r", ctx.remote, *stage.reads)
        else:
            dvc_logged(wd, log, env, "checkout", *stage.reads)
        dvc_logged(wd, log, env, "repro", "--single-item", stage.name)
        if ctx.remote:
            dvc_logged(wd, log, env, "push", "-r", ctx.remote, stage.name)
        entry = lock_stages(wd)[stage.name]
        files = {rel: Path(wd, rel).read_bytes() for rel in stage.tracked}  # IsADirectoryError: see plan()
    except (StageFailed, KeyError) as e:
        why = f"dvc repro left no entry for it in {wd / 'dvc.lock'}" if isinstance(e, KeyError) else str(e)
        tail = log.read_text()[-3000:] if log.exists() else ""
        ray.get(board.failed_attempt.remote(stage.name))
        raise StageFailed(f"{stage.name} failed on {where} ({why}); log: {log}\n{tail}") from None
    return Done(stage.name, entry, files, where, time.time() - t0, str(log))


PGID = Path(".dvc", "tmp", "fanout.pgid")  # in a work dir: the process group of the dvc call running there


def dvc_logged(wd: Path, log: Path, env: dict, *args: str) -> None:
    """`dvc ARGS` in wd, its output appended to log, in its own process group (recorded, so a
    later attempt, or the driver, can end what a killed worker left running)."""
    with open(log, "a") as f:
        f.write(f"$ dvc {' '.join(args)}\n")
        f.flush()
        p = subprocess.Popen([*DVC, *args], cwd=wd, stdout=f, stderr=subprocess.STDOUT,
                             env=env, start_new_session=True)
        write_json(Path(wd, PGID), process_id(p.pid))
        try:
            rc = p.wait()
        finally:
            killpg(p.pid)
            Path(wd, PGID).unlink(missing_ok=True)
    if rc:
        raise StageFailed(f"dvc {' '.join(args)} exited {rc}")


def process_id(pid: int) -> dict | None:
    """What names a process beyond its reusable pid: host, boot and start time (None: gone)."""
    try:
        start = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    return {"host": socket.gethostname(), "boot": boot, "pid": pid, "start": start}


def kill_leftover(wd: Path) -> None:
    """End the process group an attempt cut off with its worker left running in wd (the stage
    command would go on writing what the next attempt writes). Only if the recorded process is
    still that one, on this host: a pid of another node, or a reused one, is left alone."""
    pgid_file = Path(wd, PGID)
    if not pgid_file.exists():
        return
    try:
        recorded = json.loads(pgid_file.read_text())
    except ValueError:
        recorded = None
    if recorded and process_id(recorded["pid"]) == recorded:
        killpg(recorded["pid"])
    elif recorded and recorded.get("host") != socket.gethostname():
        return  # another node's: its next attempt there ends it
    pgid_file.unlink(missing_ok=True)


def kill_leftovers(work: Path) -> None:
    """kill_leftover in every work dir under work (a driver that starts, or ends, on this host)."""
    for wd in Path(work, "runs").glob("*"):
        kill_leftover(wd)


# ---------------------------------------------------------------------------- the head

def adopt(root: Path, done: Done, remote: str | None) -> None:
    """Record a finished stage in the head: tracked files, then its lock entry, then its cached
    outputs from the cache (or remote). A crash in between leaves the stage stale or current with
    its cache entries present; `fanout` checks out the cached outputs of every run stage first."""
    hashes = {o["path"]: o.get("md5") for o in done.entry.get("outs", [])}
    for rel, data in done.files.items():
        if hashes.get(rel) != md5(data):
            raise RuntimeError(f"{done.name}: {rel} is not in its lock entry, or does not match its md5")
        with atomic_path(Path(root, rel)) as tmp:
            tmp.write_bytes(data)
    merge_lock_entry(root, done.name, done.entry)
    fetch_outputs(root, remote, done.name)


def fetch_outputs(root: Path, remote: str | None, *stages: str) -> None:
    """The cached outputs of `stages` into root's workspace: from the shared cache, or the remote."""
    dvc(root, *(("pull", "-r", remote) if remote else ("checkout",)), *stages, capture=True)


def restore_adopted(root: Path, runs: tuple[RunStage, ...], console, remote: str | None) -> None:
    """Check out the cached outputs of run stages dvc.lock records that the workspace lacks (a
    fan-out killed between adopting an entry and checking it out). One whose cache is gone is
    left alone: `dvc status` calls it changed, so it runs again."""
    recorded = lock_stages(root)
    names = [r.name for r in runs if r.name in recorded]
    if names:
        try:
            fetch_outputs(root, remote, *names)
        except RuntimeError as e:
            console.print(f"[yellow]some recorded run outputs are not in the cache; they run again[/yellow]\n{e}")


def check_address(address: str | None) -> None:
    """An address that nothing answers at is an error before any task starts."""
    if address in (None, "auto", "local"):
        return
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"--address {address!r}: expected HOST:PORT (the head's GCS port, 6379 by default), "
                         f"ray://HOST:PORT or auto")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as e:
        raise InputError(f"--address {address}: no Ray cluster answers there ({e.strerror or e}); start one "
                         f"with `ray start --head` (README: Fan-out)") from None


def import_ray():
    try:
        import ray
    except ImportError:
        raise InputError("the fan-out needs Ray: pip install -e '.[ray]'") from None
    return ray


STATES = ("queued", "running", "retrying", "done", "failed", "blocked")


class Progress:
    """Which stages are queued, running, done or failed, where, and their logs; a rich table and
    WORK/status.json (rewritten atomically)."""

    def __init__(self, stages: list[RunStage], status_file: Path):
        self.rows = {s.name: {"state": "queued", "where": "", "attempts": 0, "seconds": None, "log": ""}
                     for s in stages}
        self.status_file = status_file

    def update(self, board_rows: dict) -> None:
        for name, b in board_rows.items():
            row = self.rows[name]
            if row["state"] in ("queued", "running", "retrying"):
                row.update(where=b["where"], log=b["log"], attempts=b["attempts"],
                           state="retrying" if b["failed"] >= b["attempts"] else "running")

    def table(self):
        from rich.table import Table
        t = Table("stage", "state", "where", "attempts", "seconds", "log")
        colour = {"done": "green", "failed": "red", "blocked": "red", "running": "cyan", "retrying": "yellow"}
        for name, r in self.rows.items():
            st = r["state"]
            t.add_row(name, f"[{colour.get(st, 'white')}]{st}[/]", r["where"], str(r["attempts"] or ""),
                      "" if r["seconds"] is None else f"{r['seconds']:.0f}", r["log"])
        counts = {s: sum(r["state"] == s for r in self.rows.values()) for s in STATES}
        t.caption = "  ".join(f"{s} {n}" for s, n in counts.items() if n)
        return t

    def write(self) -> None:
        write_json(self.status_file, {"updated": time.strftime("%Y-%m-%dT%H:%M:%S"), "stages": self.rows})


def fanout(root: Path = Path("."), address: str | None = None, work: Path | None = None,
           remote: str | None = None, rest: bool = True, console=None) -> dict[str, str]:
    """Run every stale run stage of root's pipeline as a Ray task, adopt each into the head, then
    `dvc repro` the rest. Returns {stage: final state}; raises if any run stage failed."""
    from rich.console import Console
    from rich.live import Live

    console = console or Console()
    root = Path(root).resolve()
    params = config.load(root / config.PARAMS)  # a bad key or an unknown arm: an error naming it, now
    fan = params.fanout
    check_address(address)
    ray = import_ray()
    work = Path(work or root / WORK).resolve()

    with only_fanout(root):
        (work / "status.json").unlink(missing_ok=True)  # a past fan-out's
        kill_leftovers(work)  # what a fan-out killed with kill -9 left running here
        p = plan(root)
        console.print(f"[bold]head[/bold]: dvc repro {' '.join(p.upstream)}")
        dvc(root, "repro", *p.upstream)
        restore_adopted(root, p.runs, console, remote)
        todo = seed_major(stale(root, p.runs))
        if remote:  # the tasks pull what they read from there: upstream, and current runs a stale one reads
            names = {t.name for t in todo}
            dvc(root, "push", "-r", remote, *p.upstream, *sorted({a for t in todo for a in t.after} - names),
                capture=True)
        digest = inputs_digest(root, p.outputs)
        console.print(f"[bold]{len(todo)}[/bold] of {len(p.runs)} run stages to run"
                      + (f"; current: {len(p.runs) - len(todo)}" if len(todo) < len(p.runs) else ""))
        states = {r.name: "current" for r in p.runs}
        if todo:
            states.update(run_tasks(ray, root, todo, fan, address, work, remote, console, Live))
        failed = sorted(n for n, s in states.items() if s in ("failed", "blocked"))
        if failed:
            raise FanoutFailed(f"{len(failed)} run stages did not finish: {', '.join(failed)}; the rest are "
                               f"adopted; run `vgrout fanout` again to retry (logs: {work / 'logs'})")
        changed = changed_files(digest, inputs_digest(root, p.outputs))
        if changed:  # a log written inside the tree counts too: git must ignore it
            raise FanoutFailed(f"files of the head changed while the fan-out ran ({', '.join(changed[:5])}"
                               f"{f' and {len(changed) - 5} more' if len(changed) > 5 else ''}): the adopted "
                               "stages ran on the tree it started from, and `dvc status` shows what is stale now; "
                               "not running the rest (run `vgrout fanout` again)")
        if rest:
            console.print("[bold]head[/bold]: dvc repro (what reads the runs)")
            dvc(root, "repro")
    return states


def run_tasks(ray, root: Path, todo: list[RunStage], fan: config.Fanout, address: str | None,
              work: Path, remote: str | None, console, Live) -> dict[str, str]:
    quiet = dict(log_to_driver=False, configure_logging=False)  # each stage has its own log file
    ray.init(address=address, **quiet) if address else ray.init(include_dashboard=False, **quiet)
    try:
        gpus = ray.cluster_resources().get("GPU", 0)
        if not gpus:
            console.print(f"no GPU in the cluster: each run takes {fan.cpus_per_run} CPU core(s)")
        ctx = Context(work=str(work), cache=None if remote else dvc_cache_dir(root),
                      remote=remote, gpu=bool(gpus), cpus=fan.cpus_per_run,
                      env=tuple((k, v) for k, v in os.environ.items() if k.startswith("VGROUT_")))
        board = ray.remote(num_cpus=0)(Board).remote()
        task = ray.remote(run_stage).options(
            num_gpus=fan.gpu_share if gpus else 0, num_cpus=fan.cpus_per_run,
            max_retries=fan.retries, retry_exceptions=True)
        tree = ray.put(snapshot(root))
        refs, by_ref = {}, {}
        for s in todo:  # topological: the refs it waits on exist
            refs[s.name] = task.remote(s, tree, ctx, board, *(refs[a] for a in s.after if a in refs))
            by_ref[refs[s.name]] = s
        progress = Progress(todo, work / "status.json")
        progress.write()
        pending = list(refs.values())
        with Live(progress.table(), console=console, refresh_per_second=2) as live:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1, timeout=1.0)
                progress.update(ray.get(board.rows.remote()))
                for ref in ready:
                    s, row = by_ref[ref], progress.rows[by_ref[ref].name]
                    try:
                        done = ray.get(ref)
                    except Exception as e:  # noqa: BLE001 (a task's error, reported with its log)
                        blocked = not row["attempts"]
                        row["state"] = "blocked" if blocked else "failed"
                        live.console.print(f"[red]{s.name} {'blocked by a failed stage it reads' if blocked else 'failed'}"
                                           f"[/red]: {str(e).splitlines()[-1] if blocked else e}")
                        continue
                    adopt(root, done, remote)
                    row.update(state="done", where=done.where, seconds=done.seconds, log=done.log)
                progress.write()
                live.update(progress.table())
        return {n: r["state"] for n, r in progress.rows.items()}
    finally:
        ray.shutdown()
        kill_leftovers(work)  # Ctrl-C, or an error here: no stage command outlives the fan-out


def dvc_cache_dir(root: Path) -> str:
    from dvc.repo import Repo
    with Repo(str(root)) as repo:
        return str(Path(repo.cache.local_cache_dir).resolve())


class Board:
    """A Ray actor the tasks tell when an attempt starts and fails (the progress view's source)."""

    def __init__(self):
        self._rows: dict[str, dict] = {}

    def started(self, name: str, where: str, log: str) -> None:
        row = self._rows.setdefault(name, {"attempts": 0, "failed": 0})
        row.update(where=where, log=log, attempts=row["attempts"] + 1)

    def failed_attempt(self, name: str) -> None:
        self._rows[name]["failed"] += 1

    def rows(self) -> dict[str, dict]:
        return self._rows
