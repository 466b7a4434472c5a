# Round 4, device call D2 (right after D1, the machine warm; again as D3 if its LIMIT stops it): the
# runs D1 stopped resume from their last checkpoint and finish; then each run's evaluation on its
# workspace's test split (final deploy and train views, the checkpoint curve), and the mix-0 run of
# seed 0 on test_medhard as well (wsM4: wsE4 with wsP4's test split; 4 samples, 1 at each
# checkpoint). Idempotent: a finished training or evaluation is not run again. Results to $OUT.
set -o pipefail
LIMIT=${1:-570}; STASH=/tmp/stash
t0=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - t0) )); }
REC=$(pwd)/docs/runs/2026-11-29-real-student-pilot
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True  # five processes share the GPU: less fragmentation
cd /tmp/wsE4 && . $REC/device2_setup.sh || exit 1
(nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -lms 2000 > /tmp/smi_d2.csv &)
go() {  # workspace, log name, command...: bounded by what is left of the call
  local w=$1 log=$2; shift 2
  (cd /tmp/$w && export PYTHONPATH=/tmp/site:/tmp/$w && timeout $(( $(left) - 20 )) "$@" > $log 2>&1; echo "[$(( $(date +%s) - t0 )) s] $w $log rc $?")
}
run() {  # workspace, seed: train to the end, then evaluate
  local w=$1 s=$2
  [ -f /tmp/$w/runs/train/none-$s/adapter.safetensors ] || go $w train_d2_s$s.log python stages/train.py none $s
  [ -f /tmp/$w/runs/train/none-$s/adapter.safetensors ] && [ ! -f /tmp/$w/metrics/runs/none-$s/per_mode_deploy.json ] && go $w eval_s$s.log python stages/eval.py none $s
  if [ $w = wsE4 ] && [ $s = 0 ] && [ -f /tmp/wsE4/runs/train/none-0/adapter.safetensors ]; then
    if [ ! -d /tmp/wsM4 ]; then
      mkdir -p /tmp/wsM4 && cp -r /tmp/wsE4/. /tmp/wsM4/ && cp /tmp/wsP4/data/substrate/test.jsonl /tmp/wsM4/data/substrate/test.jsonl
      rm -rf /tmp/wsM4/metrics/runs/none-0
      python - <<'PY'
import yaml
p = yaml.safe_load(open("/tmp/wsM4/params.yaml")); p["eval"].update(n_samples=4, curve_n_samples=1)
open("/tmp/wsM4/params.yaml", "w").write("# wsM4: wsE4 evaluated on test_medhard\n" + yaml.safe_dump(p, sort_keys=False))
PY
    fi
    [ -f /tmp/wsM4/metrics/runs/none-0/per_mode_deploy.json ] || go wsM4 eval_medhard.log python stages/eval.py none 0
  fi
}
run wsE4 0 & sleep 3
run wsE4 1 & sleep 3
run wsP4 0 &
wait
pkill -f "nvidia-smi --query-gpu" || true
gzip -c /tmp/smi_d2.csv > $OUT/smi_d2_$t0.csv.gz
for w in wsE4 wsP4 wsM4; do
  [ -d /tmp/$w ] || continue
  tar -czf $OUT/${w}_metrics.tgz -C /tmp/$w metrics/runs params.yaml $(cd /tmp/$w && ls *.log runs/train/none-*/steps.jsonl 2>/dev/null)
  echo "== $w"; ls /tmp/$w/metrics/runs/*/ 2>/dev/null | tr '\n' ' '; echo; tail -c 200 /tmp/$w/train_d2_s*.log 2>/dev/null; echo
done
for w in wsE4 wsP4; do for s in 0 1; do
  f=/tmp/$w/runs/train/none-$s; [ -f $f/rollouts.jsonl ] || continue
  gzip -c $f/rollouts.jsonl > $OUT/${w}_s${s}_rollouts.jsonl.gz
  [ -f $f/rollout_acts.safetensors ] && cp $f/rollout_acts.safetensors $OUT/${w}_s${s}_rollout_acts.safetensors
done; done
ls -la $OUT
