# Round 6 (README "Round 6"): `vgrout fanout` on the one GPU, started detached (setsid) from the call
# that carried the 1.5B's last piece, so that it runs across calls (each call only waits and reads).
# The workspace is the committed snapshot carried as snap.tgz (`git archive` of the commit named in
# snap.commit), with round6/r6mix0.yaml as its preset; docs/runs/device_fanout_setup.sh installs the
# wheels, bubblewrap and the GGUF and makes the fan-out's workspace /tmp/wsF. Logs in /tmp/r6.
#   setsid bash round6/r6_start.sh ROUND6_DIR < /dev/null &
R6=$(cd "$1" && pwd); R=/tmp/r6; mkdir -p $R
exec >> $R/start.log 2>&1
t0=$(date +%s); echo "start $t0 $(date -u)"
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
export STASH=/tmp/stash FAN_WS=/tmp/wsF FAN_PRESET=r6mix0 FAN_DATA=/tmp/stash/data
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
[ -f /tmp/snap/.done ] || { rm -rf /tmp/snap; mkdir -p /tmp/snap && tar -xzf $STASH/snap.tgz -C /tmp/snap && touch /tmp/snap/.done; } || exit 1
cp "$R6/r6mix0.yaml" /tmp/snap/presets/r6mix0.yaml
cd /tmp/snap && . docs/runs/device_fanout_setup.sh || { stamp "FAILED: setup"; exit 1; }
stamp "setup done in $(pwd); GGUF: $(ls $VGROUT_CACHE/gguf)"
[ -n "${R6_SETUP_ONLY:-}" ] && { stamp "setup only"; exit 0; }
python3 -c "import torch, transformers, ray, dvc; print('torch', torch.__version__, 'transformers', transformers.__version__, 'ray', ray.__version__, 'dvc', dvc.__version__, 'cuda', torch.cuda.is_available())"
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -lms 2000 > $R/smi.csv 2>&1 &
echo $! > $R/smi.pid
# which stage commands run, every 5 s (the upstream stages' times; the tasks' start and end)
( while [ ! -f $R/done ]; do echo "$(date +%s) $(ps -eo args | grep -o 'stages/[a-z_]*\.py[ a-zA-Z0-9-]*' | grep -v grep | sort | tr '\n' ';')"; sleep 5; done ) > $R/ps.log 2>&1 &
stamp "fanout starts"
python3 -m vgrout.cli fanout > $R/fanout.log 2>&1
rc=$?; stamp "fanout rc $rc"
touch $R/done; kill $(cat $R/smi.pid) 2>/dev/null
