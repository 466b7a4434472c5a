#!/usr/bin/env bash
# Wait up to $1 seconds for run.sh to end, then put what the run has written so far under $OUT:
# meta.tgz (params, the per-run logs, metrics/, the run's output) always, and once it has ended,
# the rollouts and their activations (A7's inputs) as acts.tgz.* (15 MB pieces).
end=$((SECONDS + ${1:-540}))
while [ $SECONDS -lt $end ] && ! grep -q "ALL DONE\|FAILED:" /tmp/run.out 2>/dev/null; do sleep 10; done
tail -c 2500 /tmp/run.out | tr '\r' '\n' | grep -v '^$' | tail -25
echo "runs done: $(grep -c '^done ' /tmp/run.out 2>/dev/null), failed: $(grep -c 'RUN FAILED' /tmp/run.out 2>/dev/null)"
cd /tmp/rep 2>/dev/null || exit 0
uptime; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
tar czf "$OUT/meta.tgz" params.yaml metrics logs model.log vact-*.log /tmp/run.out 2>/dev/null
if grep -q "ALL DONE" /tmp/run.out; then
  tar cf - runs/train/*/rollouts.jsonl runs/train/*/rollout_acts.safetensors runs/train/*/config.json runs/vact \
    2>/dev/null | gzip -1 | split -b 15000000 -d -a 1 - "$OUT/acts.tgz."
fi
ls -la "$OUT"
