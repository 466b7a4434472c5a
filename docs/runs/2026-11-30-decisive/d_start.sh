# The decisive grid (issue 51), one device session's seeds: `vgrout fanout` of presets/decisive.yaml under the plan
# plans/decisive.yaml (copied to the workspace's analysis.yaml before any stage runs), with params train.seeds cut to
# this session's seeds (DEC_SEEDS, e.g. "100, 101"): a session's device time holds two seeds' three arms, so the grid
# runs seed by seed over sessions, each seed's arms in one session (paired within a seed). Started detached (setsid) in
# the call that carries the GGUF's last piece, so it runs across calls; the next calls only wait and read (d_wait.sh).
# The code is the commit carried as snap.tgz (snap.commit names it), not the call's tree.
#   DEC_SEEDS="100, 101" setsid bash docs/runs/2026-11-30-decisive/d_start.sh < /dev/null &
# Logs in /tmp/dd (outside the workspace: a file that appears in the head stops the fan-out).
R=/tmp/dd; mkdir -p $R
GRID_COMMIT=e3f642109f9f9a12b031d182132486b550a4720b  # the grid's code, every session (README)
UPSTREAM_SHA256=65fddeec2f3d86c550390f09ab3ae696edfdb24f5b0c4d930c00fe7357e87ba3  # s100-101/kept_beside.sha256
VERSIONS="torch 2.11.0+cu130 transformers 5.17.0 ray 2.60.0 dvc 3.67.1"  # session 1's (README)
if [ "$0" != $R/d_start.sh ]; then
  # No seed is drawn twice, none left out: DEC_SEEDS must be the plan's next two seeds (the last one, if one is left),
  # in order, after those the record holds (a folder sA-B per session with all its arms evaluated; a session that did
  # not finish is recorded under attempts/ and its seeds run again whole: README "Resuming"). A session of fewer
  # seeds than it can hold would let the grid stop on what it has seen.
  python3 - "$(dirname "$0")" "${DEC_SEEDS:-}" <<'PY' || exit 1
import re, sys
from pathlib import Path
record, asked = Path(sys.argv[1]), [int(x) for x in sys.argv[2].replace(",", " ").split()]
plan = [100, 101, 102, 103, 104, 105]  # plans/decisive.yaml's seeds (tests/analysis/test_decisive.py keeps them)
done = sorted(int(x) for d in record.glob("s*-*") if d.is_dir() for x in re.findall(r"\d+", d.name))
done = list(range(done[0], done[-1] + 1)) if done else []
nxt = [s for s in plan if s not in done][:2]
if not asked or asked != nxt:
    sys.exit(f"DEC_SEEDS {asked}: the record holds seeds {done}; the next seeds of the plan are {nxt or 'none'}")
PY
  # run from a copy: the call's tree is laid anew at the next call, while this runs on across calls
  cp "$0" $R/d_start.sh && exec bash $R/d_start.sh "$@"
fi
exec >> $R/start.log 2>&1
t0=$(date +%s); echo "start $t0 $(date -u) seeds [${DEC_SEEDS:?DEC_SEEDS unset}]"
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
export STASH=/tmp/stash FAN_WS=/tmp/wsF FAN_PRESET=decisive FAN_DATA=/tmp/stash/data
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[ -f /tmp/snap/.done ] || { rm -rf /tmp/snap; mkdir -p /tmp/snap && tar -xzf $STASH/snap.tgz -C /tmp/snap && touch /tmp/snap/.done; } || exit 1
cd /tmp/snap && cp plans/decisive.yaml analysis.yaml || exit 1
. docs/runs/device_fanout_setup.sh || { stamp "FAILED: setup"; exit 1; }
stamp "setup done in $(pwd); GGUF: $(ls $VGROUT_CACHE/gguf); commit $(cat $STASH/snap.commit)"
[ "$(cat $STASH/snap.commit)" = $GRID_COMMIT ] || { stamp "FAILED: snap.commit is not the grid's $GRID_COMMIT"; exit 1; }
v=$(python3 -c "import torch, transformers, ray, dvc; print('torch', torch.__version__, 'transformers', transformers.__version__, 'ray', ray.__version__, 'dvc', dvc.__version__)")
[ "$v" = "$VERSIONS" ] || [ -n "${DEC_ALLOW_VERSIONS:-}" ] || { stamp "FAILED: versions '$v', session 1 had '$VERSIONS'"; exit 1; }
stamp "versions: $v$([ "$v" = "$VERSIONS" ] && echo " (session 1's)" || echo " (NOT session 1's: DEC_ALLOW_VERSIONS)")"
if ! grep -q "^  seeds: \[${DEC_SEEDS}\]" params.yaml; then
  sed -i -E "s/^(  seeds: )\[100, 101, 102, 103, 104, 105\]/\1[${DEC_SEEDS}]/" params.yaml
  grep -q "^  seeds: \[${DEC_SEEDS}\]" params.yaml || { stamp "FAILED: train.seeds not set"; exit 1; }
  git -c user.name=fanout -c user.email=fanout@localhost commit -qam "this session's seeds: [${DEC_SEEDS}]" || exit 1
