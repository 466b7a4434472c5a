"""The embedded default's none, routeA, placebo and random arms (seed 0) through the stage
functions dvc.yaml runs (model, extract_vact, train, eval), on one GPU; substrate, pairs and
teacher pool come from the CPU pipeline (inputs/). Writes each run's step log and eval json
under $OUT. Usage: python3 run_default.py PHASE (model | train ARM | eval ARM)."""
import os, sys, time
from vgrout import config, evaluate, model, train, vact
from vgrout.config import read_yaml

phase = sys.argv[1]
p = config.parse(config.overlay(read_yaml("params.yaml"),
                                {"train": {"arms": ["none", "routeA"], "yoked": ["placebo", "random"]}}),
                 "params.yaml + arms none, routeA; yoked placebo, random")
t0 = time.time()
if phase == "model":
    model.model_stage(p)
    vact.extract_stage(p, 0, progress=False)
elif phase == "train":
    train.train_stage(p, sys.argv[2], 0)
elif phase == "eval":
    arm = sys.argv[2]
    evaluate.eval_stage(p, arm, None if arm == "base" else 0)
print(f"{' '.join(sys.argv[1:])}: {time.time() - t0:.0f} s", flush=True)
