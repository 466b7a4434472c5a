# Wait up to LIMIT seconds for the detached fan-out (d_start.sh), printing every 45 s each stage's state (its
# status.json), each train's last step and the GPUs; stops early once every eval stage is done (or the fan-out ended).
#   bash docs/runs/2026-11-30-decisive/d_wait.sh LIMIT
LIMIT=${1:-500}; R=/tmp/dd; t0=$(date +%s); W=/tmp/wsF/.dvc/tmp/fanout
show() {
  echo "== [$(( $(date +%s) - t0 )) s] $(date -u +%H:%M:%S) $(tail -2 $R/smi.csv 2>/dev/null | tr '\n' ' ')"
  tail -2 $R/start.log
  grep -o "Running stage '[^']*'" $R/fanout.log 2>/dev/null | tail -1
  [ -f $W/status.json ] && python3 -c "import json; d=json.load(open('$W/status.json')); print(' '.join(f\"{k}:{v['state']}\" + (f\"({v['seconds']:.0f}s)\" if v['seconds'] else '') for k,v in d['stages'].items()))"
  for f in $W/runs/*/metrics/runs/*/steps.jsonl; do [ -f $f ] && echo "$f: $(wc -l < $f) steps; last: $(tail -1 $f | cut -c1-120)"; done
}
evals_done() {
  [ -f $W/status.json ] && python3 -c "import json,sys; d=json.load(open('$W/status.json'))['stages']; e=[v['state'] for k,v in d.items() if k.startswith('eval')]; sys.exit(0 if e and all(s=='done' for s in e) else 1)"
}
while [ ! -f $R/done ] && ! evals_done && [ $(( $(date +%s) - t0 + 45 )) -lt $LIMIT ]; do show; sleep 45; done
show; [ -f $R/done ] && { echo "FANOUT DONE"; tail -30 $R/fanout.log; }; evals_done && echo "EVALS DONE"; true
