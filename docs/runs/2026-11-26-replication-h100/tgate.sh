#!/usr/bin/env bash
# The tgate arm (routeA's teacher gate alone, every student row absorbed) at this run's settings,
# seeds 0-4, on the substrate, v_act and pairs this run made (carried as $STASH/up_rep.tgz), so its
# runs pair by seed and problem with the replication's. Run from the repository root:
#   setsid nohup bash docs/runs/2026-11-26-replication-h100/tgate.sh > /tmp/run.out 2>&1 &
set -euo pipefail
STASH=${STASH:-/tmp/stash}; W=${W:-/tmp/rep}; SRC=$(pwd)
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
. "$SRC/docs/runs/sandbox_on_device.sh"  # bubblewrap where carried, else rlimits only
mkdir -p /tmp/pack ~/.cache/vgrout/gguf
cat "$STASH"/part.* | tar -C /tmp/pack -xzf -
mv /tmp/pack/SmolLM2-135M-Instruct.Q4_1.gguf ~/.cache/vgrout/gguf/
export PYTHONPATH="$W:/tmp/pack/site"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rm -rf "$W" && mkdir -p "$W"
tar -C "$SRC" --exclude=./.devcarry -cf - . | tar -C "$W" -xf -
cd "$W"
cp docs/runs/2026-11-26-replication-h100/params.yaml params.yaml
python3 - <<'P'
import yaml
p = yaml.safe_load(open("params.yaml"))
p["train"].update(arms=["tgate"], yoked=[])
yaml.safe_dump(p, open("params.yaml", "w"), sort_keys=False)
P
tar -xzf "$STASH/up_rep.tgz"  # data/substrate, runs/vact, runs/pairs of the replication run
date -u +"upstream start %FT%TZ"
python3 stages/model.py
python3 stages/teacher_pool.py
date -u +"train start %FT%TZ"
for s in 0 1 2 3 4; do python3 stages/train.py tgate $s > train-$s.log 2>&1 & done; wait
date -u +"eval start %FT%TZ"
for s in 0 1 2 3 4; do python3 stages/eval.py tgate $s > eval-$s.log 2>&1 & done; wait
date -u +"eval done %FT%TZ"
echo ALL DONE
