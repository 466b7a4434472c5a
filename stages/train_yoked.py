"""DVC stage `train_yoked@ARM-TO-SEED`: a yoked arm's run that copies arm TO's per-step counts."""
import sys

from vgrout import arms, stage
from vgrout.train import loop as train

stage.main("train_yoked", train.train_stage, arms.yoked_name(sys.argv[1], sys.argv[2]), int(sys.argv[3]))
