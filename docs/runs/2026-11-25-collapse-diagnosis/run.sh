#!/usr/bin/env bash
# The collapse diagnosis on one GPU: why does every routed arm of the replication deploy a model
# that neither solves nor hacks? routeA under variants of the knobs that set what the deployed block
# is trained on, beside `none`; seeds 0 and 1, 36 steps of the replication preset, both views at
# every 12th step. Run from the repository root, with the wheels and the GGUF in $STASH:
#   bash run.sh 1   frac0   routeA as the replication ran it (train.gen_deploy_frac 0: the deployed model alone is never sampled)
#                   frac25  routeA, gen_deploy_frac 0.25 (meant as 2 of a step's 8 student rows sampled with the quarantine ablated)
#                   frac50  routeA, gen_deploy_frac 0.5 (1 of each group's 2 student rows)
#                   mix0    routeA, train.mix 0 (no teacher-pool rows)
#                   none    plain GRPO (the control)
#   bash run.sh 2   tzkeep    routeA, gate.teacher_zone keep (teacher rows train the deployed model alone), and
#                             placebo yoked to it
#                   nonemix0  plain GRPO, train.mix 0 (the control of mix0)
#   bash run.sh 3   nokeep    routeA, gate.q_lo 0 (a row is kept only below every past score: almost no keep rows)
#                   noroute   routeA, gate.q_hi 1 (a row is routed only above every past score: almost no route rows)
#                   absorb    the absorb arm (the control the first rounds lacked)
#                   Round 3 takes the substrate, the teacher pool and the pairs from $STASH/up: those
#                   stages' outputs from the CPU default's `dvc repro` (they do not depend on the device),
#                   so its substrate is the default's (substrate.test_frac 0.15: 356 train, 64 test
#                   problems), not the replication's; it runs only the model and v_act stages here.
#   bash run.sh 4   fix candidates, seeds 0-2, on round 3's carried substrate; each gated variant with
#                   placebo yoked to its routeA, and only the deploy view on the curve:
#                   control  none and absorb as the replication ran them (the controls of tzgate)
#                   tzgate   routeA, gate.teacher_zone gate (teacher rows cut at the same quantiles of
#                            their own past scores; the yoked placebo copies both sources' counts)
#                   sbase    none and routeA, train.baseline students (each group's baseline is the
#                            mean of its student rows, not of the teacher-pool rows too)
#                   both     routeA, both of these (its none is sbase's)
#   bash run.sh 5   the fix chosen after round 4 (both), on fresh seeds 3-7: none, routeA, placebo (yoked)
#                   and heldout (v_act from the pairs of two modes: the C2 arm)
#   bash run.sh 6   round 5 less heldout and less the probe (to fit the device time left): none, routeA
#                   and placebo (yoked) under both fixes, on fresh seeds 3-7
#   bash run.sh 7   round 6 with the tgate arm (routeA's teacher gate, every student row absorbed),
#                   its contrast absorb (no row gated) and heldout (C2), each gated arm with a placebo
#                   yoked to it (variants both, yt, yh): none, routeA, absorb, tgate, heldout and the
#                   three placebos on seeds 3-7
# Where $STASH holds no wheels, /tmp/site must already hold the packages they install. Where
# $STASH/bw holds bubblewrap (the bwrap binary and the libraries it links, from a Debian 12
# machine), it is installed and the grader runs isolated; else with rlimits only.
ROUND=${1:?round 1, 2, 3, 4, 5, 6 or 7}
set -euo pipefail
STASH=${STASH:-/tmp/stash}; W=${W:-/tmp/cw}; SRC=$(pwd)
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
. "$SRC/docs/runs/sandbox_on_device.sh"  # bubblewrap where carried, else rlimits only
mkdir -p ~/.cache/vgrout/gguf
cat "$STASH"/g.* > ~/.cache/vgrout/gguf/SmolLM2-135M-Instruct.Q4_1.gguf
if compgen -G "$STASH/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$STASH"/*.whl
fi
py() { PYTHONPATH="$PWD:/tmp/site" python3 "$@"; }  # the workspace's own vgrout, the carried wheels
export -f py
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
py -c "import torch, transformers, dvclive; print('torch', torch.__version__, 'transformers', transformers.__version__)"

par() {  # run each argument as a command in the background; fail if any fails
  local pids=() rc=0
  for c in "$@"; do bash -c "$c" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return $rc
}

rm -rf "$W" && mkdir -p "$W/base"
tar -C "$SRC" --exclude=.devcarry --exclude=.git -cf - . | tar -C "$W/base" -xf -
cd "$W/base"
py -m vgrout.cli preset replication
python3 - <<'E'
import yaml
p = yaml.safe_load(open("params.yaml"))
p["train"].update(steps=36, seeds=[0, 1], arms=["routeA"], yoked=[])
p["eval"].update(n_samples=4, curve_views=["deploy", "train"])
yaml.safe_dump(p, open("params.yaml", "w"), sort_keys=False)
E
date -u +"upstream start %FT%TZ"
if [ "$ROUND" -ge 3 ]; then
  cp -r "$STASH/up/." .
  sed -i 's/^  test_frac: 0.25$/  test_frac: 0.15/' params.yaml  # the carried substrate's split
  py stages/model.py
  SEEDS=(0 1 2); [ "$ROUND" -ge 5 ] && SEEDS=(3 4 5 6 7)
  cmds=(); for s in "${SEEDS[@]}"; do cmds+=("py stages/extract_vact.py $s"); done; par "${cmds[@]}"
else
  for s in model substrate pairs; do py stages/$s.py; done
  par "py stages/extract_vact.py 0" "py stages/extract_vact.py 1" "py stages/teacher_pool.py"
fi
date -u +"upstream done %FT%TZ"

variant() {  # NAME KEY=VALUE...: a copy of base with params edited
  local v=$1; shift
  mkdir -p "$W/$v" && (cd "$W/base" && tar --exclude=./models -cf - .) | tar -C "$W/$v" -xf -
  ln -s "$W/base/models" "$W/$v/models"
  (cd "$W/$v" && python3 - "$@" <<'E'
import sys, yaml
p = yaml.safe_load(open("params.yaml"))
for kv in sys.argv[1:]:
    k, v = kv.split("=", 1)
    block, key = k.split(".")
    p[block][key] = yaml.safe_load(v)
yaml.safe_dump(p, open("params.yaml", "w"), sort_keys=False)
E
  )
}
case $ROUND in
  1) variant frac0; variant frac25 train.gen_deploy_frac=0.25; variant frac50 train.gen_deploy_frac=0.5
     variant mix0 train.mix=0.0; variant none "train.arms=[none]"
     RUNS=(); for v in frac0 frac25 frac50 mix0; do for s in 0 1; do RUNS+=("$v routeA $s"); done; done
     RUNS+=("none none 0" "none none 1"); YOKED=() ;;
  2) variant tzkeep gate.teacher_zone=keep "train.yoked=[placebo]"; variant nonemix0 "train.arms=[none]" train.mix=0.0
     RUNS=("tzkeep routeA 0" "tzkeep routeA 1" "nonemix0 none 0" "nonemix0 none 1")
     YOKED=("tzkeep placebo 0" "tzkeep placebo 1") ;;
  3) variant nokeep gate.q_lo=0.0; variant noroute gate.q_hi=1.0; variant absorb "train.arms=[absorb]"
     RUNS=(); for v in nokeep noroute; do for s in 0 1; do RUNS+=("$v routeA $s"); done; done
     RUNS+=("absorb absorb 0" "absorb absorb 1"); YOKED=() ;;
  4) S="train.seeds=[0, 1, 2]"; C="eval.curve_views=[deploy]"
     variant control "$S" "$C" "train.arms=[none, absorb]"
     variant tzgate "$S" "$C" gate.teacher_zone=gate "train.yoked=[placebo]"
     variant sbase "$S" "$C" train.baseline=students "train.arms=[none, routeA]" "train.yoked=[placebo]"
     variant both "$S" "$C" gate.teacher_zone=gate train.baseline=students "train.yoked=[placebo]"
     RUNS=(); YOKED=()
     for s in 0 1 2; do
       RUNS+=("control none $s" "control absorb $s" "tzgate routeA $s" "sbase none $s" "sbase routeA $s" "both routeA $s")
       YOKED+=("tzgate placebo $s" "sbase placebo $s" "both placebo $s")
     done ;;
  5) variant both "train.seeds=[3, 4, 5, 6, 7]" "eval.curve_views=[deploy]" gate.teacher_zone=gate \
       train.baseline=students "train.arms=[none, routeA, heldout]" "train.yoked=[placebo]"
     RUNS=(); YOKED=()
     for s in 3 4 5 6 7; do RUNS+=("both none $s" "both routeA $s" "both heldout $s"); YOKED+=("both placebo $s"); done ;;
  7) S="train.seeds=[3, 4, 5, 6, 7]"; C="eval.curve_views=[deploy]"; F="gate.teacher_zone=gate train.baseline=students"
     # one variant per yoke target, so that each placebo copies the counts of the arm it controls
     variant both "$S" "$C" $F "train.arms=[none, routeA, absorb]" "train.yoked=[placebo]"
     variant yt "$S" "$C" $F "train.arms=[tgate]" "train.yoked=[placebo]" gate.yoke_to=tgate
     variant yh "$S" "$C" $F "train.arms=[heldout]" "train.yoked=[placebo]" gate.yoke_to=heldout
     RUNS=(); YOKED=()
     for s in 3 4 5 6 7; do
       RUNS+=("both none $s" "both routeA $s" "both absorb $s" "yt tgate $s" "yh heldout $s")
       YOKED+=("both placebo $s" "yt placebo $s" "yh placebo $s")
     done ;;
  6) variant both "train.seeds=[3, 4, 5, 6, 7]" "eval.curve_views=[deploy]" gate.teacher_zone=gate \
       train.baseline=students "train.arms=[none, routeA]" "train.yoked=[placebo]"
     RUNS=(); YOKED=()
     for s in 3 4 5 6 7; do RUNS+=("both none $s" "both routeA $s"); YOKED+=("both placebo $s"); done ;;
esac
each() {  # STAGE_SCRIPT LOG RUN...: the stage for every run, in parallel
  local script=$1 log=$2; shift 2; local cmds=()
  for r in "$@"; do set -- $r; cmds+=("cd $W/$1 && py $script $2 $3 > $W/$1/$log-$2-$3.log 2>&1"); done
  par "${cmds[@]}"
}
date -u +"train start %FT%TZ"; each stages/train.py train "${RUNS[@]}"
[ ${#YOKED[@]} -eq 0 ] || each stages/train_yoked.py train "${YOKED[@]}"
date -u +"train done %FT%TZ"
each stages/eval.py eval "${RUNS[@]}" "${YOKED[@]}"; date -u +"eval done %FT%TZ"
[ "$ROUND" -ge 6 ] && { echo ALL DONE; exit 0; }
cmds=(); for r in "${RUNS[@]}" "${YOKED[@]}"; do set -- $r; cmds+=("cd $W/$1 && py $W/base/docs/runs/2026-11-25-collapse-diagnosis/probe.py $1 $2-$3 > $W/$1/probe-$2-$3.json 2> $W/$1/probe-$2-$3.log"); done
par "${cmds[@]}"; date -u +"probe done %FT%TZ"
echo ALL DONE
