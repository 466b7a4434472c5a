# Round 7 (README "Round 7"): item 5b for the student the pilot chose, on the GPU. Started detached
# (setsid) from the call that carries the 1.5B's last piece; the later calls only wait and collect.
#   setsid bash round7/r7_measure.sh ROUND7_DIR < /dev/null &
# In the workspace of round 6's mix-0 fan-out (round6/r6mix0.yaml, made by device_fanout_setup.sh without
# the fan-out's wheels: only the project's, pydantic and gguf), it builds the 1.5B, the substrate's splits
# (selfcheck.build_block: the check without its last step, the base model's rates, which this measurement
# does not read), the pairs and v_act/v_grad of seed 1 (the seed of round 6's run that hacked on its own),
# then:
#   1. `bench.pilot own` on round 6's none-1 rollouts, scored again by that run's frozen scorer in both
#      spaces (v_act's score must agree with the one the run logged; v_grad's is what routeV ranks by);
#   2. `bench.pilot gate` with the 1.5B's directions on the recorded pool by its source's labels
#      (round 3 scored the pool with the 0.5B's directions only), 400 rows, 1,000 Haar directions.
# Results in /tmp/r7/out; the log /tmp/r7/run.log.
R=/tmp/r7; mkdir -p $R/out $R/in; rm -f $R/done
# the call's tree is laid anew at the next call: take what the job reads from it now
cp "$1/../round6/r6mix0.yaml" "$1/../round6/mix0_none-1/rollouts.jsonl.gz" $R/in/ || exit 1  # the rollouts file: README "Files moved out of the tree"
exec >> $R/run.log 2>&1
t0=$(date +%s); echo "start $t0 $(date -u)"
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; case "$*" in FAILED*) touch $R/done;; esac; }
export STASH=/tmp/stash FAN_WS=/tmp/wsF FAN_PRESET=r6mix0 FAN_DATA=/tmp/stash/data FAN_NO_INSTALL=1
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
[ -f /tmp/site/.r7 ] || { python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site $STASH/*.whl && touch /tmp/site/.r7; } || { stamp "FAILED: wheels"; exit 1; }
export PYTHONPATH=/tmp/site
[ -f /tmp/snap/.done ] || { rm -rf /tmp/snap; mkdir -p /tmp/snap && tar -xzf $STASH/snap.tgz -C /tmp/snap && touch /tmp/snap/.done; } || exit 1
cp $R/in/r6mix0.yaml /tmp/snap/presets/r6mix0.yaml
cd /tmp/snap && . docs/runs/device_fanout_setup.sh || { stamp "FAILED: setup"; exit 1; }
stamp "workspace $(pwd); GGUF: $(ls $VGROUT_CACHE/gguf); $(git -C /tmp/snap log -1 --format=%H 2>/dev/null || cat $STASH/snap.commit)"
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -lms 2000 > $R/out/smi.csv 2>&1 &
smi=$!
[ -f models/student/config.json ] || python3 stages/model.py > $R/out/model.log 2>&1 || { stamp "FAILED: model"; exit 1; }; stamp "model"
python3 - > $R/out/substrate.log 2>&1 <<'PY' || { stamp "FAILED: substrate"; exit 1; }
from pathlib import Path
from vgrout import config
from vgrout.substrate.problems import write_problems
from vgrout.io import write_json
from vgrout.substrate.selfcheck import build_block
train, test, report = build_block(config.load().substrate, progress=False)
write_problems(Path("data/substrate/train.jsonl"), train)
write_problems(Path("data/substrate/test.jsonl"), test)
write_json("/tmp/r7/out/substrate_check_no_base.json", report)
print(len(train), "train,", len(test), "test; check ok:", report["ok"])
PY
stamp "substrate: $(tail -1 $R/out/substrate.log)"
python3 stages/pairs.py > $R/out/pairs.log 2>&1 || { stamp "FAILED: pairs"; exit 1; }; stamp "pairs"
python3 stages/extract_vact.py 1 > $R/out/extract.log 2>&1 || { stamp "FAILED: extract_vact 1"; exit 1; }; stamp "extract_vact 1"
ls -l runs/vact/1 > $R/out/vact_1.ls; cp runs/vact/1/*.json $R/out/ 2>/dev/null
python3 -m bench.pilot own $R/in/rollouts.jsonl.gz $R/out/own_rescored_none-1.json --model-dir models/student \
  --vact-dir runs/vact/1 --run-seed 1 > $R/out/own.log 2>&1; stamp "own rc $?"
python3 -m bench.pilot gate models/student runs/vact/1 $R/out/gate --pool ../shared/data/pools/rh-s65-teacher-pool.jsonl.gz \
  --seed 1 --max-rows 400 > $R/out/gate.log 2>&1; stamp "gate rc $?"
kill $smi 2>/dev/null; stamp "done"; touch $R/done
