"""Operations: the runs as tasks on a Ray cluster (fanout) and the DVC remote checks (remote)."""
