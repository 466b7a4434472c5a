# Round 6, every carry call: copy what the call carried (one folder of .devcarry, named in `carry`)
# into the stash that stays while the machine is warm (/tmp/stash), and say what the stash holds.
#   bash docs/runs/2026-11-29-real-student-pilot/round6/r6_stash.sh .devcarry/cNN
mkdir -p /tmp/stash && cp -r "$1"/. /tmp/stash/ && echo "stash: $(ls /tmp/stash | wc -l) entries, $(du -sm /tmp/stash | cut -f1) MB"
