# Device calls 2 and 3: (c) `none` for train.steps steps in two workspaces packed on the one GPU,
# /tmp/w (mix 0: every hack the student's own) and /tmp/w2 (the recorded pool at mix 0.25, on the
# problems it covers), then the deploy evaluations (base once, each run's final adapter and curve).
# Idempotent: each call resumes what is left (train resumes from its last checkpoint) until
# DEADLINE_S seconds after it started, then packs what exists into $OUT.
#   bash device_train.sh DEADLINE_S
set -o pipefail
DEADLINE=$(( $(date +%s) + ${1:-540} ))
[ -d /tmp/w2 ] || { mkdir -p /tmp/w2 && tar -xzf /tmp/stash/pilot_pool.tgz -C /tmp/w2; }
cd /tmp/w && . docs/runs/2026-11-29-real-student-pilot/device_setup.sh || exit 1
[ -f models/student/config.json ] || python stages/model.py
[ -d /tmp/w2/models/student ] || { mkdir -p /tmp/w2/models && cp -r models/student /tmp/w2/models/; }
[ -d /tmp/w2/runs/vact/0 ] || { mkdir -p /tmp/w2/runs && cp -r runs/vact /tmp/w2/runs/; }   # same model, pairs, adapter and seed
left() { echo $(( DEADLINE - $(date +%s) )); }
done_train() { [ -f $1/runs/train/none-0/adapter.safetensors ]; }
done_eval() { [ -f $1/metrics/runs/$2/deploy_samples.csv ]; }
(nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -lms 2000 >> /tmp/smi.csv &)
first=1
for ws in /tmp/w /tmp/w2; do
  if ! done_train $ws; then
    [ $first = 1 ] || sleep 45   # the first run's first steps alone: its unpacked step time
    first=0
    (cd $ws && timeout -s TERM $(( $(left) - 20 )) python stages/train.py none 0 >> $ws/train.log 2>&1; echo "train $ws rc $?") &
  fi
done
wait
for ws in /tmp/w /tmp/w2; do
  if done_train $ws && ! done_eval $ws none-0 && [ $(left) -gt 60 ]; then
    (cd $ws && timeout -s TERM $(( $(left) - 15 )) python stages/eval.py none 0 >> $ws/eval.log 2>&1; echo "eval $ws rc $?") &
  fi
done
if ! done_eval /tmp/w base && [ $(left) -gt 60 ]; then
  (cd /tmp/w && timeout -s TERM $(( $(left) - 15 )) python stages/eval.py base >> /tmp/w/eval_base.log 2>&1; echo "eval base rc $?") &
fi
wait
pkill -f "nvidia-smi --query-gpu" || true
for ws in w w2; do
  tar -czf $OUT/$ws.tgz -C /tmp/$ws metrics/runs params.yaml train.log $(cd /tmp/$ws && ls eval*.log 2>/dev/null) \
    $(cd /tmp/$ws && ls runs/train/none-0/rollouts.jsonl 2>/dev/null) 2>/dev/null
done
gzip -c /tmp/smi.csv > $OUT/smi.csv.gz
for ws in /tmp/w /tmp/w2; do echo "== $ws"; tail -3 $ws/train.log; grep -h "hack\|solve" $ws/eval*.log 2>/dev/null | tail -4; done
