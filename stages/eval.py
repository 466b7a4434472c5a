"""DVC stage `eval@ARM-SEED` (or `eval_base`): deploy and train-mode evaluation on the test split."""
import sys

from vgrout import evaluate, params

p = params.load()
evaluate.run_stage(p, arm=sys.argv[1], seed=int(sys.argv[2]) if len(sys.argv) > 2 else None)
