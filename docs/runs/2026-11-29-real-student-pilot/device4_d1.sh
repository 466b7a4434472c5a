# Round 4, device call D1 (after the pieces of the 1.5B, the wheels, bubblewrap and the workspace
# tars): the 1.5B built once (wsE4) and shared; v_act, v_grad of seeds 0 and 1; three `none` runs of
# the 1.5B packed on the one GPU at lr 1e-4: mix 0 on the easy problems, seeds 0 and 1 (wsE4), and
# the teacher-seeded `real` preset, seed 0 (wsP4); beside them, the base 1.5B's evaluation on each
# workspace's test split (wsE4: the 20 held-out easy problems, 8 samples; wsP4: test_medhard, 4).
# Runs the call's LIMIT stops resume from their last checkpoint in D2 (device4_d2.sh).
set -o pipefail
LIMIT=${1:-570}; STASH=/tmp/stash
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( LIMIT - ($(date +%s) - t0) )); }
quiet() { grep -v "it/s\]\|s/it\]\|it\/s$"; }
REC=$(pwd)/docs/runs/2026-11-29-real-student-pilot
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True  # five processes share the GPU: less fragmentation
for w in wsE4 wsP4; do [ -d /tmp/$w ] || { mkdir -p /tmp/$w && tar -xzf $STASH/$w.tgz -C /tmp/$w; }; done
cd /tmp/wsE4 && . $REC/device2_setup.sh || exit 1
python -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'cudnn sdp', torch.backends.cuda.cudnn_sdp_enabled())"
python stages/model.py 2>&1 | quiet | tail -2; stamp "1.5B built"
for s in 0 1; do (python stages/extract_vact.py $s 2>&1 | quiet | tail -1) & done; wait; stamp "v_act, v_grad of seeds 0, 1"
mkdir -p /tmp/wsP4/models /tmp/wsP4/runs/vact && cp -r models/student /tmp/wsP4/models/ && cp -r runs/vact/0 /tmp/wsP4/runs/vact/
(nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -lms 2000 > /tmp/smi_d1.csv &)
go() {  # workspace, log name, command...: bounded by what is left of the call
  local w=$1 log=$2; shift 2
  (cd /tmp/$w && export PYTHONPATH=/tmp/site:/tmp/$w && timeout $(( $(left) - 20 )) "$@" > $log 2>&1; echo "[$(( $(date +%s) - t0 )) s] $w $log rc $?")
}
go wsE4 train_s0.log python stages/train.py none 0 & sleep 5
go wsE4 train_s1.log python stages/train.py none 1 & sleep 5
go wsP4 train_s0.log python stages/train.py none 0 & sleep 5
go wsE4 eval_base.log python stages/eval.py base &
go wsP4 eval_base.log python stages/eval.py base &
wait
pkill -f "nvidia-smi --query-gpu" || true
gzip -c /tmp/smi_d1.csv > $OUT/smi_d1.csv.gz
for w in wsE4 wsP4; do
  tar -czf $OUT/${w}_d1.tgz -C /tmp/$w metrics/runs params.yaml $(cd /tmp/$w && ls *.log 2>/dev/null)
  echo "== $w"; ls /tmp/$w/runs/train/none-*/ckpt 2>/dev/null | tr '\n' ' '; echo; tail -c 250 /tmp/$w/train_s*.log; echo
done
