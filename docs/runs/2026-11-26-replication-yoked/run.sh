#!/usr/bin/env bash
# The replication preset's runs that the 2026-11-26 run on one H100 (../2026-11-26-replication-h100)
# left out, on its substrate, pairs and teacher pool, so that they pair by seed and problem with its
# runs: haar, and the yoked arms per arm they copy (gate.yoke_to: routeA, tgate, heldout):
# placebo_tgate, placebo_heldout, random_routeA, random_tgate, random_heldout; seeds 0-4.
# The yoked runs copy the counts in that run's committed step logs (routeA, tgate, heldout).
# Run from the repository root, in the background:
#   STASH=/tmp/stash setsid nohup bash docs/runs/2026-11-26-replication-yoked/run.sh > /tmp/run.out 2>&1 &
# $STASH holds part.00 ... part.10 (the GGUF and the Python packages the machine lacks, as for
# ../2026-11-26-a4-long/run.sh), bw/ (bubblewrap), and up2.tgz: data/substrate, data/pool and
# runs/pairs made on a CPU from the preset's params (their md5s are those of that run's dvc.lock,
# checked below). Poll with poll.sh beside this file.
set -uo pipefail
STASH=${STASH:-/tmp/stash}; W=${W:-/tmp/rep}; SRC=$(pwd); P=${P:-15}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
. "$SRC/docs/runs/sandbox_on_device.sh"  # bubblewrap where carried, else rlimits only
mkdir -p /tmp/pack ~/.cache/vgrout/gguf
cat "$STASH"/part.* | tar -C /tmp/pack -xzf - || { echo "FAILED: unpacking"; exit 1; }
mv /tmp/pack/SmolLM2-135M-Instruct.Q4_1.gguf ~/.cache/vgrout/gguf/
export PYTHONPATH="$W:/tmp/pack/site"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
rm -rf "$W" && mkdir -p "$W"
tar -C "$SRC" --exclude=./.devcarry -cf - . | tar -C "$W" -xf -
cd "$W"
rm -rf metrics/runs metrics/vact metrics/artifacts
python3 -m vgrout.cli preset replication
tar -xzf "$STASH/up2.tgz"
OLD=docs/runs/2026-11-26-replication-h100
python3 - <<'E' || { echo "FAILED: inputs differ from the earlier run's"; exit 1; }
import hashlib, yaml
lock = yaml.safe_load(open("docs/runs/2026-11-26-replication-h100/dvc.lock"))["stages"]
want = {o["path"]: o["md5"] for s in ("substrate", "pairs", "teacher_pool") for o in lock[s]["outs"]}
for path in ("data/substrate/train.jsonl", "data/substrate/test.jsonl", "runs/pairs/pairs.json", "data/pool/pool.jsonl"):
    got = hashlib.md5(open(path, "rb").read()).hexdigest()
    print(path, got, "ok" if got == want[path] else f"DIFFERS from {want[path]}")
    assert got == want[path]
E
for a in routeA tgate heldout; do for s in 0 1 2 3 4; do
  mkdir -p metrics/runs/$a-$s && gunzip -c $OLD/metrics/runs/$a-$s/steps.jsonl.gz > metrics/runs/$a-$s/steps.jsonl
done; done
date -u +"upstream start %FT%TZ"
python3 stages/model.py > model.log 2>&1 || { echo "FAILED: model"; exit 1; }
for s in 0 1 2 3 4; do python3 stages/extract_vact.py $s > vact-$s.log 2>&1 & done; wait
date -u +"runs start %FT%TZ"
mkdir -p logs
{ for s in 0 1 2 3 4; do echo "train.py haar $s|eval.py haar $s|haar-$s"; done
  for to in tgate heldout; do for s in 0 1 2 3 4; do
    echo "train_yoked.py placebo $to $s|eval_yoked.py placebo $to $s|placebo_$to-$s"; done; done
  for to in routeA tgate heldout; do for s in 0 1 2 3 4; do
    echo "train_yoked.py random $to $s|eval_yoked.py random $to $s|random_$to-$s"; done; done
} | xargs -P "$P" -I{} bash -c 'IFS="|" read -r t e r <<< "{}"; s=$SECONDS
  python3 stages/$t > logs/$r.train.log 2>&1 && python3 stages/$e > logs/$r.eval.log 2>&1 \
    && echo "done $r $((SECONDS - s))s" || echo "RUN FAILED $r"'
date -u +"runs done %FT%TZ"
echo ALL DONE
