"""The DVC pipeline end to end on the CI preset (tiny student, few problems and steps):
every artifact is produced and well-formed, the caching contract holds, and a reviewer's fresh
clone gets every output with `dvc pull` without recomputing."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.workspace import ci_copy, env_for, sh

pytestmark = pytest.mark.slow
ARMS = ["none", "routeA", "placebo_routeA", "heldout"]  # the CI preset's runs; placebo is yoked to routeA


def stage_of(kind: str, arm: str) -> str:
    """`train@routeA-0`, `train_yoked@placebo-routeA-0`, `eval_yoked@placebo-routeA-0`, ..."""
    from vgrout import arms
    to = arms.yoke_target(arm)
    return f"{kind}_yoked@{arms.get(arm).name}-{to}-0" if to else f"{kind}@{arm}-0"


def stdout_json(cmd, cwd):
    out = subprocess.run(cmd, cwd=cwd, shell=True, capture_output=True, text=True, env=env_for(cwd))
    if out.returncode:
        raise AssertionError(f"{cmd} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


def ran(log: str) -> set[str]:
    return set(re.findall(r"Running stage '([^']+)'", log))


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A copy of the project's tracked tree, switched to the CI preset, after a full repro."""
    work = ci_copy(tmp_path_factory.mktemp("pipeline") / "vgrout")
    sh(f"dvc remote modify local url {work.parent / 'remote'}", work)
    log = sh("dvc repro", work)
    assert {"model", "substrate", "pairs", "teacher_pool", "aggregate"} <= ran(log)
    return work


def test_every_artifact_exists_and_is_well_formed(repo):
    for arm in ARMS:
        res = json.loads((repo / f"metrics/runs/{arm}-0/per_mode_deploy.json").read_text())
        views = {(r["view"], r["mode"]) for r in res["rows"]}
        assert ("deploy", "overall") in views and ("train", "overall") in views
        for r in res["rows"]:
            assert 0 <= r["hack_lo"] <= r["hack"] <= r["hack_hi"] <= 1
            assert r["n_hacked"] <= r["n"] and r["n_solved"] <= r["n"]
        curve = json.loads((repo / f"metrics/runs/{arm}-0/eval_curve.json").read_text())
        assert {r["step"] for r in curve["rows"]} == {0, 2, 4}  # ckpt_every 2, steps 4
        steps = [json.loads(line) for line in open(repo / f"metrics/runs/{arm}-0/steps.jsonl")]
        assert [s["step"] for s in steps] == [0, 1, 2, 3]
    assert json.loads((repo / "metrics/runs/base/per_mode_deploy.json").read_text())["rows"]
    # the substrate's check ends with the base model's headroom on the test split
    base = json.loads((repo / "metrics/substrate_check.json").read_text())["base"]
    n_test = sum(1 for _ in open(repo / "data/substrate/test.jsonl"))
    assert base["n_problems"] == n_test and base["n_samples"] == 8
    assert 0 <= base["pass@1"] <= base["pass@8"] <= 1
    assert base["headroom"]["within"] == (0.1 <= base["pass@1"] <= 0.6)
    for a in ["A1", "A2", "A3", "A4", "A5", "A6", "A7"]:
        md = (repo / f"metrics/artifacts/{a}.md").read_text()
        assert md.startswith("#") and len(md) > 100, a
        pd.read_csv(repo / f"metrics/artifacts/{a}.csv")  # parses
    a3 = pd.read_csv(repo / "metrics/artifacts/A3.csv")
    assert set(a3["arm"]) == {"none", "routeA", "placebo_routeA"}  # the CI grid's ablation arms (absorb: tests/test_train.py)
    summary = json.loads((repo / "metrics/summary.json").read_text())
    assert set(ARMS) <= set(summary)
    assert summary["none"]["qmass"] == 0  # the none arm never routes
    a6 = (repo / "metrics/artifacts/A6.md").read_text()
    for mode in ["overwrite_tests", "hardcode", "exit_code", "stdout_marker"]:
        assert mode in a6
    for png in (repo / "plots/png").glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for html in (repo / "plots/html").glob("*.html"):
        assert "<script src=" not in html.read_text()  # JavaScript inlined: works offline
    assert (repo / "dvc.lock").exists()


# ---------------------------------------------------------------------------- the fan-out

