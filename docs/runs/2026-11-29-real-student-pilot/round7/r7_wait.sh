# Round 7: wait (at most $1 s) for r7_measure.sh, then copy what exists to $OUT.
#   bash round7/r7_wait.sh SECONDS
end=$(( $(date +%s) + $1 ))
while [ ! -f /tmp/r7/done ] && [ $(date +%s) -lt $end ]; do sleep 5; done
tail -20 /tmp/r7/run.log; mkdir -p $OUT/r7 && cp -r /tmp/r7/out/. $OUT/r7/ 2>/dev/null; cp /tmp/r7/run.log $OUT/r7/
gzip -f $OUT/r7/smi.csv 2>/dev/null; du -sh $OUT/r7
