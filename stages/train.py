"""DVC stage `train@ARM-SEED`: Dr.GRPO on the lora2r student under the arm's gate."""
import sys

from vgrout import params, train

p = params.load()
train.train(train.config_from_params(p, arm=sys.argv[1], seed=int(sys.argv[2])))
