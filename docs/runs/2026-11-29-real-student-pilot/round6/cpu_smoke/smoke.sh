set -x
export PATH=/work/main/.venv/bin:$PATH STASH=/tmp/r6smoke/stash FAN_WS=/tmp/r6smoke/wsF FAN_NO_INSTALL=1 FAN_PRESET=r6smoke FAN_DATA=/tmp/r6smoke/stash/data VGROUT_CACHE=/tmp/r6smoke/vcache
cd /tmp/r6smoke/snap && . docs/runs/device_fanout_setup.sh || exit 1
pwd; t0=$(date +%s)
timeout -s INT 1500 python3 -m vgrout.cli fanout > /tmp/r6smoke/fanout.log 2>&1; echo "fanout rc $? in $(( $(date +%s) - t0 )) s"
