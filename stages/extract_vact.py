"""DVC stage `extract_vact@SEED`: v_act (or the Haar placebo) at the adapter init of SEED."""
import sys

from vgrout import params, vact

p = params.load()
seed = int(sys.argv[1])
vact.extract_stage(p, seed, model_dir="models/student", pairs_path="runs/pairs/pairs.json",
                   out_dir=f"runs/vact/{seed}", metrics_path=f"metrics/vact/{seed}.json")
