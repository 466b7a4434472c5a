"""DVC stage `substrate`: problems with loophole modes, train/test split, self-check."""
from vgrout import params, substrate

p = params.load()
substrate.build_stage(params.get(p, "substrate"), out_dir="data/substrate",
                      check_path="metrics/substrate_check.json")
