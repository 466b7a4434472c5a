"""CPU run of the embedded default (issue 13's goal): none, routeA, then yoked placebo, random, seed 0."""
import sys, time
from vgrout import config, evaluate, model, train, vact
from vgrout.config import read_yaml

p = config.parse(config.overlay(read_yaml("params.yaml"),
                                {"train": {"arms": ["none", "routeA"], "yoked": ["placebo", "random"], "seeds": [0]}}),
                 "params.yaml + arms none, routeA; yoked placebo, random; seeds 0")
def t(msg, t0): print(f"{msg}: {time.time() - t0:.0f} s", flush=True)
t0 = time.time(); model.model_stage(p); vact.extract_stage(p, 0, progress=False); t("model+vact", t0)
for arm in ["none", "routeA", "placebo", "random"]:
    t0 = time.time(); train.train_stage(p, arm, 0); t(f"train {arm}", t0)
    t0 = time.time(); evaluate.eval_stage(p, arm, 0); t(f"eval {arm}", t0)
