"""DVC stage `train_yoked@ARM-SEED`: a yoked arm, which copies gate.yoke_to's per-step counts."""
import sys

from vgrout import stage, train

stage.main("train_yoked", train.train_stage, sys.argv[1], int(sys.argv[2]))
