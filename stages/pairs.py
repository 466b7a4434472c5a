"""DVC stage `pairs`: validate the authored pairs against the substrate and the student tokenizer."""
from vgrout import pairs, stage

stage.main("pairs", pairs.pairs_stage)
