# Round 6: wait up to LIMIT seconds for the detached fan-out (r6_start.sh), printing every 60 s what
# it has done: each stage's state (its status.json), each train's last step, the GPU's memory.
#   bash round6/r6_wait.sh LIMIT
LIMIT=${1:-500}; R=/tmp/r6; t0=$(date +%s); W=/tmp/wsF/.dvc/tmp/fanout
show() {
  echo "== [$(( $(date +%s) - t0 )) s] $(date -u +%H:%M:%S) $(tail -1 $R/smi.csv 2>/dev/null)"
  tail -2 $R/start.log
  grep -o "Running stage '[^']*'" $R/fanout.log 2>/dev/null | tail -1
  [ -f $W/status.json ] && python3 -c "import json; d=json.load(open('$W/status.json')); print(' '.join(f\"{k}:{v['state']}\" + (f\"({v['seconds']:.0f}s)\" if v['seconds'] else '') for k,v in d['stages'].items()))"
  for f in $W/runs/*/metrics/runs/*/steps.jsonl; do [ -f $f ] && echo "$f: $(wc -l < $f) steps; last: $(tail -1 $f | cut -c1-160)"; done
}
while [ ! -f $R/done ] && [ $(( $(date +%s) - t0 )) -lt $LIMIT ]; do show; sleep 60; done
show; [ -f $R/done ] && { echo "FANOUT DONE"; tail -30 $R/fanout.log; }
