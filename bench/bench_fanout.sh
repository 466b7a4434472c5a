#!/usr/bin/env bash
# Packing runs on one GPU, and spreading them over GPUs, with `vgrout fanout`. The workload is the
# embedded default with train.arms GRID_ARMS (default: none, routeA, absorb), no yoked arms and
# train.seeds GRID_SEEDS (default: 0, 1), at train.steps 12 so that the series fits in minutes:
# 6 train stages, their 6 evals and eval_base. Each phase runs every run stage from the same
# upstream state on a fresh local Ray cluster:
#   series  one GPU (the first), fanout.gpu_share 1: one run at a time
#   packed  one GPU (the first), fanout.gpu_share SHARE (default 0.125): up to 8 runs share it
#   spread  every GPU of the machine, fanout.gpu_share 1: one run per GPU at a time
# report prints each wall time, series / packed (packing's throughput gain) and series / spread
# (the GPUs'), and which lock hashes differ; OUT/{series,packed,spread}.json hold the stage times.
#
# Usage, from a checkout (committed HEAD is what runs; it works in a clone under OUT):
#   bash bench/bench_fanout.sh OUT [all|upstream|series|packed|spread|report] [SHARE]
# The phases can run in separate calls on the same machine (all = every one in a row).
# Machines without bubblewrap: VGROUT_ISOLATION=rlimit bash bench/bench_fanout.sh ...
set -euo pipefail
out=$(realpath -m "$1"); phase=${2:-all}; share=${3:-0.125}
mkdir -p "$out"
repo="$out/repo"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"  # the stages import the clone's vgrout
commit() { git add -A && git -c user.name=bench -c user.email=bench@localhost commit -qm "$1" || true; }

upstream() {
  rm -rf "$repo"
  git clone -q "$(git rev-parse --show-toplevel)" "$repo"
  cd "$repo"
  python -m vgrout.cli preset "${PRESET:-default}"  # PRESET=ci: a smoke test on a CPU
  sed -i -E -e 's/^  steps: 36 /  steps: 12 /' -e "s/^  arms: \[[^]]*\] /  arms: [${GRID_ARMS:-none, routeA, absorb}] /" \
    -e 's/^  yoked: \[[^]]*\] /  yoked: [] /' -e "s/^  seeds: \[[^]]*\] /  seeds: [${GRID_SEEDS:-0, 1}] /" params.yaml
  grep -E '^  (steps|arms|yoked|seeds): ' params.yaml
  commit "bench: the grid at 12 steps"
  dvc repro substrate model pairs extract_vact teacher_pool
  commit "bench: upstream"
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$out/gpu.txt" 2>/dev/null || echo "no GPU" > "$out/gpu.txt"
}

measure() {  # NAME GPU_SHARE GPUS: every run stage from the upstream state, on a fresh cluster
  cd "$repo"
  if [ "$3" = first ] && command -v nvidia-smi >/dev/null; then export CUDA_VISIBLE_DEVICES=0; else unset CUDA_VISIBLE_DEVICES; fi
  git checkout -q -- dvc.lock metrics && git clean -qfd metrics
  rm -rf .dvc/tmp/fanout runs/train
  sed -i -E "s/^  gpu_share: [0-9.]+ /  gpu_share: $2 /" params.yaml
  local t0 t1
  t0=$(date +%s.%N)
  python -m vgrout.cli fanout --no-rest > "$out/$1.log" 2>&1
  t1=$(date +%s.%N)
  cp dvc.lock "$out/$1.dvc.lock"
  python - "$1" "$2" "$t0" "$t1" "$out" <<'PY'
import json, sys
name, share, t0, t1, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
status = json.load(open(".dvc/tmp/fanout/status.json"))["stages"]
import os
res = {"gpu_share": share, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", "all"), "wall_s": round(t1 - t0, 1), "n_stages": len(status),
       "states": sorted({s["state"] for s in status.values()}),
       "stage_s": {k: round(v["seconds"] or 0, 1) for k, v in status.items()},
       "where": sorted({v["where"] for v in status.values()})}
json.dump(res, open(f"{out}/{name}.json", "w"), indent=1)
print(name, json.dumps({k: res[k] for k in ("gpu_share", "wall_s", "n_stages", "states")}))
PY
}

report() {
  python - "$out" <<'PY'
import json, sys
import os, yaml
out = sys.argv[1]
runs = {n: json.load(open(f"{out}/{n}.json")) for n in ("series", "packed", "spread")
        if os.path.exists(f"{out}/{n}.json")}
s = runs["series"]
print(f"{s['n_stages']} run stages in series on one GPU: {s['wall_s']:.0f} s")
for n, r in runs.items():
    if n != "series":
        print(f"{n}: gpu_share {r['gpu_share']} on GPUs {r['cuda_visible_devices']}: {r['wall_s']:.0f} s, "
              f"{s['wall_s'] / r['wall_s']:.2f}x the series' throughput")
locks = {n: yaml.safe_load(open(f"{out}/{n}.dvc.lock"))["stages"] for n in runs}
for n in runs:  # the same results either way? every lock hash but the step logs' (wall-clock timings)
    if n != "series":
        differ = sorted({(name, d["path"]) for name, e in locks["series"].items() for part in ("deps", "outs")
                         for d in e.get(part, []) if not d["path"].endswith("steps.jsonl")
                         and d not in locks[n].get(name, {}).get(part, [])})
        print(f"lock hashes that differ, series vs {n}, step logs aside: {len(differ)}", *differ[:20], sep="\n  ")
PY
}

case $phase in
  upstream) upstream ;;
  series) measure series 1.0 first ;;
  packed) measure packed "$share" first ;;
  spread) measure spread 1.0 all ;;
  report) report ;;
  all) upstream; measure series 1.0 first; measure packed "$share" first; measure spread 1.0 all; report ;;
  *) echo "unknown phase '$phase': all, upstream, series, packed, spread or report" >&2; exit 2 ;;
esac
