#!/usr/bin/env bash
# Wait up to $1 seconds for run.sh to end, then put what the run has written so far under $OUT:
# meta.tgz (params, the per-run logs, metrics/, the setup logs, the run's output); no rollouts or
# activations.
end=$((SECONDS + ${1:-540}))
while [ $SECONDS -lt $end ] && ! grep -q "ALL DONE\|FAILED:" /tmp/run.out 2>/dev/null; do sleep 10; done
tail -c 3000 /tmp/run.out | tr '\r' '\n' | grep -v '^$' | tail -30
echo "runs done: $(grep -c '^done ' /tmp/run.out 2>/dev/null), failed: $(grep -c 'RUN FAILED' /tmp/run.out 2>/dev/null)"
cd /tmp/rep 2>/dev/null || exit 0
uptime; nvidia-smi --query-gpu=name,utilization.gpu,memory.used --format=csv,noheader
tar czf "$OUT/meta.tgz" params.yaml metrics logs model.log vact-*.log /tmp/run.out 2>/dev/null
ls -la "$OUT"
