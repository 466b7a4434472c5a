"""DVC stage `eval_yoked@ARM-TO-SEED`: deploy and train-mode evaluation of a yoked arm's run."""
import sys

from vgrout import arms, stage
from vgrout.eval import evaluate

stage.main("eval_yoked", evaluate.eval_stage, arms.yoked_name(sys.argv[1], sys.argv[2]), int(sys.argv[3]))
