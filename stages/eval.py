"""DVC stage `eval@ARM-SEED`, or `eval_base` (`eval.py base`): deploy and train-mode evaluation."""
import sys

from vgrout import stage
from vgrout.eval import evaluate

arm, seed = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None
stage.main("eval" if seed is not None else "eval_base", evaluate.eval_stage, arm, seed)
