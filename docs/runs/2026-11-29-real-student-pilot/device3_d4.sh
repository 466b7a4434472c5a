# Round 3, device call D4 (right after D3, the machine warm): the runs D3 stopped resume from their
# last checkpoint and finish; the base model's evaluation on each workspace's test split (wsE3: the 20
# held-out easy problems, 8 samples; wsP3: test_medhard, 4 samples) beside them; then each trained
# run's evaluation (final deploy and train views, the checkpoint curve). Results to $OUT.
set -o pipefail
LIMIT=${1:-570}; STASH=/tmp/stash
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( LIMIT - ($(date +%s) - t0) )); }
REC=$(pwd)/docs/runs/2026-11-29-real-student-pilot
cd /tmp/wsP3 && . $REC/device2_setup.sh || exit 1
(nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -lms 2000 > /tmp/smi_d4.csv &)
go() {  # workspace, log name, command...: bounded by what is left of the call
  local w=$1 log=$2; shift 2
  (cd /tmp/$w && export PYTHONPATH=/tmp/site:/tmp/$w && timeout $(( $(left) - 20 )) "$@" > $log 2>&1; echo "[$(( $(date +%s) - t0 )) s] $w $log rc $?")
}
for w in wsE3 wsE3L wsP3; do
  ( [ -f /tmp/$w/runs/train/none-0/adapter.safetensors ] || go $w train_d4.log python stages/train.py none 0
    [ -f /tmp/$w/runs/train/none-0/adapter.safetensors ] && go $w eval.log python stages/eval.py none 0 ) &
  sleep 3
done
go wsE3 eval_base.log python stages/eval.py base &
go wsP3 eval_base.log python stages/eval.py base &
wait
pkill -f "nvidia-smi --query-gpu" || true
gzip -c /tmp/smi_d4.csv > $OUT/smi_d4.csv.gz
for w in wsE3 wsE3L wsP3; do
  tar -czf $OUT/$w.tgz -C /tmp/$w metrics/runs params.yaml $(cd /tmp/$w && ls *.log runs/train/none-0/rollouts.jsonl runs/train/none-0/steps.jsonl 2>/dev/null)
  echo "== $w"; tail -c 250 /tmp/$w/train_d4.log 2>/dev/null; echo; ls /tmp/$w/metrics/runs/*/ 2>/dev/null | head -12
done
