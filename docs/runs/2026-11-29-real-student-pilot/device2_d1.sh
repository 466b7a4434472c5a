# Round 2, device call D1: (i) the mix-0 NaN of round 1 replayed for 2 steps in round 1's workspace
# (wsA) through nan_probe.py: with the fast engine, the fast engine under torch's anomaly mode, and
# the reference engine; (ii) the 1.5B's base rates (train candidates 8 a problem, test_medhard 4);
# (iii) the gate offline on the 0.5B (v_act and v_grad extracted first: every workspace's train
# reads them). Each part bounded by what is left of the call's LIMIT seconds; results to $OUT.
set -o pipefail
LIMIT=${1:-560}; STASH=/tmp/stash
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( LIMIT - ($(date +%s) - t0) )); }
quiet() { grep -v "it/s\]\|s/it\]\|it\/s$"; }
REC=$(pwd)/docs/runs/2026-11-29-real-student-pilot
for w in wsA wsE wsP; do [ -d /tmp/$w ] || { mkdir -p /tmp/$w && tar -xzf $STASH/$w.tgz -C /tmp/$w; }; done
cp -r /tmp/wsA /tmp/wsA_ref && sed -i 's/^fast: true/fast: false/' /tmp/wsA_ref/params.yaml
cd /tmp/wsA && . $REC/device2_setup.sh || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
python stages/model.py 2>&1 | quiet && stamp "0.5B built"
python stages/extract_vact.py 0 2>&1 | quiet | tail -3; stamp "v_act, v_grad of the 0.5B (extract_vact)"
for w in wsA_ref wsE wsP; do mkdir -p /tmp/$w/models /tmp/$w/runs && cp -r models/student /tmp/$w/models/ && cp -r runs/vact /tmp/$w/runs/; done
cp -r /tmp/wsA /tmp/wsA_anom
(cd /tmp/wsA && timeout 300 python $REC/nan_probe.py > $OUT/nan_fast.log 2>&1; echo "probe fast rc $?") &
(cd /tmp/wsA_anom && export PYTHONPATH=/tmp/site:/tmp/wsA_anom && timeout 300 python $REC/nan_probe.py --anomaly > $OUT/nan_fast_anomaly.log 2>&1; echo "probe fast anomaly rc $?") &
(cd /tmp/wsA_ref && export PYTHONPATH=/tmp/site:/tmp/wsA_ref && timeout 300 python $REC/nan_probe.py > $OUT/nan_ref.log 2>&1; echo "probe ref rc $?") &
python -c "from pathlib import Path; from vgrout.engine.model import prepare; prepare('qwen2.5-coder-1.5b', Path('/tmp/m15'))" 2>&1 | quiet && stamp "1.5B built"
timeout $(( $(left) - 200 )) python -m bench.pilot rates /tmp/m15 qwen15_train $OUT --splits train 2>&1 | quiet; stamp "1.5B rates train"
wait; stamp "diag done"
for f in nan_fast nan_fast_anomaly nan_ref; do echo "== $f"; grep -v "finite: min\|^mb " $OUT/$f.log | grep -v "it/s\]\|s/it\]" | tail -14; done
timeout $(( $(left) - 120 )) python -m bench.pilot rates /tmp/m15 qwen15_test $OUT --splits test --k 4 2>&1 | quiet; stamp "1.5B rates test"
timeout $(( $(left) - 10 )) bash -c "python -m bench.pilot gate models/student runs/vact/0 $OUT --pool data/rh-s65-teacher-pool.jsonl.gz --graded /tmp/wsP/data/pool/pool.jsonl --graded-problems /tmp/wsP/data/substrate/train.jsonl --own $REC/qwen05_test_samples.jsonl.gz --own $REC/qwen05_train_samples.jsonl.gz" 2>&1 | quiet; stamp "gate offline"
for f in $OUT/*.log; do gzip -f $f; done
