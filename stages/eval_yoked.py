"""DVC stage `eval_yoked@ARM-SEED`: deploy and train-mode evaluation of a yoked arm's run."""
import sys

from vgrout import evaluate, stage

stage.main("eval_yoked", evaluate.eval_stage, sys.argv[1], int(sys.argv[2]))
