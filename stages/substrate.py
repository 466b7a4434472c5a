"""DVC stage `substrate`: problems with loophole modes, train/test split, self-check."""
from vgrout import stage, substrate

stage.main("substrate", substrate.build_stage)
