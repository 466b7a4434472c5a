#!/usr/bin/env bash
# routeV and the comparison arms at the replication preset's settings (48 steps, 106 test problems
# x 8 samples), on the substrate, pairs and teacher pool of ../2026-11-26-replication-h100 (as
# ../2026-11-26-replication-yoked/run.sh does), on one GPU, each stage called directly (no Ray, no dvc):
#   wave 1: routeV seeds 0-4; routeA-0 and none-0 (controls: identity with the earlier run, and
#           routeA is routeV's step-time baseline on this machine); erase, oracle, penalty, screen,
#           inoculate, noloophole seeds 0-2;
#   wave 2: placebo yoked to routeV (placebo_routeV), seeds 0-4, each started once routeV-SEED's
#           train has ended (it copies that run's steps.jsonl), beside routeV-SEED's eval.
# Run from the repository root, in the background:
#   STASH=/tmp/stash setsid nohup bash docs/runs/2026-11-26-comparison-arms/run.sh > /tmp/run.out 2>&1 &
# $STASH holds part.00 ... part.19 (a tgz: site/, the Python packages the machine lacks, Ray left
# out, and the GGUF), bw/ (bubblewrap) and up2.tgz (data/substrate, data/pool, runs/pairs; md5s
# checked against the earlier run's dvc.lock). Poll with poll.sh beside this file.
main() {
set -uo pipefail
STASH=${STASH:-/tmp/stash}; W=${W:-/tmp/rep}; SRC=$(pwd)
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
. "$SRC/docs/runs/sandbox_on_device.sh"  # bubblewrap where carried, else rlimits only
PACK_MD5=baca595c9057fc00df17a7c3770b012a
got=$(cat "$STASH"/part.* | md5sum | cut -d' ' -f1)
[ "$got" = "$PACK_MD5" ] || { echo "FAILED: parts md5 $got, want $PACK_MD5"; exit 1; }
mkdir -p /tmp/pack ~/.cache/vgrout/gguf
cat "$STASH"/part.* | tar -C /tmp/pack -xzf - || { echo "FAILED: unpacking"; exit 1; }
mv /tmp/pack/SmolLM2-135M-Instruct.Q4_1.gguf ~/.cache/vgrout/gguf/
export PYTHONPATH="$W:/tmp/pack/site"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
MEM=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
P=${P:-$([ "$MEM" -gt 100000 ] && echo 20 || echo 14)}  # runs at once: about 3.6 GiB each
echo "P=$P"
rm -rf "$W" && mkdir -p "$W"
tar -C "$SRC" --exclude=./.devcarry -cf - . | tar -C "$W" -xf -
cd "$W"
rm -rf metrics/runs metrics/vact metrics/artifacts
python3 -m vgrout.cli preset replication
tar -xzf "$STASH/up2.tgz"
python3 - <<'E' || { echo "FAILED: inputs differ from the earlier run's"; exit 1; }
import hashlib, yaml
lock = yaml.safe_load(open("docs/runs/2026-11-26-replication-h100/dvc.lock"))["stages"]
want = {o["path"]: o["md5"] for s in ("substrate", "pairs", "teacher_pool") for o in lock[s]["outs"]}
for path in ("data/substrate/train.jsonl", "data/substrate/test.jsonl", "runs/pairs/pairs.json", "data/pool/pool.jsonl"):
    got = hashlib.md5(open(path, "rb").read()).hexdigest()
    print(path, got, "ok" if got == want[path] else f"DIFFERS from {want[path]}")
    assert got == want[path]
E
date -u +"upstream start %FT%TZ"
python3 stages/model.py > model.log 2>&1 || { echo "FAILED: model"; exit 1; }
for s in 0 1 2 3 4; do python3 stages/extract_vact.py $s > vact-$s.log 2>&1 & done; wait
for s in 0 1 2 3 4; do [ -f metrics/vact/$s.json ] || { echo "FAILED: vact $s"; exit 1; }; done
ls runs/vact/0
mkdir -p logs
date -u +"runs start %FT%TZ"
{ for s in 0 1 2 3 4; do echo "routeV $s"; done; echo "routeA 0"; echo "none 0"
  for s in 0 1 2; do for a in erase oracle penalty screen inoculate noloophole; do echo "$a $s"; done; done
} | xargs -P "$P" -L1 bash -c 'a=$1; s=$2; r=$a-$s; t=$SECONDS
  if python3 stages/train.py $a $s > logs/$r.train.log 2>&1; then
    if [ $a = routeV ]; then  # wave 2: the placebo yoked to routeV-SEED, beside its eval
      ( y=placebo_routeV-$s; u=$SECONDS
        python3 stages/train_yoked.py placebo routeV $s > logs/$y.train.log 2>&1 \
          && python3 stages/eval_yoked.py placebo routeV $s > logs/$y.eval.log 2>&1 \
          && echo "done $y $((SECONDS - u))s" || echo "RUN FAILED $y" ) &
    fi
    python3 stages/eval.py $a $s > logs/$r.eval.log 2>&1 && echo "done $r $((SECONDS - t))s" || echo "RUN FAILED $r"
    wait
  else
    echo "RUN FAILED $r"; [ $a = routeV ] && echo "RUN FAILED placebo_routeV-$s (routeV-$s did not train)"
  fi' _
date -u +"runs done %FT%TZ"
echo ALL DONE
}
main "$@"; exit
