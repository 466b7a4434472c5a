"""DVC stage `substrate`: problems with loophole modes, train/test split, self-check."""
from vgrout import stage
from vgrout.substrate import selfcheck

stage.main("substrate", selfcheck.build_stage)
