"""The CPU run's `random` arm on the device machine's CPU (16 cores), with the code the other CPU arms
ran (d954e47), routeA's step log and v_act from the 2-core run."""
import os, shutil, sys, time
os.environ["CUDA_VISIBLE_DEVICES"] = ""
import torch
torch.set_num_threads(16)
from vgrout import config, evaluate, model, train
from vgrout.config import read_yaml
p = config.parse(config.overlay(read_yaml("params.yaml"),
                                {"train": {"arms": ["none", "routeA"], "yoked": ["placebo", "random"], "seeds": [0]}}),
                 "params.yaml + arms none, routeA; yoked placebo, random; seeds 0")
object.__setattr__(p.eval, "curve_views", [])
t0 = time.time()
if not os.path.exists("models/student/config.json"):
    model.model_stage(p)
os.makedirs("metrics/runs/routeA-0", exist_ok=True)
shutil.copy(".devcarry/cpu/in/routeA_steps.jsonl", "metrics/runs/routeA-0/steps.jsonl")
if not os.path.exists("runs/vact/0"):
    shutil.copytree(".devcarry/cpu/in/vact0", "runs/vact/0")
print(f"setup {time.time() - t0:.0f} s", flush=True)
t0 = time.time(); train.train_stage(p, "random", 0); print(f"train random {time.time() - t0:.0f} s", flush=True)
t0 = time.time(); evaluate.eval_stage(p, "random", 0); print(f"eval random {time.time() - t0:.0f} s", flush=True)
out = os.environ["OUT"]
for f in ("steps.jsonl", "per_mode_deploy.json"):
    shutil.copy(f"metrics/runs/random-0/{f}", f"{out}/{f}")
