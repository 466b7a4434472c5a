"""DVC stage `pairs`: the hack pairs (authored, checked against the substrate and the student tokenizer,
or self-generated) and the placebo pairs, for extract_vact."""
from vgrout import stage
from vgrout.pairs import source as pairsource

stage.main("pairs", pairsource.pairs_stage)
