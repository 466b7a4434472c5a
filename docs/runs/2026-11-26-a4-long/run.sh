#!/usr/bin/env bash
# A4: the `long` preset (the embedded default trained 144 steps, routeA vs none) on five seeds, with
# the fan-out on one GPU, every run at once. Run from the repository root, in the background:
#   STASH=/tmp/stash setsid nohup bash docs/runs/2026-11-26-a4-long/run.sh > /tmp/run.out 2>&1 &
# $STASH holds part.00 ... part.10: one gzip tar, split, of the GGUF and of the Python packages the
# machine lacks (DVC, DVCLive, Ray and their needs), installed with `pip install --no-deps --target
# site` from their wheels; and bw/, bubblewrap. Poll with poll.sh beside this file.
set -uo pipefail
STASH=${STASH:-/tmp/stash}; W=${W:-/tmp/rep}; SRC=$(pwd)
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
. "$SRC/docs/runs/sandbox_on_device.sh"  # bubblewrap where carried, else rlimits only
mkdir -p /tmp/pack ~/.cache/vgrout/gguf
cat "$STASH"/part.* | tar -C /tmp/pack -xzf - || { echo "FAILED: unpacking"; exit 1; }
mv /tmp/pack/SmolLM2-135M-Instruct.Q4_1.gguf ~/.cache/vgrout/gguf/
export PYTHONPATH="$W:/tmp/pack/site"  # this tree's vgrout (the stages import it), the carried packages
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
python3 -c "import torch, transformers, dvc, ray; print('torch', torch.__version__, 'transformers', transformers.__version__, 'ray', ray.__version__)"

rm -rf "$W" && mkdir -p "$W"
tar -C "$SRC" --exclude=./.devcarry -cf - . | tar -C "$W" -xf -
cd "$W"
rm -rf metrics/runs metrics/vact metrics/artifacts  # the CPU default's, so that only this run's runs are found
python3 -m vgrout.cli preset long
python3 - <<'E'
import yaml
p = yaml.safe_load(open("params.yaml"))
p["train"]["seeds"] = [0, 1, 2, 3, 4]
p["fanout"]["gpu_share"] = 0.0625  # all ten runs (and the base's eval) at once
yaml.safe_dump(p, open("params.yaml", "w"), sort_keys=False)
E
git init -q && git add -A && git -c user.name=run -c user.email=run@localhost commit -qm "the run's tree"
echo fanout.log >> .git/info/exclude  # the log grows during the run: outside the fan-out's inputs
date -u +"fanout start %FT%TZ"
{ time python3 -m vgrout.cli fanout --no-rest ; } > fanout.log 2>&1 || echo "FANOUT FAILED (see fanout.log)"
date -u +"fanout done %FT%TZ"
tail -c 3000 fanout.log
echo ALL DONE
