#!/usr/bin/env bash
# Packing runs on one GPU with `vgrout fanout`: the embedded default's run stages of seed 0 (5 free
# arms, 2 yoked arms, their evals and eval_base), with train.steps 12 so that the series fits in
# minutes. Once in series (fanout.gpu_share 1: one run on the GPU at a time), once packed
# (fanout.gpu_share SHARE, default 0.125: up to 8 runs share the GPU), each on a fresh local Ray
# cluster, with the upstream stages run once before both. Prints both wall times and their ratio
# (the packing's throughput gain), and writes OUT/{series,packed}.json, their logs and dvc.lock.
#
# Usage, from a checkout (committed HEAD is what runs; it works in a clone under OUT):
#   bash bench/bench_fanout.sh OUT [all|upstream|series|packed|report] [SHARE]
# The phases can run in separate calls on the same machine (all = the four in a row).
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
  sed -i -E 's/^  steps: 36 /  steps: 12 /' params.yaml
  commit "bench: 12 steps"
  dvc repro substrate model pairs extract_vact@0 teacher_pool
  commit "bench: upstream"
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$out/gpu.txt" 2>/dev/null || echo "no GPU" > "$out/gpu.txt"
}

measure() {  # NAME GPU_SHARE: every run stage from the upstream state, on a fresh cluster
  cd "$repo"
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
res = {"gpu_share": share, "wall_s": round(t1 - t0, 1), "n_stages": len(status),
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
s, p = (json.load(open(f"{sys.argv[1]}/{n}.json")) for n in ("series", "packed"))
print(f"{s['n_stages']} run stages: series {s['wall_s']:.0f} s, packed at gpu_share {p['gpu_share']} "
      f"{p['wall_s']:.0f} s: {s['wall_s'] / p['wall_s']:.2f}x throughput")
import yaml  # the same results either way? every lock hash but the step logs' (wall-clock timings)
locks = [yaml.safe_load(open(f"{sys.argv[1]}/{n}.dvc.lock"))["stages"] for n in ("series", "packed")]
differ = sorted({(name, d["path"]) for name, e in locks[0].items() for part in ("deps", "outs")
                 for d in e.get(part, []) if not d["path"].endswith("steps.jsonl")
                 and d not in locks[1].get(name, {}).get(part, [])})
print(f"lock hashes that differ between the two, step logs aside: {len(differ)}", *differ[:20], sep="\n  ")
PY
}

case $phase in
  upstream) upstream ;;
  series) measure series 1.0 ;;
  packed) measure packed "$share" ;;
  report) report ;;
  all) upstream; measure series 1.0; measure packed "$share"; report ;;
  *) echo "unknown phase '$phase': all, upstream, series, packed or report" >&2; exit 2 ;;
esac
