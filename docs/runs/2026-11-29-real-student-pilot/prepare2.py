"""Round 2's workspaces (README "Round 2"), built on the CPU before the device calls: the commit's
tree (git archive HEAD) with round 1's built inputs (the substrate, pool and pairs of its mix-0 and
pool workspaces), params rendered by `vgrout preset` with the edits below, each packed as a tar the
device calls unpack. The easy workspace's split: 20 of the 68 easy training candidates held out
(seeded draw, easy_split.json), the other 48 to train on; the pool workspace tests on the same 20.
Env: REPO (the checkout), WORK (a scratch folder), MIX0_WS and POOL_WS (round 1's workspaces).
  python prepare2.py"""
import json, os, random, shutil, subprocess, sys, yaml
from pathlib import Path
D = Path(os.environ["WORK"]); MAIN = Path(os.environ["REPO"])
tree = D / "tree"
if tree.exists(): shutil.rmtree(tree)
tree.mkdir(parents=True)
subprocess.run(f"git -C {MAIN} archive HEAD | tar -x -C {tree}", shell=True, check=True)

def ws(name, src, preset, edit, train_rows=None, test_rows=None):
    w = D / name
    if w.exists(): shutil.rmtree(w)
    shutil.copytree(tree, w, ignore=shutil.ignore_patterns("tests", "docs"))
    (w / "docs/runs/2026-11-29-real-student-pilot").mkdir(parents=True)
    shutil.copy(tree / "docs/runs/sandbox_on_device.sh", w / "docs/runs/")
    for sub in ("data/substrate", "data/pool", "runs/pairs"):
        if (src / sub).exists():
            shutil.rmtree(w / sub, ignore_errors=True); shutil.copytree(src / sub, w / sub)
    # data/pairs: the tree's pair files (the Qwen-length fix), from which round 1's runs/pairs was built
    if (src / "data/rh-s65-teacher-pool.jsonl.gz").exists():
        shutil.copy(src / "data/rh-s65-teacher-pool.jsonl.gz", w / "data/")
    for f in ("pilot.yaml", "pilot_pool.yaml"):
        shutil.copy(MAIN / "docs/runs/2026-11-29-real-student-pilot" / f, w / "presets" / f)
    subprocess.run([sys.executable, "-m", "vgrout.cli", "preset", preset], cwd=w, check=True,
                   env={"PYTHONPATH": str(w), "PATH": "/usr/bin:/bin"})
    p = yaml.safe_load((w / "params.yaml").read_text())
    for dotted, v in edit.items():
        d = p; ks = dotted.split(".")
        for k in ks[:-1]: d = d[k]
        assert ks[-1] in d, dotted
        d[ks[-1]] = v
    (w / "params.yaml").write_text("# round-2 pilot workspace " + name + ": `vgrout preset " + preset + "` with "
                                   + json.dumps(edit) + "\n" + yaml.safe_dump(p, sort_keys=False))
    for split, rows in (("train", train_rows), ("test", test_rows)):
        if rows is not None:
            (w / f"data/substrate/{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    subprocess.run(f"tar -czf {D}/{name}.tgz -C {w} .", shell=True, check=True)
    print(name, subprocess.run(f"du -sh {D}/{name}.tgz", shell=True, capture_output=True, text=True).stdout.strip())

P1, P2 = Path(os.environ["MIX0_WS"]), Path(os.environ["POOL_WS"])
rows = [json.loads(l) for l in open(P1 / "data/substrate/train.jsonl")]
easy = [r for r in rows if r["meta"]["difficulty"] == "easy"]
held = sorted(random.Random(49).sample(range(len(easy)), 20))
heldout = [easy[i] for i in held]; easy_train = [r for i, r in enumerate(easy) if i not in held]
json.dump({"heldout_easy": [r["id"] for r in heldout], "train_easy": [r["id"] for r in easy_train]},
          open(D / "easy_split.json", "w"), indent=1)
print("held-out modes", sorted(r["mode"] for r in heldout))
common = {"train.steps": 30, "train.ckpt_every": 10, "eval.n_samples": 8, "eval.curve_n_samples": 4}
# A: the round-1 mix-0 workspace unchanged but for 2 steps (the NaN at step 1)
ws("wsA", P1, "pilot", {"train.steps": 2, "train.ckpt_every": 1})
# E: mix 0 on the easy problems (48), the 20 held-out easy problems as the test split
ws("wsE", P1, "pilot", {**common, "substrate.difficulties": ["easy"]}, easy_train, heldout)
# P: the recorded pool at mix 0.25 (round 1's pool workspace), the same held-out easy test split
ws("wsP", P2, "pilot_pool", common, None, heldout)
