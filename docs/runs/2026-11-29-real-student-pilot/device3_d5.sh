# Round 3, device call D5 (a fresh machine; pieces carried as before): mix 0 at lr 1e-4 (wsE3L) for
# three run seeds packed on the one GPU: seed 0 again (its adapter for the test_medhard evaluation in
# D6, and whether the run repeats) and seeds 1 and 2. Each run's rollout features (the gate's
# space, rollout_acts.safetensors) come back for the mechanism check on CPU.
set -o pipefail
LIMIT=${1:-560}; STASH=/tmp/stash
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( LIMIT - ($(date +%s) - t0) )); }
quiet() { grep -v "it/s\]\|s/it\]\|it\/s$"; }
REC=$(pwd)/docs/runs/2026-11-29-real-student-pilot
[ -d /tmp/wsE3L ] || { mkdir -p /tmp/wsE3L && tar -xzf $STASH/wsE3L.tgz -C /tmp/wsE3L; }
cd /tmp/wsE3L && . $REC/device2_setup.sh || exit 1
python stages/model.py 2>&1 | quiet | tail -1; stamp "0.5B built"
for s in 0 1 2; do (python stages/extract_vact.py $s 2>&1 | quiet | tail -1) & done; wait; stamp "v_act, v_grad of seeds 0-2"
(nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -lms 2000 > /tmp/smi_d5.csv &)
for s in 0 1 2; do
  (timeout $(( $(left) - 20 )) python stages/train.py none $s > train_s$s.log 2>&1; echo "[$(( $(date +%s) - t0 )) s] train seed $s rc $?") &
  sleep 5
done
wait
pkill -f "nvidia-smi --query-gpu" || true
gzip -c /tmp/smi_d5.csv > $OUT/smi_d5.csv.gz
tar -czf $OUT/wsE3L_seeds.tgz metrics/runs/none-* params.yaml train_s*.log runs/train/none-*/rollouts.jsonl runs/train/none-*/rollout_acts.safetensors
for s in 0 1 2; do echo "== seed $s"; ls runs/train/none-$s/ckpt | tr '\n' ' '; tail -c 200 train_s$s.log; echo; done
