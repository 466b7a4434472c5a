#!/usr/bin/env bash
# This run's script is ../2026-11-26-replication-h100/run.sh, which made the same run again on one
# H100 (same arms, params and fan-out command). Without bubblewrap in $STASH/bw it grades with
# rlimits only (VGROUT_ISOLATION=rlimit), as this run did. The one change since: it tells git to
# ignore fanout.log, which this run wrote inside its tree unignored.
exec bash "$(dirname "$0")/../2026-11-26-replication-h100/run.sh" "$@"
