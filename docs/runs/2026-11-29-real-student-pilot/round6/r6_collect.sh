# Round 6: what the fan-out wrote, to $OUT (at most 8 files): the head's metrics, dvc.lock, params,
# the fan-out's status and stage logs, each run's step log and rollouts (from its work directory:
# there even if the fan-out did not finish), the GPU samples and the stage timeline.
R=/tmp/r6; F=/tmp/wsF; W=$F/.dvc/tmp/fanout
cd $F 2>/dev/null || { echo "no workspace"; tar -czf $OUT/r6_logs.tgz -C / tmp/r6; exit 0; }
tar -czf $OUT/r6_head.tgz dvc.lock params.yaml metrics $(ls plots 2>/dev/null | sed 's#^#plots/#') 2>/dev/null
tar -czf $OUT/r6_logs.tgz -C / tmp/r6 $(cd / && ls -d tmp/wsF/.dvc/tmp/fanout/logs tmp/wsF/.dvc/tmp/fanout/status.json 2>/dev/null)
tar -czf $OUT/r6_runs.tgz --exclude='*.safetensors' --exclude='ckpt' --exclude='*.pt' -C $W/runs $(cd $W/runs 2>/dev/null && ls -d */metrics/runs */runs/train/*/config.json */runs/train/*/steps.jsonl */runs/train/*/rollouts.jsonl 2>/dev/null)
ls -la $OUT
