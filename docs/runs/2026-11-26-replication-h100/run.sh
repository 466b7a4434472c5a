#!/usr/bin/env bash
# The replication preset under the schema's current defaults (gate.teacher_zone gate,
# train.baseline students), five seeds, run with the fan-out on one GPU. Arms: none, routeA,
# absorb, heldout, and placebo yoked to routeA (the arms of the run lost on 2026-11-25); the
# preset's haar, random and tgate arms are left out so that the run fits one machine's 30 minutes.
# Run from the repository root, in the background:
#   setsid nohup bash docs/runs/2026-11-26-replication-h100/run.sh > /tmp/run.out 2>&1 &
# $STASH holds part.0 ... part.5: one gzip tar, split, of the GGUF and of the Python packages
# the machine lacks (DVC, DVCLive, Ray and their needs), installed with
# `pip install --no-deps --target site` from their wheels. Where $STASH/bw holds bubblewrap (the
# bwrap binary and the libraries it links, from a Debian 12 machine), the grader runs isolated.
# Poll with ../2026-11-25-replication-h100x2/poll.sh.
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
python3 -m vgrout.cli preset replication
python3 - <<'E'
import yaml
p = yaml.safe_load(open("params.yaml"))
p["train"].update(arms=["none", "routeA", "absorb", "heldout"], yoked=["placebo"])
yaml.safe_dump(p, open("params.yaml", "w"), sort_keys=False)
E
git init -q && git add -A && git -c user.name=run -c user.email=run@localhost commit -qm "the run's tree"
echo fanout.log >> .git/info/exclude  # the log grows during the run: outside the fan-out's inputs
date -u +"fanout start %FT%TZ"
{ time python3 -m vgrout.cli fanout --no-rest ; } > fanout.log 2>&1 || echo "FANOUT FAILED (see fanout.log)"
date -u +"fanout done %FT%TZ"
tail -c 3000 fanout.log
echo ALL DONE
