"""After routeA's training: routeA's eval and the yoked arms, with the final adapter's eval only
(no per-checkpoint curve), to fit the session."""
import sys, time
from vgrout import config, evaluate, train
from vgrout.config import read_yaml

p = config.parse(config.overlay(read_yaml("params.yaml"),
                                {"train": {"arms": ["none", "routeA"], "yoked": ["placebo", "random"], "seeds": [0]}}),
                 "params.yaml + arms none, routeA; yoked placebo, random; seeds 0")
object.__setattr__(p.eval, "curve_views", [])  # no per-checkpoint curve (the schema wants one view): final adapter only
def t(msg, t0): print(f"{msg}: {time.time() - t0:.0f} s", flush=True)
t0 = time.time(); evaluate.eval_stage(p, "routeA", 0); t("eval routeA", t0)
for arm in ["placebo", "random"]:
    t0 = time.time(); train.train_stage(p, arm, 0); t(f"train {arm}", t0)
    t0 = time.time(); evaluate.eval_stage(p, arm, 0); t(f"eval {arm}", t0)
