# Round 3, device call D6 (right after D5, the machine warm): each seed's evaluation on the 20
# held-out easy problems (8 samples, deploy and train views, the checkpoint curve), and seed 0's on
# test_medhard (wsM3: wsE3L with wsP3's test split, the file wsP3's base evaluation used; 4 samples).
set -o pipefail
LIMIT=${1:-560}; STASH=/tmp/stash
t0=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - t0) )); }
REC=$(pwd)/docs/runs/2026-11-29-real-student-pilot
cd /tmp/wsE3L && . $REC/device2_setup.sh || exit 1
cp -r /tmp/wsE3L /tmp/wsM3 && tar -xzf $STASH/wsP3.tgz -C /tmp/wsM3 ./data/substrate/test.jsonl
python - <<'PY'
import yaml
p = yaml.safe_load(open("/tmp/wsM3/params.yaml")); p["eval"].update(n_samples=4, curve_n_samples=1)
open("/tmp/wsM3/params.yaml", "w").write("# wsM3: wsE3L evaluated on test_medhard\n" + yaml.safe_dump(p, sort_keys=False))
PY
for s in 0 1 2; do
  [ -f runs/train/none-$s/adapter.safetensors ] && (timeout $(( $(left) - 15 )) python stages/eval.py none $s > eval_s$s.log 2>&1; echo "[$(( $(date +%s) - t0 )) s] eval seed $s rc $?") &
  sleep 2
done
(cd /tmp/wsM3 && export PYTHONPATH=/tmp/site:/tmp/wsM3 && timeout $(( $(left) - 15 )) python stages/eval.py none 0 > eval_medhard.log 2>&1; echo "[$(( $(date +%s) - t0 )) s] eval test_medhard rc $?") &
wait
tar -czf $OUT/wsE3L_evals.tgz metrics/runs/none-* eval_s*.log
tar -czf $OUT/wsM3_eval.tgz -C /tmp/wsM3 metrics/runs/none-0 eval_medhard.log params.yaml
