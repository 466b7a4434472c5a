"""DVC stage `substrate`: problems with loophole modes, train/test split, self-check."""
from vgrout import params, selfcheck

p = params.load()
selfcheck.build_stage(params.get(p, "substrate"), out_dir="data/substrate",
                      check_path="metrics/substrate_check.json")
