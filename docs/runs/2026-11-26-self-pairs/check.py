"""Self-generated pairs (pairs.source self) on the default: the student at its init writes 8 pairs per
mode on fresh problems (the pairs stage's code, in a scratch layout beside the default's model and
substrate); v_act and v_grad from them (seed 0's adapter init, the frozen scorer); then how well each
separates the 40 authored pairs, against the authored pairs' own directions (leave-one-out) and Haar
directions. Run from the repository root after `dvc repro`:
    python docs/runs/2026-11-26-self-pairs/check.py > docs/runs/2026-11-26-self-pairs/result.json"""
import json
import shutil
import tempfile
from pathlib import Path

from vgrout.engine import adapter as ad
from vgrout import config
from vgrout.pairs import source as pairsource
from vgrout.routing import extract as vact
from vgrout.io import read_json
from vgrout.layout import Layout
from vgrout.engine.model import load
from vgrout.pairs.pairs import Pair

params = config.load()
params = config.parse(config.overlay(params.model_dump(), {"pairs": {"source": "self"}}), "self-pairs")


def pairs_of(data, key):
    return [Pair(**{**p, "tags": tuple(p["tags"])}) for p in data[key]]


with tempfile.TemporaryDirectory() as tmp:
    lay = Layout(Path(tmp))
    shutil.copytree("data/substrate", lay.substrate)
    (lay.model.parent).mkdir(parents=True)
    lay.model.symlink_to(Path("models/student").resolve())
    report = pairsource.pairs_stage(params, lay)
    self_data = read_json(lay.pairs)
selfp, authored = pairs_of(self_data, "pairs"), pairs_of(read_json("runs/pairs/pairs.json"), "pairs")
model, tok = load("models/student")
a = params.adapter
lora = ad.attach(model, r=a.r, init_scale=a.init_scale, seed=0, targets=a.targets, last_layers=a.last_layers)
enc = dict(budget=params.train.max_new_tokens, batch_size=params.vact.batch_size, fast=params.fast)
out = {"n_self_pairs": len(selfp), "per_mode": report["per_mode"],
       "examples": [{"mode": p.mode, "hack": p.hack[:300], "clean": p.clean[:300]} for p in selfp[::8]]}
for space in vact.SPACES:
    v_self, diag = vact.extract(lora, tok, selfp, self_data["system"], None, 20, False, space=space, **enc)
    h_hack, h_clean = vact.pair_features(lora, tok, authored, self_data["system"], space=space, **enc)
    v_auth, diag_auth = vact.fit(h_hack, h_clean, authored, None, 20, space)
    out[space] = {"self_pairs_own_separation": diag["separation"], "self_pairs_loo_separation": diag["loo_separation"],
                  "separation_of_authored_pairs_by_self_direction": vact.separation(h_hack, h_clean, v_self),
                  "authored_loo_separation": diag_auth["loo_separation"],
                  "haar_separation_of_authored_pairs": diag_auth["haar_separation"],
                  "cosine_self_vs_authored_per_module_mean": float(sum(float(v_self[m] @ v_auth[m]) for m in v_self) / len(v_self))}
print(json.dumps(out, indent=1))
