"""Lay the decisive grid's sessions out as one workspace and run the aggregate stage there, on CPU: the grid runs
seed by seed over device sessions (d_start.sh), and the plan's verdict reads every seed together.

    python docs/runs/2026-11-30-decisive/assemble.py WORKSPACE SESSION_DIR [SESSION_DIR ...] [--session-check]

WORKSPACE: a checkout of the grid's commit (GRID_COMMIT: the runs' code is the aggregate's), its vgrout and stages
unmodified; the aggregate runs with WORKSPACE first on PYTHONPATH. SESSION_DIR: what one session brought back, kept
beside the repository (h1.tgz, h2.tgz, h_final.tgz, RUN.acts.gz), named as its record folder (SESSION_DIR's name
sA-B has docs/runs/2026-11-30-decisive/sA-B/); every recorded session must be given, each once. Checked before
anything runs: each returned file's sha256 against the record's returns.sha256 and kept_beside.sha256, each run's
deploy files against the record's gzipped copies, every run's config.json recording the same inputs (problems, pool,
model, code) and plan hash, the shared files (pairs) equal across sessions. The base is session 1's (the plan's).

params.yaml is the first session's with train.seeds every seed the sessions ran, which must be the plan's leading
seeds (the plan decides on the leading seeds that ran; the aggregate reads each listed seed's directions, which exist
only for seeds that ran); analysis.yaml is plans/decisive.yaml. --session-check takes any of the recorded sessions
(to compare with one session's device aggregate: device_summary.json). Also writes metrics/plan_timing.json: each
run's start against the plan's last commit in this repository, the check A2.md cannot make on an uncommitted
analysis.yaml; a run whose session started before that commit stops the assembly before the aggregate runs. A run's
start is bounded below by its session's start (the first `start EPOCH` line of d_start.sh's start.log, in the
returned dd_logs.tgz); its config.json's mtime in h2.tgz is when the fan-out adopted it into the head, after the run
ended, and is listed apart.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
GRID_COMMIT = "e3f642109f9f9a12b031d182132486b550a4720b"
HEAD_PARTS = ("metrics/runs/", "metrics/vact/", "runs/vact/", "runs/pairs/")  # from h1.tgz
SHARED = ("runs/pairs/",)  # the same in every session (one upstream)
BASE = "metrics/runs/base/"  # session 1's only
INPUT_KEYS = ("plan_sha256",)  # besides config.json's "inputs"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def listed(path: Path) -> dict[str, str]:
    """A sha256 file's lines (HASH  NAME ...) as {NAME: HASH}, NAME the first word."""
    return {line.split("  ", 1)[1].split(" ")[0]: line.split("  ", 1)[0]
            for line in path.read_text().splitlines() if line.strip()}


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def check_workspace(ws: Path) -> None:
    head = git("rev-parse", "HEAD", cwd=ws)
    if head != GRID_COMMIT:
        raise SystemExit(f"{ws}: HEAD is {head}, not the grid's commit {GRID_COMMIT}")
    if git("status", "--porcelain", "--", "vgrout", "stages", cwd=ws):
        raise SystemExit(f"{ws}: vgrout/ or stages/ differ from {GRID_COMMIT}")


def check_sessions(sessions: list[Path]) -> None:
    records = sorted(d.name for d in HERE.glob("s*-*") if d.is_dir())
    names = [s.name for s in sessions]
    if sorted(names) != records or len(set(names)) != len(names):
        raise SystemExit(f"sessions {names}: the record holds {records}; give each once")


def session_start(s: Path) -> float:
    """When d_start.sh first ran in session s (device clock): every run of the session started after it."""
    with tarfile.open(s / "dd_logs.tgz") as tar:
        if "tmp/dd/start.log" not in tar.getnames():
            raise SystemExit(f"{s / 'dd_logs.tgz'}: no tmp/dd/start.log (d_start.sh's log), so no session start")
        log = tar.extractfile("tmp/dd/start.log").read().decode()
    m = re.search(r"(?m)^start (\d+) ", log)
    if m is None:
        raise SystemExit(f"{s / 'dd_logs.tgz'}: tmp/dd/start.log has no 'start EPOCH' line")
    return float(m.group(1))


def unpack_session(s: Path, ws: Path, first: bool, seen: dict[str, bytes], starts: dict[str, tuple]) -> int:
    record = HERE / s.name
    want = listed(record / "returns.sha256") | listed(record / "kept_beside.sha256")
    for f in ("h1.tgz", "h2.tgz", "h_final.tgz", "dd_logs.tgz"):
        if sha256((s / f).read_bytes()) != want.get(f):
            raise SystemExit(f"{s / f}: sha256 is not the one {record.name}/returns.sha256 lists")
    n, began = 0, session_start(s)
    with tarfile.open(s / "h1.tgz") as tar:
        for m in tar.getmembers():
            if not (m.isfile() and m.name.startswith(HEAD_PARTS)):
                continue
            data = tar.extractfile(m).read()
            if m.name.startswith(BASE) and not first:
                continue  # the plan's base is session 1's
            if m.name.startswith(SHARED):
                if seen.setdefault(m.name, data) != data:
                    raise SystemExit(f"{s}: {m.name} differs from the first session's (one upstream for every seed)")
            parts = m.name.split("/")
            if m.name.startswith("metrics/runs/") and parts[3] in ("deploy_samples.csv", "per_mode_deploy.json"):
                committed = gzip.decompress((record / parts[2] / f"{parts[3]}.gz").read_bytes())
                if committed != data:
                    raise SystemExit(f"{s}: {m.name} is not the record's {record.name}/{parts[2]}/{parts[3]}.gz")
            (ws / m.name).parent.mkdir(parents=True, exist_ok=True)
            (ws / m.name).write_bytes(data)
            n += 1
    with tarfile.open(s / "h2.tgz") as tar:
        for m in tar.getmembers():
            if m.isfile() and m.name.startswith("runs/train/") and m.name.endswith(("config.json", "rollouts.jsonl")):
                tar.extract(m, ws, filter="data")
                if m.name.endswith("config.json"):
                    starts[m.name.split("/")[2]] = (began, m.mtime)
                n += 1
    for acts in sorted(s.glob("*.acts.gz")):
        run = acts.name.removesuffix(".acts.gz")
        data = gzip.decompress(acts.read_bytes())
        if sha256(data) != want.get(f"runs/train/{run}/rollout_acts.safetensors"):
            raise SystemExit(f"{acts}: sha256 is not the one {record.name}/kept_beside.sha256 lists")
        (ws / "runs/train" / run / "rollout_acts.safetensors").write_bytes(data)
        n += 1
    return n


