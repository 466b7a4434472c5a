# Device call 1 (after the pieces): (a) base rates of both students, (b) the gate offline on the 0.5B
# (v_act and v_grad extracted here by the extract_vact stage's code: on a 2-core CPU it took minutes
# a batch). In /tmp/w, the pilot tar of the mix-0 workspace; results to $OUT. Each step is bounded by
# what is left of the call's 570 s, so the call returns whatever finished.
set -o pipefail
cd /tmp/w && . docs/runs/2026-11-29-real-student-pilot/device_setup.sh || exit 1
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( 570 - ($(date +%s) - t0) )); }
quiet() { grep -v "it/s\]\|s/it\]"; }
[ -d /tmp/w2 ] || { mkdir -p /tmp/w2 && tar -xzf /tmp/stash/pilot_pool.tgz -C /tmp/w2; }
python stages/model.py && stamp "0.5B built"                       # models/student: qwen2.5-coder-0.5b
python stages/extract_vact.py 0 2>&1 | quiet; stamp "v_act, v_grad of the 0.5B (extract_vact)"
for split in test train; do
  timeout $(left) python -m bench.pilot rates models/student qwen05_$split $OUT --splits $split 2>&1 | quiet; stamp "0.5B rates $split"
done
timeout $(( $(left) - 240 )) python -m bench.pilot gate models/student runs/vact/0 $OUT --pool data/rh-s65-teacher-pool.jsonl.gz \
  --graded /tmp/w2/data/pool/pool.jsonl --graded-problems /tmp/w2/data/substrate/train.jsonl \
  --own $OUT/qwen05_test_samples.jsonl.gz --own $OUT/qwen05_train_samples.jsonl.gz 2>&1 | quiet; stamp "gate offline"
python -c "from pathlib import Path; from vgrout.engine.model import prepare; prepare('qwen2.5-coder-1.5b', Path('/tmp/m15'))" && stamp "1.5B built"
for split in test train; do
  timeout $(left) python -m bench.pilot rates /tmp/m15 qwen15_$split $OUT --splits $split 2>&1 | quiet; stamp "1.5B rates $split"
done
