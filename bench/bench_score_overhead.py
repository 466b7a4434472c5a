"""What the gate score adds to the no-grad logπ_old forward: the same micro-batch with and
without pooling the deployed-block bottleneck activations and dotting them with v_act.

    python -m bench.bench_score_overhead [MODEL_DIR] [V_ACT]   (defaults: the pipeline's outputs)
"""
import sys
import time

import torch

from vgrout.config import load as load_params
from vgrout.engine import adapter as ad
from vgrout.engine import logprob
from vgrout.engine.model import load
from vgrout.engine.rollout import pack
from vgrout.layout import Layout
from vgrout.routing import directions

model_dir = sys.argv[1] if len(sys.argv) > 1 else Layout().model
v_path = sys.argv[2] if len(sys.argv) > 2 else Layout().vact(0) / "v_act.safetensors"
a = load_params().adapter
model, tok = load(model_dir)
lora = ad.attach(model, r=a.r, seed=0, targets=a.targets, last_layers=a.last_layers)
v = directions.load_direction(v_path, lora)
g = torch.Generator().manual_seed(0)
B, P, C = 8, 200, 64
seqs = pack([torch.randint(0, len(tok), (P,), generator=g).tolist()] * B,
            [torch.randint(0, len(tok), (C,), generator=g).tolist()] * B, 0)


def plain():
    with torch.no_grad(), lora.sampling([False] * B):
        logprob.reference_token_logprobs(model, seqs)


def scored():
    with torch.no_grad(), lora.sampling([False] * B), lora.capture(seqs.pool_weights()) as pooled:
        logprob.reference_token_logprobs(model, seqs)
    directions.score(pooled, v)


plain(), scored()  # warm up
tp, ts = [], []
for _ in range(5):
    t = time.perf_counter(); plain(); tp.append(time.perf_counter() - t)  # noqa: E702
    t = time.perf_counter(); scored(); ts.append(time.perf_counter() - t)  # noqa: E702
mp, ms = sorted(tp)[2], sorted(ts)[2]
print(f"logπ_old forward ({B} x {P + C} tokens): median {mp:.3f} s plain, {ms:.3f} s with the "
      f"score: {100 * (ms / mp - 1):+.1f}%")
