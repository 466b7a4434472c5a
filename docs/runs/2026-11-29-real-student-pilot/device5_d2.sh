# Round 5, device call D2 (right after D1, the machine warm; again as D3 if its LIMIT stops it): the
# runs D1 stopped resume from their last checkpoint and finish; then each run's evaluation on
# test_medhard (final deploy and train views, the checkpoint curve). Idempotent: a finished training or
# evaluation is not run again. Results to $OUT (rollouts gzipped, each run's logged scores).
set -o pipefail
LIMIT=${1:-570}; STASH=/tmp/stash
t0=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - t0) )); }
REC=$(pwd)/docs/runs/2026-11-29-real-student-pilot
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
cd /tmp/wsD5 && . $REC/device2_setup.sh || exit 1
(nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -lms 2000 > /tmp/smi_d2.csv &)
go() {  # log name, command...: bounded by what is left of the call
  local log=$1; shift
  (timeout $(( $(left) - 20 )) "$@" > $log 2>&1; echo "[$(( $(date +%s) - t0 )) s] $log rc $?")
}
run() {  # arm, seed: train to the end, then evaluate
  local r=$1-$2
  [ -f runs/train/$r/adapter.safetensors ] || go train_d2_$r.log python stages/train.py $1 $2
  [ -f runs/train/$r/adapter.safetensors ] && [ ! -f metrics/runs/$r/per_mode_deploy.json ] && go eval_$r.log python stages/eval.py $1 $2
}
run none 1 & sleep 3
run routeV 1 & sleep 3
run uniform 1 & sleep 3
run none 2 & sleep 3
[ -f metrics/runs/base/per_mode_deploy.json ] || go eval_base_d2.log python stages/eval.py base &
wait
pkill -f "nvidia-smi --query-gpu" || true
gzip -c /tmp/smi_d2.csv > $OUT/smi_d2_$t0.csv.gz
tar -czf $OUT/wsD5_metrics.tgz metrics/runs params.yaml $(ls *.log runs/train/*/steps.jsonl 2>/dev/null)
ls metrics/runs/*/ 2>/dev/null | tr '\n' ' '; echo
for r in none-1 routeV-1 uniform-1 none-2; do
  f=runs/train/$r; [ -f $f/rollouts.jsonl ] || continue
  gzip -c $f/rollouts.jsonl > $OUT/${r}_rollouts.jsonl.gz
  [ -f $f/rollout_acts.safetensors ] && cp $f/rollout_acts.safetensors $OUT/${r}_rollout_acts.safetensors
  tail -c 200 train_d2_$r.log 2>/dev/null; echo
done
ls -la $OUT
