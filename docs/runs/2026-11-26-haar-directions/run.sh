#!/usr/bin/env bash
# More Haar directions per seed for the placebos yoked to routeA and to tgate, at the replication
# preset's settings, on the inputs of ../2026-11-26-replication-h100 (as ../2026-11-26-replication-yoked
# does): gate.placebo_seed 101 and 201 (Haar seeds 101 + seed, 201 + seed) beside the 1 those runs used,
# seeds 0-4: 20 runs, each copying the counts in the earlier run's committed step logs.
# Run from the repository root, in the background:
#   STASH=/tmp/stash setsid nohup bash docs/runs/2026-11-26-haar-directions/run.sh > /tmp/run.out 2>&1 &
# $STASH as for ../2026-11-26-replication-yoked/run.sh (part.*, bw/, up2.tgz). Poll with
# ../2026-11-26-replication-yoked/poll.sh (it reads /tmp/rep).
set -uo pipefail
STASH=${STASH:-/tmp/stash}; W=${W:-/tmp/rep}; SRC=$(pwd)
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
. "$SRC/docs/runs/sandbox_on_device.sh"  # bubblewrap where carried, else rlimits only
mkdir -p /tmp/pack ~/.cache/vgrout/gguf
cat "$STASH"/part.* | tar -C /tmp/pack -xzf - || { echo "FAILED: unpacking"; exit 1; }
mv /tmp/pack/SmolLM2-135M-Instruct.Q4_1.gguf ~/.cache/vgrout/gguf/
export PYTHONPATH="/tmp/pack/site"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
MEM=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
P=$([ "$MEM" -gt 100000 ] && echo 20 || echo 14)  # runs at once: about 3.6 GiB each
rm -rf "$W" && mkdir -p "$W"
tar -C "$SRC" --exclude=./.devcarry -cf - . | tar -C "$W" -xf -
cd "$W"
rm -rf metrics/runs metrics/vact metrics/artifacts
python3 -m vgrout.cli preset replication
tar -xzf "$STASH/up2.tgz"
python3 - <<'E' || { echo "FAILED: inputs differ from the earlier run's"; exit 1; }
import hashlib, yaml
lock = yaml.safe_load(open("docs/runs/2026-11-26-replication-h100/dvc.lock"))["stages"]
want = {o["path"]: o["md5"] for s in ("substrate", "pairs", "teacher_pool") for o in lock[s]["outs"]}
for path in ("data/substrate/train.jsonl", "data/substrate/test.jsonl", "runs/pairs/pairs.json", "data/pool/pool.jsonl"):
    got = hashlib.md5(open(path, "rb").read()).hexdigest()
    print(path, got, "ok" if got == want[path] else f"DIFFERS from {want[path]}")
    assert got == want[path]
E
for a in routeA tgate; do for s in 0 1 2 3 4; do
  mkdir -p metrics/runs/$a-$s && gunzip -c docs/runs/2026-11-26-replication-h100/metrics/runs/$a-$s/steps.jsonl.gz > metrics/runs/$a-$s/steps.jsonl
done; done
date -u +"upstream start %FT%TZ"
PYTHONPATH="$W:/tmp/pack/site" python3 stages/model.py > model.log 2>&1 || { echo "FAILED: model"; exit 1; }
for s in 0 1 2 3 4; do PYTHONPATH="$W:/tmp/pack/site" python3 stages/extract_vact.py $s > vact-$s.log 2>&1 & done; wait
mkdir -p logs
for ps in 101 201; do  # one tree per placebo seed: the same paths, another Haar direction
  mkdir -p ps$ps && tar -cf - --exclude=./ps101 --exclude=./ps201 --exclude=./logs . | tar -C ps$ps -xf -
  sed -i "s/^  placebo_seed: 1 /  placebo_seed: $ps /" ps$ps/params.yaml
  grep -q "^  placebo_seed: $ps " ps$ps/params.yaml || { echo "FAILED: placebo_seed $ps"; exit 1; }
done
date -u +"runs start %FT%TZ"
{ for ps in 101 201; do for to in routeA tgate; do for s in 0 1 2 3 4; do echo "$ps|$to|$s"; done; done; done; } |
  xargs -P "$P" -I{} bash -c 'IFS="|" read -r ps to s <<< "{}"; t=$SECONDS; cd ps$ps
  export PYTHONPATH="$PWD:/tmp/pack/site"; r=placebo_$to-$s
  python3 stages/train_yoked.py placebo $to $s > ../logs/ps$ps-$r.train.log 2>&1 \
    && python3 stages/eval_yoked.py placebo $to $s > ../logs/ps$ps-$r.eval.log 2>&1 \
    && echo "done ps$ps $r $((SECONDS - t))s" || echo "RUN FAILED ps$ps $r"'
for ps in 101 201; do for d in ps$ps/metrics/runs/placebo_*; do cp -r "$d" "metrics/runs/ps${ps}_$(basename "$d")"; done
  for d in ps$ps/runs/train/placebo_*; do mkdir -p runs/train && cp -r "$d" "runs/train/ps${ps}_$(basename "$d")"; done; done
date -u +"runs done %FT%TZ"
echo ALL DONE
