#!/bin/bash
# Round-5 reproducers re-run against . (6b50c5e). Output in docs/redteam/rev6/step1.out
cd .
PY="nice -n 19 env PYTHONPATH=. python"
for s in and all chain if; do echo "== shortcircuit_keyring 2 $s"; $PY docs/redteam/rev5/shortcircuit_keyring.py 2 $s 2>&1 | tail -2; done
echo "== binds_scan"; $PY docs/redteam/rev5/binds_scan.py 2>&1 | tail -12
echo "== keyring_channel 37"; $PY docs/redteam/rev5/keyring_channel.py 37 2>&1 | tail -4
echo "== mqueue_channel 4"; $PY docs/redteam/rev5/mqueue_channel.py 4 2>&1 | tail -6
echo "== uring_files 4"; $PY docs/redteam/rev5/uring_files.py 4 2>&1 | tail -6
