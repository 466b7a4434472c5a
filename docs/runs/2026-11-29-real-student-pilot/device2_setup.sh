# Round 2: sourced by each device call's script from a workspace (/tmp/wsA, wsE, wsP: the tars that
# /tmp/dev/prep.py-like preparation built from the commit's tree and round 1's built inputs, see
# README "Round 2"). Wheels the GPU image lacks, bubblewrap, the GGUF files joined from their pieces
# (sha256-checked), and a stand-in `dvclive` (the image has none; train's steps.jsonl holds every
# step row, the stand-in only swallows the live/ views).
STASH=${STASH:-/tmp/stash}
export VGROUT_CACHE=/tmp/vcache PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [ ! -f /tmp/site/.done ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$STASH"/*.whl || return 1
  mkdir -p /tmp/site/dvclive
  printf 'class Live:\n    def __init__(self, *a, **k):\n        self.step = 0\n    def log_metric(self, *a, **k):\n        pass\n    def make_summary(self, *a, **k):\n        pass\n' > /tmp/site/dvclive/__init__.py
  touch /tmp/site/.done
fi
export PYTHONPATH=/tmp/site:$(pwd)
. docs/runs/sandbox_on_device.sh
mkdir -p $VGROUT_CACHE/gguf
for g in Qwen2.5-Coder-0.5B-Instruct-AWQ.Q4_K_M.gguf Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf; do
  [ -f $VGROUT_CACHE/gguf/$g ] || [ ! -f "$STASH/$g.p00" ] || bash "$STASH"/pieces join "$STASH/$g" $VGROUT_CACHE/gguf/$g || return 1
done