def check_runs(ws: Path) -> None:
    """Every run recorded the same inputs and plan: one substrate, pool, model, code and plan for the grid (the
    direction, a seed's own v_act or v_grad, apart)."""
    seen = {}
    for cfg in sorted((ws / "runs/train").glob("*/config.json")):
        c = json.loads(cfg.read_text())
        inputs = {k: v for k, v in (c.get("inputs") or {}).items() if k != "direction"}  # a seed's own, per arm space
        key = json.dumps({"inputs": inputs, **{k: c.get(k) for k in INPUT_KEYS}}, sort_keys=True)
        seen.setdefault(key, []).append(cfg.parent.name)
    if len(seen) != 1:
        raise SystemExit(f"runs recorded different inputs or plans: {list(seen.values())}")


def plan_timing(starts: dict[str, tuple]) -> dict:
    last = git("log", "-1", "--format=%H %cI", "--", "plans/decisive.yaml", cwd=REPO).split()
    changed = datetime.fromisoformat(last[1]).timestamp()
    iso = lambda t: datetime.fromtimestamp(t, timezone.utc).isoformat()  # noqa: E731
    return {"plan": "plans/decisive.yaml", "last_commit": last[0], "last_commit_date": last[1],
            "first_session_start": iso(min(b for b, _ in starts.values())),
            "runs_started_before_the_plan": sorted(r for r, (b, _) in starts.items() if b < changed),
            "runs": {r: {"session_start": iso(b), "adopted": iso(a)} for r, (b, a) in sorted(starts.items())},
            "made": "assemble.py (a run starts after its session's start: d_start.sh's first 'start EPOCH' line in "
                    "the returned dd_logs.tgz; 'adopted': its config.json's mtime in h2.tgz, after the run ended)"}


def main(ws: Path, sessions: list[Path], session_check: bool) -> None:
    check_workspace(ws)
    check_sessions(sessions) if not session_check else None
    seen: dict[str, bytes] = {}
    starts: dict[str, tuple] = {}
    for i, s in enumerate(sessions):
        print(f"{s}: {unpack_session(s, ws, i == 0, seen, starts)} files")
    check_runs(ws)
    plan = (ws / "plans/decisive.yaml").read_text()
    plan_seeds = [int(x) for x in re.search(r"(?m)^    seeds: \[([0-9, ]+)\]", plan).group(1).split(",")]
    seeds = sorted(int(x) for x in re.findall(r"\d+", " ".join(s.name for s in sessions)))
    if not session_check and seeds != plan_seeds[:len(seeds)]:
        raise SystemExit(f"the sessions' seeds {seeds} are not the plan's leading seeds {plan_seeds}")
    params = (HERE / sessions[0].name / "params.yaml").read_text()
    params, k = re.subn(r"(?m)^(  seeds: )\[[0-9, ]*\]", rf"\g<1>[{', '.join(map(str, seeds))}]", params)
    if k != 1:
        raise SystemExit(f"{sessions[0].name}/params.yaml: no single train.seeds line")
    (ws / "params.yaml").write_text(params)
    shutil.copy(ws / "plans/decisive.yaml", ws / "analysis.yaml")
    timing = plan_timing(starts)  # before the verdict is computed: a run older than the plan has none
    if timing["runs_started_before_the_plan"]:
        raise SystemExit(f"runs whose session started before the plan's last change {timing['last_commit']}: "
                         f"{timing['runs_started_before_the_plan']}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ws)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    subprocess.run([sys.executable, "stages/aggregate.py"], cwd=ws, check=True, env=env)
    code = json.loads((ws / "metrics/summary.json").read_text())["plan"]["code_sha256"]
    for s in sessions:
        device = json.loads((HERE / s.name / "device_summary.json").read_text())["plan"]["code_sha256"]
        if device != code:
            raise SystemExit(f"the verdicts' code here ({code}) is not {s.name}'s on the device ({device})")
    (ws / "metrics/plan_timing.json").write_text(json.dumps(timing, indent=1) + "\n")
    print(json.dumps(timing, indent=1))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--session-check"]
    if len(args) < 2:
        raise SystemExit(__doc__)
    main(Path(args[0]), [Path(p) for p in args[1:]], "--session-check" in sys.argv)
