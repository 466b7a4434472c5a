"""How much of routeV's score is the text's own NLL under the base model? On the authored pairs of
the default (runs/pairs/pairs.json) and seed 0's adapter init: each side's probe gradient, its score
against v_grad (runs/vact/0/v_grad.safetensors), its mean completion-token NLL (the quantity the probe
differentiates) and the gradient's norm. Run from the repository root after `dvc repro`:
    python docs/runs/2026-11-26-routev-nll/check.py > docs/runs/2026-11-26-routev-nll/result.json
"""
import json

import scipy.stats as sps
import torch

from vgrout.engine import adapter as ad
from vgrout import config
from vgrout.engine import logprob
from vgrout.routing import extract as vact
from vgrout.io import read_json
from vgrout.engine.model import chat_prompt, load
from vgrout.pairs.pairs import Pair
from vgrout.engine.rollout import encode

params = config.load()
data = read_json("runs/pairs/pairs.json")
pairs = [Pair(**{**p, "tags": tuple(p["tags"])}) for p in data["pairs"]]
model, tok = load("models/student")
a = params.adapter
lora = ad.attach(model, r=a.r, init_scale=a.init_scale, seed=0, targets=a.targets, last_layers=a.last_layers)
budget = params.train.max_new_tokens
prompts = [chat_prompt(tok, [{"role": "system", "content": data["system"]}, {"role": "user", "content": p.prompt}])
           for p in pairs]
seqs = encode(tok, prompts + prompts, [p.hack for p in pairs] + [p.clean for p in pairs], budget)
g = vact.probe_gradients(lora, seqs, batch_size=16, fast=params.fast)
v = vact.load_direction("runs/vact/0/v_grad.safetensors")
score = vact.score(g, v)
with torch.no_grad(), lora.frozen():
    nll = []
    for s in range(0, len(seqs), 16):
        b = seqs.rows(slice(s, s + 16))
        logp, mask = logprob.reference_token_logprobs(lora.model, b)
        nll.append(-(logp * mask).sum(1) / mask.sum(1))
    nll = torch.cat(nll)
norm = torch.sqrt(sum(t.pow(2).sum(1) for t in g.values()))
n = len(pairs)
rho = lambda x, y: float(sps.spearmanr(x.numpy(), y.numpy()).statistic)  # noqa: E731
print(json.dumps({
    "n_pairs": n,
    "v_grad_separation": float((score[:n] > score[n:]).float().mean()),
    "nll_separation (hack side's NLL above its clean side's)": float((nll[:n] > nll[n:]).float().mean()),
    "grad_norm_separation": float((norm[:n] > norm[n:]).float().mean()),
    "spearman(score, nll), all sides": rho(score, nll),
    "spearman(score, nll), hack sides": rho(score[:n], nll[:n]),
    "spearman(score, nll), clean sides": rho(score[n:], nll[n:]),
    "spearman(score, grad norm), all sides": rho(score, norm),
    "spearman(nll, grad norm), all sides": rho(nll, norm),
}, indent=1))
