# Round 3, device call D3: (i) the cuDNN cause confirmed on the GPU: the synthetic repro and the real
# layer-8 q/k/v (.devcarry/nanprobe/gpu.py, carried), and round 1's mix-0 workspace replayed for its 2
# steps (wsA3: NaN at step 1 in rounds 1 and 2); (ii) three `none` runs packed on the one GPU: mix 0
# on the easy problems at lr 3e-4 (wsE3) and 1e-4 (wsE3L), the real preset (wsP3); (iii) the gate
# offline beside them (bench.pilot gate, 400 rows a set). Runs stopped by the call's LIMIT resume
# from their last checkpoint in D4 (the machine stays warm between back-to-back calls).
set -o pipefail
LIMIT=${1:-570}; STASH=/tmp/stash
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( LIMIT - ($(date +%s) - t0) )); }
quiet() { grep -v "it/s\]\|s/it\]\|it\/s$"; }
REC=$(pwd)/docs/runs/2026-11-29-real-student-pilot
(python .devcarry/nanprobe/gpu.py > $OUT/cudnn_probe.log 2>&1; echo "[$(( $(date +%s) - t0 )) s] cudnn probe rc $?") &
for w in wsA3 wsE3 wsE3L wsP3; do [ -d /tmp/$w ] || { mkdir -p /tmp/$w && tar -xzf $STASH/$w.tgz -C /tmp/$w; }; done
cd /tmp/wsA3 && . $REC/device2_setup.sh || exit 1
python -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'cudnn sdp', torch.backends.cuda.cudnn_sdp_enabled())"
python stages/model.py 2>&1 | quiet | tail -2; stamp "0.5B built"
python stages/extract_vact.py 0 2>&1 | quiet | tail -2; stamp "v_act, v_grad"
for w in wsE3 wsE3L wsP3; do mkdir -p /tmp/$w/models /tmp/$w/runs && cp -r models/student /tmp/$w/models/ && cp -r runs/vact /tmp/$w/runs/; done
(nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -lms 2000 > /tmp/smi_d3.csv &)
for w in wsE3 wsE3L wsP3; do
  (cd /tmp/$w && export PYTHONPATH=/tmp/site:/tmp/$w && timeout $(( $(left) - 25 )) python stages/train.py none 0 > train_d3.log 2>&1; echo "[$(( $(date +%s) - t0 )) s] train $w rc $?") &
  sleep 5
done
(timeout 200 python stages/train.py none 0 > train.log 2>&1; echo "[$(( $(date +%s) - t0 )) s] replay wsA3 rc $?"; grep -i "nan\|step" train.log | quiet | tail -4) &
(cd /tmp/wsP3 && export PYTHONPATH=/tmp/site:/tmp/wsP3 && timeout $(( $(left) - 25 )) python -m bench.pilot gate models/student runs/vact/0 $OUT --pool data/rh-s65-teacher-pool.jsonl.gz --graded data/pool/pool.jsonl --graded-problems data/substrate/train.jsonl --own $REC/qwen05_test_samples.jsonl.gz --own $REC/qwen05_train_samples.jsonl.gz --max-rows 400 > $OUT/gate.log 2>&1; echo "[$(( $(date +%s) - t0 )) s] gate rc $?") &
wait
pkill -f "nvidia-smi --query-gpu" || true
gzip -c /tmp/smi_d3.csv > $OUT/smi_d3.csv.gz
for w in wsA3 wsE3 wsE3L wsP3; do
  tar -czf $OUT/$w.tgz -C /tmp/$w metrics/runs params.yaml $(cd /tmp/$w && ls *.log runs/train/none-0/rollouts.jsonl runs/train/none-0/steps.jsonl 2>/dev/null)
  echo "== $w"; ls /tmp/$w/runs/train/none-0/ckpt 2>/dev/null | tr '\n' ' '; echo; tail -c 300 /tmp/$w/train*.log; echo
done
cat $OUT/cudnn_probe.log; grep -v "it/s\]" $OUT/gate.log | tail -8
