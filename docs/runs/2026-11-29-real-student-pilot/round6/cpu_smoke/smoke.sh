# usage: S=<scratch dir holding snap/ (the snapshot) and stash/> bash smoke.sh, from a checkout with .venv
set -x
export PATH=$PWD/.venv/bin:$PATH STASH=$S/stash FAN_WS=$S/wsF FAN_NO_INSTALL=1 FAN_PRESET=r6smoke FAN_DATA=$S/stash/data VGROUT_CACHE=$S/vcache
cd $S/snap && . docs/runs/device_fanout_setup.sh || exit 1
pwd; t0=$(date +%s)
timeout -s INT 1500 python3 -m vgrout.cli fanout > $S/fanout.log 2>&1; echo "fanout rc $? in $(( $(date +%s) - t0 )) s"
