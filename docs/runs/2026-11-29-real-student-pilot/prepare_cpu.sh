set -e
. /work/main/.venv/bin/activate
export PYTHONPATH=/tmp/pilot
cd /tmp/pilot
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
