"""Stage 6, deploy evaluation: the trained adapter sampled with the quarantine ablated (deploy) and on (train), graded per sample."""
