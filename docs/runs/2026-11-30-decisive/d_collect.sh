# What a decisive session brings back, to $OUT (at most 8 files): the head (dvc.lock, params, the plan, metrics,
# the upstream outputs a later session carries so that every seed reads the same substrate, pool and pairs, each
# run's records less its weights), the logs, and each task's work directory less weights (stages not yet adopted).
#   bash docs/runs/2026-11-30-decisive/d_collect.sh
R=/tmp/dd; F=/tmp/wsF; W=$F/.dvc/tmp/fanout
NOW='--exclude=adapter*.safetensors --exclude=ckpt --exclude=models'
cd $F 2>/dev/null || { echo "no workspace"; tar -czf $OUT/dd_logs.tgz -C / tmp/dd; exit 0; }
tar -czf $OUT/dd_head.tgz $NOW dvc.lock params.yaml analysis.yaml $(ls -d metrics plots data/substrate data/pool runs/pairs runs/vact runs/train 2>/dev/null)
tar -czf $OUT/dd_logs.tgz -C / tmp/dd $(cd / && ls -d tmp/wsF/.dvc/tmp/fanout/logs tmp/wsF/.dvc/tmp/fanout/status.json 2>/dev/null)
tar -czf $OUT/dd_work.tgz $NOW -C $W/runs $(cd $W/runs 2>/dev/null && ls -d */metrics/runs */runs/train */dvc.lock 2>/dev/null)
ls -la $OUT
