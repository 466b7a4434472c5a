#!/bin/bash
# rev12: run container12.py inside a v1 cpu cgroup of ONE CPU (quota 100000/100000), then remove the cgroup (as rev11's container.sh)
CG=/sys/fs/cgroup/cpu/rt12_container
mkdir -p $CG && echo 100000 > $CG/cpu.cfs_period_us && echo 100000 > $CG/cpu.cfs_quota_us
cleanup() { sleep 3; for d in $CG/vgrout/*/ ; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done; rmdir $CG/vgrout 2>/dev/null; for i in 1 2 3 4 5; do rmdir $CG 2>/dev/null && break; sleep 2; done; [ -d $CG ] && echo "WARNING: $CG left in place" && cat $CG/cgroup.procs; }
trap cleanup EXIT
bash -c "echo \$\$ > $CG/cgroup.procs && exec nice -n 19 $PYTHON docs/redteam/rev12/container12.py $*"