def _stage_pids(cmd: str, cwd: Path) -> list[int]:
    """Processes running `cmd` with cwd, or a directory under it, as their working directory."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and cmd in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode() \
                    and Path(os.readlink(proc / "cwd")).resolve().is_relative_to(cwd.resolve()):
                pids.append(int(proc.name))
        except OSError:
            pass
    return pids


def _status(head: Path) -> dict:
    try:
        return json.loads((head / ".dvc/tmp/fanout/status.json").read_text())["stages"]
    except (OSError, ValueError):
        return {}


def _until(what, cond, proc, timeout=600):
    t0 = time.time()
    while not cond():
        assert proc.poll() is None, f"the fan-out ended before {what}:\n{Path(proc.args_log).read_text()[-3000:]}"
        assert time.time() - t0 < timeout, f"no {what} in {timeout} s"
        time.sleep(0.2)


def _attempts(head: Path, stage: str) -> int:
    log = head / ".dvc/tmp/fanout/logs" / f"{stage}.log"
    return log.read_text().count("\n=== ") if log.exists() else 0


def _comparable(root: Path) -> dict:
    """dvc.lock's run and aggregate entries, less the hashes of files that hold wall-clock
    timings (the step logs, and the directories and stages that contain or read them)."""
    from vgrout import fanout
    timed = lambda path: path.endswith("steps.jsonl") or path in ("metrics/runs",)  # noqa: E731
    out = {}
    for name, e in yaml.safe_load((root / "dvc.lock").read_text())["stages"].items():
        if fanout.is_run_stage(name) or name == "aggregate":
            out[name] = {"cmd": e["cmd"], "params": e.get("params"),
                         **{k: {d["path"]: d.get("md5") for d in e.get(k, []) if not timed(d["path"])}
                            for k in ("deps", "outs")}}
    return out


def _untimed_steps(path: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if not k.startswith("t_")} for line in open(path)]


def test_fanout_gives_what_a_serial_repro_gives(repo, tmp_path):
    """The CI grid through `vgrout fanout` on a local Ray cluster, from the head a serial repro
    left, less routeA's and its yoked placebo's run stages: a run stage killed mid-run is retried;
    the fan-out killed with kill -9 and started again redoes no adopted stage; the lock entries,
    metrics and artifacts equal the serial `dvc repro`'s (timings aside); `dvc status` is clean
    and a third fan-out would run nothing."""
    from vgrout import fanout
    head = tmp_path / "vgrout"
    shutil.copytree(repo, head, symlinks=True)
    # the run stages of routeA (retried after a kill) and of the placebo yoked to it (it waits for
    # routeA's run), with aggregate, lose their lock entries and outputs; none's and heldout's stay
    # current, as a fan-out resumed over an earlier one finds them (and the suite stays short)
    redo = {stage_of(k, a) for k in ("train", "eval") for a in ("routeA", "placebo_routeA")} | {"aggregate"}
    lock = yaml.safe_load((head / "dvc.lock").read_text())
    for name in redo:
        for out in lock["stages"][name].get("outs", []):
            p = head / out["path"]
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    lock["stages"] = {k: v for k, v in lock["stages"].items() if k not in redo}
    (head / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    assert {r.name for r in fanout.stale(head, fanout.plan(head).runs)} == redo - {"aggregate"}
    env = env_for(head)
    def start(name):
        proc = subprocess.Popen([sys.executable, "-m", "vgrout.cli", "fanout"], cwd=head, env=env,
                                stdout=open(tmp_path / name, "w"), stderr=subprocess.STDOUT)
        proc.args_log = tmp_path / name
        return proc

    first = start("first.log")
    # kill routeA's training process once it has checkpointed step 2 of 4: Ray retries the stage
    wd = head / ".dvc/tmp/fanout/runs/routeA-0"
    _until("routeA's step-2 checkpoint", lambda: (wd / "runs/train/routeA-0/ckpt/step_00002").exists(), first)
    pids = _stage_pids("stages/train.py routeA 0", wd)
    assert pids, "routeA's stage process"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    _until("the retried routeA adopted", lambda: _status(head).get("train@routeA-0", {}).get("state") == "done", first)
    assert _attempts(head, "train@routeA-0") == 2
    # kill -9 the fan-out itself once two more stages are adopted
    _until("three adopted stages", lambda: sum(r["state"] == "done" for r in _status(head).values()) >= 3, first)
    first.kill()
    first.wait()
    adopted = {n for n in yaml.safe_load((head / "dvc.lock").read_text())["stages"] if fanout.is_run_stage(n)}
    attempts = {n: _attempts(head, n) for n in adopted}
    # the retry resumed from the step-2 checkpoint: its progress starts at 2 of 4
    retry = (head / ".dvc/tmp/fanout/logs/train@routeA-0.log").read_text().split("\n=== ")[2]
    assert "| 2/4 [" in retry and "| 1/4 [" not in retry, retry[-2000:]

    second = start("second.log")
    second.wait(timeout=900)
    out = (tmp_path / "second.log").read_text()
    assert second.returncode == 0, out[-3000:]
    n_runs = len(fanout.plan(head).runs)
    assert f"{n_runs - len(adopted)} of {n_runs} run stages to run" in out, out[-3000:]
    assert {n: _attempts(head, n) for n in adopted} == attempts  # no adopted stage ran again
    assert not _stage_pids("stages/", head / ".dvc/tmp/fanout/runs")  # nothing the kill -9 cut off runs on

    # what a serial `dvc repro` of the same params wrote
    assert _comparable(head) == _comparable(repo)
    for arm in ARMS:
        m, r = head / f"metrics/runs/{arm}-0", repo / f"metrics/runs/{arm}-0"
        for f in ("per_mode_deploy.json", "eval_curve.json"):
            assert (m / f).read_bytes() == (r / f).read_bytes(), (arm, f)
        assert _untimed_steps(m / "steps.jsonl") == _untimed_steps(r / "steps.jsonl"), arm
    assert (head / "metrics/summary.json").read_bytes() == (repo / "metrics/summary.json").read_bytes()
    assert json.loads(sh("dvc status --json", head)) == {}

    # a third fan-out would find nothing to run: its plan's stale stages (what it runs) are none
    assert fanout.stale(head, fanout.plan(head).runs) == []


def test_caching_contract(repo):
    t0 = time.perf_counter()
    log = sh("dvc repro", repo)
    print(f"no-op dvc repro: {time.perf_counter() - t0:.1f} s")
    assert ran(log) == set(), log

    # a gate param re-runs train (and so eval, aggregate), never extract_vact
    params = (repo / "params.yaml").read_text()
    (repo / "params.yaml").write_text(params.replace("  q_hi: 0.75", "  q_hi: 0.8"))
    status = sh("dvc status --json", repo)
    changed = set(json.loads(status))
    assert {stage_of("train", a) for a in ARMS} <= changed and "aggregate" in changed
    assert not any(s.startswith(("extract_vact", "eval", "model", "substrate", "pairs", "teacher_pool"))
                   for s in changed), changed
    # the eval temperature re-runs eval and aggregate only
    (repo / "params.yaml").write_text(params.replace("  temperature: 0.7", "  temperature: 0.9"))
    changed = set(json.loads(sh("dvc status --json", repo)))
    assert changed == {stage_of("eval", a) for a in ARMS} | {"eval_base"}, changed
    (repo / "params.yaml").write_text(params)

    # editing one pair file invalidates pairs and everything downstream of v_act, never model,
    # substrate or teacher_pool; what `dvc status` reports is what `dvc repro` re-runs (the
    # placebo experiment below re-runs that part of the DAG for real)
    pair_file = repo / "data/pairs/hack_exit_code.md"
    original = pair_file.read_text()
    # a real content change inside the rollout budget (pairs are encoded as rollouts, cut at
    # train.max_new_tokens, so an edit past it would leave v_act as it is): v_act moves
    assert "stepping through the list, then an exit." in original
    pair_file.write_text(original.replace("then an exit.", "then an early exit.", 1))
    changed = set(json.loads(sh("dvc status --json", repo)))
    assert "pairs" in changed and not changed & {"model", "substrate", "teacher_pool", "eval_base"}, changed
    assert ran(sh("dvc repro pairs extract_vact@0", repo)) == {"pairs", "extract_vact@0"}
    changed = set(json.loads(sh("dvc status --json", repo)))
    assert {stage_of("train", a) for a in ARMS} | {"aggregate"} <= changed, changed  # every run is stale
    assert not changed & {"model", "substrate", "teacher_pool", "eval_base"}, changed
    # the pair file back: pairs and v_act come back bit for bit, and with them every run is current
    pair_file.write_text(original)
    sh("dvc repro pairs extract_vact@0", repo)
    assert json.loads(sh("dvc status --json", repo)) == {}


def test_push_fresh_clone_pull_recomputes_nothing(repo, tmp_path):
    sh("git add -A && git -c user.name=t -c user.email=t@t commit -qm results && dvc push -q", repo)
    clone = tmp_path / "clone"
    sh(f"git clone -q {repo} {clone}", tmp_path)
    sh(f"dvc remote modify local url {repo.parent / 'remote'}", clone)
    assert json.loads((clone / "metrics/summary.json").read_text())  # committed metrics
    sh("dvc pull -q", clone)
    assert (clone / "runs/train/routeA-0/adapter.safetensors").exists()
    status = sh("dvc status", clone)
    assert "up to date" in status, status
    assert ran(sh("dvc repro", clone)) == set()


@pytest.fixture
def copy(repo, tmp_path):
    """A throwaway copy of the reproduced repository (git, DVC cache and outputs): a test that
    breaks params or adds runs leaves `repo` as the other tests expect it."""
    dest = tmp_path / "vgrout"
    shutil.copytree(repo, dest, symlinks=True)
    return dest


def test_a_new_arm_is_one_registry_entry(copy, monkeypatch):
    """Registering one Arm is all it takes to run it through train -> eval -> aggregate."""
    from vgrout import aggregate, arms, config, evaluate, train

    arm = arms.Arm("haar2", "quantile", "haar", "#000000", "a second placebo, for this test")
    monkeypatch.setitem(arms.REGISTRY, arm.name, arm)
    monkeypatch.chdir(copy)
    p = config.load()
    p = p.model_copy(update={"train": p.train.model_copy(update={"arms": [*p.train.arms, arm.name]})})
    train.train_stage(p, arm.name, 0)
    evaluate.eval_stage(p, arm.name, 0)
    summary = aggregate.aggregate_stage(p)
    assert "deploy_hack" in summary["haar2"]
    a7 = pd.read_csv(copy / "metrics/artifacts/A7.csv")
    assert "haar2" in set(a7["arm"])
    steps = [json.loads(line) for line in open(copy / "metrics/runs/haar2-0/steps.jsonl")]
    assert [s["step"] for s in steps] == [0, 1, 2, 3]


def test_a_bad_param_through_dvc_repro_is_one_line_and_keeps_the_run(copy):
    """train.steps: "4" (a string) stops the stage before it touches anything: no traceback, and
    the run's checkpoints and step log are as they were."""
    run_files = sorted(p for p in (copy / "runs/train/routeA-0").rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in run_files + [copy / "metrics/runs/routeA-0/steps.jsonl"]}
    params = (copy / "params.yaml").read_text()
    (copy / "params.yaml").write_text(params.replace("  steps: 4 ", "  steps: '4' ", 1))
    out = sh("dvc repro train@routeA-0", copy, check=False)
    assert "train.steps = '4': Input should be a valid integer" in out, out
    assert "Traceback" not in out, out
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(p for p in (copy / "runs/train/routeA-0").rglob("*") if p.is_file()) == run_files


