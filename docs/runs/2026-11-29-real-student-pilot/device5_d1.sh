# Round 5, device call D1 (after the pieces of the 1.5B, the wheels, bubblewrap and the workspace tar):
# the 1.5B built; v_act and v_grad of seeds 1 and 2; four runs of the decisive preset's settings packed
# on the one GPU (none-1, routeV-1, uniform-1: one batch of the decisive grid; none-2), the base
# 1.5B's evaluation on test_medhard beside them. Runs the call's LIMIT stops resume in D2.
set -o pipefail
LIMIT=${1:-570}; STASH=/tmp/stash
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( LIMIT - ($(date +%s) - t0) )); }
quiet() { grep -v "it/s\]\|s/it\]\|it\/s$"; }
REC=$(pwd)/docs/runs/2026-11-29-real-student-pilot
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True  # five processes share the GPU: less fragmentation
[ -d /tmp/wsD5 ] || { mkdir -p /tmp/wsD5 && tar -xzf $STASH/wsD5.tgz -C /tmp/wsD5; }
cd /tmp/wsD5 && . $REC/device2_setup.sh || exit 1
rm -rf metrics/runs/*  # the default pipeline's metrics the tree carries: not this workspace's
python -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'cudnn sdp', torch.backends.cuda.cudnn_sdp_enabled())"
python stages/model.py 2>&1 | quiet | tail -2; stamp "1.5B built"
for s in 1 2; do (python stages/extract_vact.py $s 2>&1 | quiet | tail -1) & done; wait; stamp "v_act, v_grad of seeds 1, 2"
(nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -lms 2000 > /tmp/smi_d1.csv &)
go() {  # log name, command...: bounded by what is left of the call
  local log=$1; shift
  (timeout $(( $(left) - 20 )) "$@" > $log 2>&1; echo "[$(( $(date +%s) - t0 )) s] $log rc $?")
}
go train_none-1.log python stages/train.py none 1 & sleep 5
go train_routeV-1.log python stages/train.py routeV 1 & sleep 5
go train_uniform-1.log python stages/train.py uniform 1 & sleep 5
go train_none-2.log python stages/train.py none 2 & sleep 5
go eval_base.log python stages/eval.py base &
wait
pkill -f "nvidia-smi --query-gpu" || true
gzip -c /tmp/smi_d1.csv > $OUT/smi_d1.csv.gz
tar -czf $OUT/wsD5_d1.tgz metrics/runs params.yaml *.log
for r in none-1 routeV-1 uniform-1 none-2; do echo "== $r: $(ls runs/train/$r/ckpt 2>/dev/null | tr '\n' ' ')"; tail -c 200 train_$r.log; echo; done
