"""DVC stage `extract_vact@SEED`: v_act (or the Haar placebo) at the adapter init of SEED."""
import sys

from vgrout import stage
from vgrout.routing import extract

stage.main("extract_vact", extract.extract_stage, int(sys.argv[1]))
