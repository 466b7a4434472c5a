# Sourced by the device runs' scripts: the grader's isolation on a lent machine. Where $STASH/bw
# holds bubblewrap (the bwrap binary and the libraries it links, from a Debian 12 machine), install
# it and grade isolated; else grade with rlimits only (VGROUT_ISOLATION=rlimit), which cannot keep
# ground truth from the graded code (README, "Ground truth the graded code cannot write").
if [ -x "$STASH/bw/bwrap" ]; then
  cp "$STASH/bw/bwrap" /usr/local/bin/
  for l in "$STASH"/bw/lib*.so*; do ldconfig -p | grep -q "$(basename "$l")" || cp "$l" /usr/local/lib/; done; ldconfig
  bwrap --version || { echo "FAILED: bubblewrap"; exit 1; }
else
  export VGROUT_ISOLATION=rlimit
fi
