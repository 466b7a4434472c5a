# What a decisive session brings back, to $OUT, in calls that fit its limits (8 files, 16 MiB each, 64 MiB a call):
#   bash docs/runs/2026-11-30-decisive/d_collect.sh head          h1.tgz (dvc.lock, params, the plan, metrics, the
#       upstream outputs, v_act, pairs), h2.tgz (each run's config.json and rollouts.jsonl), logs.tgz (the fan-out's
#       status.json and stage logs), dd_logs.tgz (/tmp/dd: start, fan-out, ps and GPU logs)
#   bash docs/runs/2026-11-30-decisive/d_collect.sh acts RUN ...  RUN.acts.gz: each run's rollout_acts.safetensors
#       (A7's features, about 12 MB, 11 MB gzipped: four runs a call)
#   bash docs/runs/2026-11-30-decisive/d_collect.sh final         h_final.tgz: dvc.lock and the aggregate's outputs,
#       once the fan-out ended (its last stage, aggregate, reads every run)
# Each run's weights (adapter*.safetensors, ckpt/) and the per-step features (acts/) stay there.
F=/tmp/wsF; W=$F/.dvc/tmp/fanout
cd $F 2>/dev/null || { echo "no workspace"; tar -czf $OUT/dd_logs.tgz -C / tmp/dd; exit 0; }
case "$1" in
  head)
    tar -czf $OUT/h1.tgz dvc.lock params.yaml analysis.yaml metrics $(ls -d plots data/substrate data/pool runs/pairs runs/vact 2>/dev/null)
    tar -czf $OUT/h2.tgz runs/train/*/config.json runs/train/*/rollouts.jsonl
    tar -czf $OUT/logs.tgz -C $W status.json logs
    tar -czf $OUT/dd_logs.tgz -C / tmp/dd ;;
  acts)
    shift; for r in "$@"; do gzip -1 -c runs/train/$r/rollout_acts.safetensors > $OUT/$r.acts.gz || exit 1; done
    sha256sum $(for r in "$@"; do echo runs/train/$r/rollout_acts.safetensors; done) ;;
  final)
    [ -f /tmp/dd/done ] || echo "note: the fan-out has not ended (/tmp/dd/done missing)"
    tar -czf $OUT/h_final.tgz dvc.lock metrics/summary.json metrics/arms metrics/artifacts plots/png ;;
  *) echo "usage: d_collect.sh head | acts RUN ... | final"; exit 2 ;;
esac
ls -la $OUT
