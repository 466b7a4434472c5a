# Round 2, device call D2: (c) `none` for train.steps (30) steps in two workspaces packed on the one
# GPU: wsE (mix 0 on the 48 easy training problems) and wsP (the recorded pool at mix 0.25 on the
# problems it covers), started 30 s apart; the base model's evaluation on the 20 held-out easy
# problems (both workspaces' test split) beside them; then each trained run's evaluation. Bounded
# by the call's LIMIT seconds; what exists is packed into $OUT.
set -o pipefail
LIMIT=${1:-560}; STASH=/tmp/stash
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( LIMIT - ($(date +%s) - t0) )); }
quiet() { grep -v "it/s\]\|s/it\]\|it\/s$"; }
REC=$(pwd)/docs/runs/2026-11-29-real-student-pilot
for w in wsE wsP; do [ -d /tmp/$w ] || { mkdir -p /tmp/$w && tar -xzf $STASH/$w.tgz -C /tmp/$w; }; done
cd /tmp/wsE && . $REC/device2_setup.sh || exit 1
python stages/model.py 2>&1 | quiet && stamp "0.5B built"
python stages/extract_vact.py 0 2>&1 | quiet | tail -2; stamp "v_act, v_grad (train reads the direction file)"
mkdir -p /tmp/wsP/models /tmp/wsP/runs && cp -r models/student /tmp/wsP/models/ && cp -r runs/vact /tmp/wsP/runs/
(nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -lms 2000 > /tmp/smi.csv &)
(cd /tmp/wsE && timeout $(( $(left) - 70 )) python stages/train.py none 0 > train.log 2>&1; echo "[$(( $(date +%s) - t0 )) s] train wsE rc $?") &
sleep 30
(cd /tmp/wsP && export PYTHONPATH=/tmp/site:/tmp/wsP && timeout $(( $(left) - 70 )) python stages/train.py none 0 > train.log 2>&1; echo "[$(( $(date +%s) - t0 )) s] train wsP rc $?") &
(cd /tmp/wsE && timeout $(( $(left) - 70 )) python stages/eval.py base > eval_base.log 2>&1; echo "[$(( $(date +%s) - t0 )) s] eval base rc $?") &
wait
for w in wsE wsP; do
  [ -f /tmp/$w/runs/train/none-0/adapter.safetensors ] && (cd /tmp/$w && export PYTHONPATH=/tmp/site:/tmp/$w && timeout $(( $(left) - 8 )) python stages/eval.py none 0 > eval.log 2>&1; echo "[$(( $(date +%s) - t0 )) s] eval $w rc $?") &
done
wait
pkill -f "nvidia-smi --query-gpu" || true
for w in wsE wsP; do
  tar -czf $OUT/$w.tgz -C /tmp/$w metrics/runs params.yaml $(cd /tmp/$w && ls *.log runs/train/none-0/rollouts.jsonl 2>/dev/null)
done
gzip -c /tmp/smi.csv > $OUT/smi_d2.csv.gz
for w in wsE wsP; do echo "== $w"; tail -c 400 /tmp/$w/train.log; echo; ls /tmp/$w/metrics/runs/*/ 2>/dev/null | head; done
