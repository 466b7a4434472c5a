# What ran on the CPU before the device calls, in this order (logs: prepare_cpu.log.gz):
# REPO: the project checkout; MIX0_WS, POOL_WS: copies of its tree (git worktrees) for the two workspaces
# 1. the mix-0 workspace ($MIX0_WS = this commit's parent tree with bench/pilot.py and presets pilot.yaml);
#    its extract_vact was stopped (too slow here) and ran on the device instead.
set -e
. $REPO/.venv/bin/activate
export PYTHONPATH=$MIX0_WS
cd $MIX0_WS
t0=$(date +%s)
python stages/model.py
echo "model $(( $(date +%s)-t0 ))s"
python - <<'PY'
# the substrate stage without its last step (the base model's rates on the test split at 1,024
# tokens: measured on the GPU by bench/pilot.py rates instead)
from pathlib import Path
from vgrout import config
from vgrout.io import write_json
from vgrout.layout import Layout
from vgrout.substrate import problems as substrate, selfcheck
p, L = config.load(), Layout()
train, test, report = selfcheck.build_block(p.substrate)
substrate.write_problems(L.train_problems, train)
substrate.write_problems(L.test_problems, test)
write_json(L.substrate_check, report)
print(selfcheck.format_check(report))
PY
echo "substrate $(( $(date +%s)-t0 ))s"
python stages/pairs.py
echo "pairs $(( $(date +%s)-t0 ))s"
python stages/teacher_pool.py || echo "teacher_pool FAILED"
echo "pool $(( $(date +%s)-t0 ))s"
python stages/extract_vact.py 0
echo "vact $(( $(date +%s)-t0 ))s"

# 2. the pool workspace (presets pilot_pool.yaml); its extract_vact stopped likewise
set -e
. $REPO/.venv/bin/activate
export PYTHONPATH=$POOL_WS
cd $POOL_WS
while pgrep -f "bash logs/prep.sh" >/dev/null; do sleep 5; done
t0=$(date +%s)
mkdir -p models && cp -r $MIX0_WS/models/student models/student
python - <<'PY'
from vgrout import config
from vgrout.io import write_json
from vgrout.layout import Layout
from vgrout.substrate import problems as substrate, selfcheck
p, L = config.load(), Layout()
train, test, report = selfcheck.build_block(p.substrate)
substrate.write_problems(L.train_problems, train)
substrate.write_problems(L.test_problems, test)
write_json(L.substrate_check, report)
print(selfcheck.format_check(report))
PY
echo "substrate $(( $(date +%s)-t0 ))s"
python stages/pairs.py
python stages/teacher_pool.py
echo "pool $(( $(date +%s)-t0 ))s"
python stages/extract_vact.py 0
echo "vact $(( $(date +%s)-t0 ))s"

# 3. the mix-0 workspace again after the pair-file fix, with the surrogate pool (mix 0 draws no pool row)
set -e
. $REPO/.venv/bin/activate
export PYTHONPATH=$MIX0_WS
cd $MIX0_WS
t0=$(date +%s)
python -m vgrout.cli preset pilot
python stages/pairs.py
echo "pairs $(( $(date +%s)-t0 ))s"
python stages/teacher_pool.py || echo "teacher_pool FAILED"
echo "pool $(( $(date +%s)-t0 ))s"
python stages/extract_vact.py 0
echo "vact $(( $(date +%s)-t0 ))s"
