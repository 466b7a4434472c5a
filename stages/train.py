"""DVC stage `train@ARM-SEED`: Dr.GRPO on the lora2r student under the arm's gate."""
import sys

from vgrout import stage
from vgrout.train import loop as train

stage.main("train", train.train_stage, sys.argv[1], int(sys.argv[2]))