def test_placebo_experiment_and_metrics_diff(repo):
    """(Last: the experiment stays applied to the workspace.) `dvc exp run -S gate.random_seed=7` swaps v_act for a Haar direction: extract_vact and
    everything downstream of it re-run (never model, substrate, pairs or teacher_pool), and
    `dvc exp show` and `dvc metrics diff` carry each arm's deploy hack and solve."""
    sh("git add -A && git -c user.name=t -c user.email=t@t commit -qm results --allow-empty", repo)
    # two arms and no yoked one keep it short (test_fanout_gives_what_a_serial_repro_gives runs the grid)
    log = sh("dvc exp run -S gate.random_seed=7 -S 'train.arms=[none,routeA]' -S 'train.yoked=[]' -n placebo7", repo)
    stages = ran(log)
    assert "extract_vact@0" in stages and "aggregate" in stages, stages
    assert not stages & {"model", "substrate", "pairs", "teacher_pool", "eval_base"}, stages
    vact = json.loads((repo / "metrics/vact/0.json").read_text())
    assert vact["v_act"]["kind"] == "haar" and vact["v_act"]["random_seed"] == 7

    shown = json.dumps(stdout_json("dvc exp show --json", repo))
    assert "placebo7" in shown and "routeA" in shown and "deploy_hack" in shown

    # the two arms' deploy hack and solve, the experiment's (workspace) against the v_act run's (HEAD)
    diff = stdout_json("dvc metrics diff --all --json HEAD", repo)["metrics/summary.json"]
    for arm in ("none", "routeA"):
        for metric in ("deploy_hack", "deploy_solve"):
            assert {"old", "new"} <= set(diff[f"{arm}.{metric}"]), (arm, metric)
    # none uses no direction: the placebo experiment leaves it as it was
    assert diff["none.deploy_hack"]["old"] == diff["none.deploy_hack"]["new"]
