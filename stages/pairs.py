"""DVC stage `pairs`: validate the authored pairs against the substrate and the student tokenizer."""
from vgrout import pairs, params

p = params.load()
pairs.pairs_stage(files=params.get(p, "pairs.files"), placebo_files=params.get(p, "pairs.placebo_files"),
                  model_dir="models/student", substrate_dir="data/substrate",
                  out_path="runs/pairs/pairs.json", check_path="metrics/pairs_check.json")
