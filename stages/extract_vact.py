"""DVC stage `extract_vact@SEED`: v_act and v_grad (or a Haar-random direction: gate.random_seed) at
the adapter init of SEED."""
import sys

from vgrout import stage
from vgrout.routing import extract

stage.main("extract_vact", extract.extract_stage, int(sys.argv[1]))
