#!/usr/bin/env bash
# Wait up to $1 seconds for run.sh to end, then put what the run has written so far under $OUT:
# meta.tgz (params, dvc.lock, the fan-out's status and log, metrics/) always, and once it has
# ended, the rollouts and their activations (A7's inputs) as acts.tgz.* (15 MB pieces).
end=$((SECONDS + ${1:-540}))
while [ $SECONDS -lt $end ] && ! grep -q "ALL DONE\|FAILED" /tmp/run.out 2>/dev/null; do sleep 10; done
tail -c 1500 /tmp/run.out | tr '\r' '\n' | grep -v '^$' | tail -12
cd /tmp/rep 2>/dev/null || exit 0
python3 -c "
import json, collections
s = json.load(open('.dvc/tmp/fanout/status.json'))['stages']
print(dict(collections.Counter(v['state'] for v in s.values())))
" 2>/dev/null
uptime; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
tar czf "$OUT/meta.tgz" params.yaml dvc.lock fanout.log .dvc/tmp/fanout/status.json metrics /tmp/run.out 2>/dev/null
if grep -q "ALL DONE" /tmp/run.out; then
  tar cf - runs/train/*/rollouts.jsonl runs/train/*/rollout_acts.safetensors runs/train/*/config.json runs/vact runs/pairs \
    data/substrate 2>/dev/null | gzip -1 | split -b 15000000 -d -a 1 - "$OUT/acts.tgz."
  tar czf "$OUT/logs.tgz" .dvc/tmp/fanout/logs 2>/dev/null
fi
ls -la "$OUT"
