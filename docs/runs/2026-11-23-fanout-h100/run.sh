#!/usr/bin/env bash
# The fan-out on one GPU: the embedded default's run stages (seed 0: 5 free arms, 2 yoked arms,
# their evals and eval_base; train.steps 12) once in series (fanout.gpu_share 1: one run on the
# GPU at a time) and once packed (fanout.gpu_share 0.125: up to 8 runs share the GPU), through
# `vgrout fanout --no-rest` on a local Ray cluster. The upstream stages run once, before both.
# Usage: run.sh OUT_DIR upstream|series|packed   (in a git checkout of the project, dependencies installed; bubblewrap
# absent on the measured machine, so VGROUT_ISOLATION=rlimit)
set -euo pipefail
out=$1; phase=$2; mkdir -p "$out"
export VGROUT_ISOLATION=${VGROUT_ISOLATION:-rlimit}

upstream() {
python -m vgrout.cli preset default
python - <<'PY'
import re, pathlib
p = pathlib.Path("params.yaml"); s = p.read_text()
s = re.sub(r"(?m)^  steps: 36 ", "  steps: 12 ", s)
p.write_text(s)
PY
git add -A && git -c user.name=m -c user.email=m@m commit -qm "measured params" || true
dvc repro substrate model pairs extract_vact@0 teacher_pool 2>&1 | tail -3
git add -A && git -c user.name=m -c user.email=m@m commit -qm upstream || true
}

measure() {  # name gpu_share
  git checkout -q -- dvc.lock metrics 2>/dev/null || true
  git clean -qfd metrics
  rm -rf .dvc/tmp/fanout runs/train
  sed -i -E "s/^  gpu_share: [0-9.]+ /  gpu_share: $2 /" params.yaml
  local t0=$(date +%s.%N)
  python -m vgrout.cli fanout --no-rest > "$out/$1.log" 2>&1
  local t1=$(date +%s.%N)
  python - "$1" "$2" "$t0" "$t1" "$out" <<'PY'
import json, sys, pathlib
name, share, t0, t1, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
status = json.load(open(".dvc/tmp/fanout/status.json"))["stages"]
res = {"gpu_share": share, "wall_s": t1 - t0, "n_stages": len(status),
       "states": sorted({s["state"] for s in status.values()}),
       "stage_s": {k: round(v["seconds"] or 0, 1) for k, v in status.items()},
       "where": sorted({v["where"] for v in status.values()})}
json.dump(res, open(f"{out}/{name}.json", "w"), indent=1)
print(name, json.dumps({k: res[k] for k in ("gpu_share", "wall_s", "n_stages", "states")}))
PY
  cp dvc.lock "$out/$1.dvc.lock"
}
case $phase in
  upstream) nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$out/gpu.txt"; upstream ;;
  series) measure series 1.0 ;;
  packed) measure packed 0.125 ;;
esac
