"""Round 3's workspaces (README "Round 3"), built on the CPU before the device calls, as round 2's
(prepare2.py): the commit's tree (git archive HEAD) with round 1's built inputs (substrate, pool,
pairs), params rendered by `vgrout preset` with the edits below, each packed as a tar.
  wsA3  round 1's mix-0 workspace, 2 steps: its step-1 NaN replayed under the cuDNN switch.
  wsE3  mix 0 on the 48 easy training problems (round 2's split, easy_split.json), lr 3e-4: round 2's
        wsE unchanged but for the code (the NaN and the collapse came at this rate).
  wsE3L the same at lr 1e-4.
  wsP3  `vgrout preset real` unchanged (the teacher-seeded regime; its test split is test_medhard),
        checkpoints every 10 steps, eval 4 samples a test problem (the decisive design's 119 x 4), 1 at each checkpoint.
Env: REPO (the checkout), WORK (a scratch folder), MIX0_WS and POOL_WS (round 1's workspaces).
  python prepare3.py"""
import json, os, shutil, subprocess, sys, yaml
from pathlib import Path
D = Path(os.environ["WORK"]); MAIN = Path(os.environ["REPO"])
REC = MAIN / "docs/runs/2026-11-29-real-student-pilot"
tree = D / "tree"
if tree.exists(): shutil.rmtree(tree)
tree.mkdir(parents=True)
subprocess.run(f"git -C {MAIN} archive HEAD | tar -x -C {tree}", shell=True, check=True)

def ws(name, src, preset, edit, train_rows=None, test_rows=None):
    w = D / name
    if w.exists(): shutil.rmtree(w)
    shutil.copytree(tree, w, ignore=shutil.ignore_patterns("tests", "docs"))
    (w / "docs/runs").mkdir(parents=True)
    shutil.copy(tree / "docs/runs/sandbox_on_device.sh", w / "docs/runs/")
    for sub in ("data/substrate", "data/pool", "runs/pairs"):
        if (src / sub).exists():
            shutil.rmtree(w / sub, ignore_errors=True); shutil.copytree(src / sub, w / sub)
    # the recorded pool's source file (the gate offline reads its labels), from round 1's mix-0 workspace
    shutil.copy(Path(os.environ["MIX0_WS"]) / "data/rh-s65-teacher-pool.jsonl.gz", w / "data/")
    shutil.copy(REC / "pilot.yaml", w / "presets/pilot.yaml")
    subprocess.run([sys.executable, "-m", "vgrout.cli", "preset", preset], cwd=w, check=True,
                   env={"PYTHONPATH": str(w), "PATH": "/usr/bin:/bin"})
    p = yaml.safe_load((w / "params.yaml").read_text())
    for dotted, v in edit.items():
        d = p; ks = dotted.split(".")
        for k in ks[:-1]: d = d[k]
        assert ks[-1] in d, dotted
        d[ks[-1]] = v
    (w / "params.yaml").write_text("# round-3 pilot workspace " + name + ": `vgrout preset " + preset + "` with "
                                   + json.dumps(edit) + "\n" + yaml.safe_dump(p, sort_keys=False))
    for split, rows in (("train", train_rows), ("test", test_rows)):
        if rows is not None:
            (w / f"data/substrate/{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    subprocess.run(f"tar -czf {D}/{name}.tgz -C {w} .", shell=True, check=True)
    print(name, subprocess.run(f"du -sh {D}/{name}.tgz", shell=True, capture_output=True, text=True).stdout.strip())

P1, P2 = Path(os.environ["MIX0_WS"]), Path(os.environ["POOL_WS"])
split = json.loads((REC / "round2/easy_split.json").read_text())
rows = {r["id"]: r for r in map(json.loads, open(P1 / "data/substrate/train.jsonl"))}
heldout = [rows[i] for i in split["heldout_easy"]]; easy_train = [rows[i] for i in split["train_easy"]]
common = {"train.steps": 30, "train.ckpt_every": 10, "eval.n_samples": 8, "eval.curve_n_samples": 4}
ws("wsA3", P1, "pilot", {"train.steps": 2, "train.ckpt_every": 1})
ws("wsE3", P1, "pilot", {**common, "substrate.difficulties": ["easy"]}, easy_train, heldout)
ws("wsE3L", P1, "pilot", {**common, "substrate.difficulties": ["easy"], "train.lr": 1e-4}, easy_train, heldout)
ws("wsP3", P2, "real", {"eval.n_samples": 4, "eval.curve_n_samples": 1})
