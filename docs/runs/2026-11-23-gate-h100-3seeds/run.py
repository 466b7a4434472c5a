"""The embedded default's arms through the stage functions dvc.yaml runs (model, extract_vact,
train, eval), on one GPU; substrate, pairs and teacher pool come from the CPU pipeline.
Usage: python3 run.py model SEED...   |   python3 run.py train ARM SEED   |   python3 run.py eval ARM SEED
(eval base: python3 run.py eval base)."""
import sys, time
from vgrout import config, evaluate, model, train, vact
from vgrout.config import read_yaml

phase = sys.argv[1]
p = config.parse(config.overlay(read_yaml("params.yaml"),
                                {"train": {"arms": ["none", "routeA", "absorb"], "yoked": ["placebo", "random"],
                                           "seeds": [0, 1, 2]}}),
                 "params.yaml + arms none, routeA, absorb; yoked placebo, random; seeds 0, 1, 2")
t0 = time.time()
if phase == "model":
    model.model_stage(p)
    for s in sys.argv[2:]:
        vact.extract_stage(p, int(s), progress=False)
elif phase == "train":
    train.train_stage(p, sys.argv[2], int(sys.argv[3]))
elif phase == "eval":
    arm = sys.argv[2]
    evaluate.eval_stage(p, arm, None if arm == "base" else int(sys.argv[3]))
print(f"{' '.join(sys.argv[1:])}: {time.time() - t0:.0f} s", flush=True)