fi
cmp analysis.yaml plans/decisive.yaml || { stamp "FAILED: analysis.yaml is not plans/decisive.yaml"; exit 1; }
stamp "plan sha256 $(sha256sum analysis.yaml | cut -c1-16); $(grep -n '^  seeds:\|gpu_share\|^preset' params.yaml | tr '\n' ' ')"
[ -n "${DEC_SETUP_ONLY:-}" ] && { stamp "setup only"; exit 0; }  # (the model's GGUF comes with the last carry)
# A later session: the first session's upstream (pack.py --upstream: its dvc.lock entries of model, substrate, pairs,
# teacher_pool and eval_base, and their outputs), so that every seed reads the same problems, pool and pairs and the
# base is evaluated once. The model stage runs again (its GGUF conversion is deterministic: README "Resuming"); every
# other upstream stage must then be current, its outputs only missing from this machine's DVC cache, or this stops.
if [ -f $STASH/upstream.tgz ] && [ ! -f $R/upstream_placed ]; then
  echo "$UPSTREAM_SHA256  $STASH/upstream.tgz" | sha256sum -c --quiet || { stamp "FAILED: upstream.tgz is not session 1's"; exit 1; }
  stamp "upstream.tgz sha256 $UPSTREAM_SHA256 (session 1's)"
  tar -xzf $STASH/upstream.tgz || exit 1
  python3 -m dvc repro --single-item model || { stamp "FAILED: model"; exit 1; }
  python3 -m dvc status --json substrate pairs teacher_pool eval_base > $R/upstream_status.json || exit 1
  python3 -c "
import json, sys
changes = json.load(open('$R/upstream_status.json'))
bad = [(s, c) for s, cs in changes.items() for c in cs
       if not (isinstance(c, dict) and set(c) == {'changed outs'} and set(c['changed outs'].values()) == {'not in cache'})]
sys.exit(f'upstream not current: {bad}' if bad else 0)" || { stamp "FAILED: the carried upstream is not current here"; exit 1; }
  python3 -m dvc commit -f substrate pairs teacher_pool || exit 1  # into the cache the tasks check out from
  touch $R/upstream_placed; stamp "upstream placed (carried), model rebuilt: $(cat $R/upstream_status.json)"
elif [ ! -f $R/upstream_placed ] && [ "$DEC_SEEDS" != "100, 101" ]; then
  # No carried upstream (or it could not be placed): rebuild it here, and it must equal session 1's byte for byte
  # before any run starts (its eval_base runs again; session 1's stays the plan's base: README "Resuming").
  python3 -m dvc repro model substrate pairs teacher_pool || { stamp "FAILED: upstream"; exit 1; }
  sha256sum -c --quiet <<SUMS || { stamp "FAILED: the rebuilt upstream differs from session 1's"; exit 1; }
399b28ef163257b2f01943952c36d322fb8dcdd98d8c3395593f18ee6477cd25  data/substrate/train.jsonl
6b5ba249139d1f492f83a7fb6b599772849e48610ba4f94cf6f2d3638b942869  data/substrate/test.jsonl
34f5edf414d8baeb598f9a8d9531dc27b7e17440a516e99b88eb21744681dfff  data/pool/pool.jsonl
369a77da0e12d8a936d927e304bda908e114d10b4a0213ff51c10220c8650756  runs/pairs/pairs.json
SUMS
  touch $R/upstream_placed; stamp "upstream rebuilt, equal to session 1's"
fi
python3 -c "import torch, transformers, ray, dvc; print('torch', torch.__version__, 'transformers', transformers.__version__, 'ray', ray.__version__, 'dvc', dvc.__version__, 'gpus', torch.cuda.device_count())"
nvidia-smi --query-gpu=timestamp,index,memory.used,utilization.gpu --format=csv -lms 2000 > $R/smi.csv 2>&1 &
echo $! > $R/smi.pid
( while [ ! -f $R/done ]; do echo "$(date +%s) $(ps -eo args | grep -o 'stages/[a-z_]*\.py[ a-zA-Z0-9-]*' | grep -v grep | sort | tr '\n' ';')"; sleep 5; done ) > $R/ps.log 2>&1 &
stamp "fanout starts"
python3 -m vgrout.cli fanout > $R/fanout.log 2>&1
rc=$?; stamp "fanout rc $rc"
touch $R/done; kill $(cat $R/smi.pid) 2>/dev/null
