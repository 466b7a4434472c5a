"""The pilot's workspaces from round 3 on (prepare3.py, prepare4.py import it): on import, the
commit's tree (git archive HEAD) unpacked under WORK; `ws` copies it with round 1's built inputs
(substrate, pool, pairs), renders params by `vgrout preset` with edits, and packs it as a tar; the
round-2 easy split's rows (`easy_train`, `heldout`).
Env: REPO (the checkout), WORK (a scratch folder), MIX0_WS and POOL_WS (round 1's workspaces)."""
import json, os, shutil, subprocess, sys, yaml
from pathlib import Path
D = Path(os.environ["WORK"]); MAIN = Path(os.environ["REPO"])
REC = MAIN / "docs/runs/2026-11-29-real-student-pilot"
tree = D / "tree"
if tree.exists(): shutil.rmtree(tree)
tree.mkdir(parents=True)
subprocess.run(f"git -C {MAIN} archive HEAD | tar -x -C {tree}", shell=True, check=True)

def ws(name, src, preset, edit, train_rows=None, test_rows=None, round_="3"):
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
    (w / "params.yaml").write_text(f"# round-{round_} pilot workspace " + name + ": `vgrout preset " + preset + "` with "
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
