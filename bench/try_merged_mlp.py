"""Would one GEMM for the gate and up projections speed up the decode step? The captured decode
step of the fast path (bench/profile_decode.py's engine and timing) as it is, and with gate and
up as one group of `decode.Projections`: one GEMM on their concatenated base weights and one
lora2r pair for both, as (q, k, v) already are. The concatenation here is a copy (3.6 GB at
Qwen3-4B's shape), enough to time it; an engine would make the model's two weights views of one
buffer instead.

    python bench/try_merged_mlp.py --batch 6 --group 1 --new-tokens 1536 --r 32
"""
from __future__ import annotations

import json

import torch

from vgrout import decode
from profile_decode import adapted_model, experiment_args, make_engine, step_ms  # noqa: E402 (this folder is on the path: the script's own)


class MergedProjections(decode.Projections):
    """Projections with (gate, up) as one group."""

    def __init__(self, layers, lora, batch, dtype, one_mode=False):
        self.lora, self.one_mode = lora, one_mode
        self.base, self.delta, self.s = {}, {}, {}
        for layer in layers:
            at, mlp = layer.self_attn, layer.mlp
            for group in [(at.q_proj, at.k_proj, at.v_proj), (at.o_proj,), (mlp.gate_proj, mlp.up_proj),
                          (mlp.down_proj,)]:
                self._add(group, batch, dtype)


def merged_mlp(mlp, x, lin, into=None):
    """decode._mlp's signature: into, the residual stream the down projection adds into."""
    gate, up = lin((mlp.gate_proj, mlp.up_proj), x).chunk(2, -1)
    return lin((mlp.down_proj,), mlp.act_fn(gate) * up, into=into)


def main() -> None:
    args = experiment_args(batch=256, group=16, new_tokens=1536)
    model, lora, prompts = adapted_model(args)
    out = {"batch": args.batch, "group": args.group, "span": args.span, "device": torch.cuda.get_device_name()}
    eng = make_engine(model, lora, prompts, args.group, args.new_tokens)
    out["separate_ms"] = step_ms(eng, args.span)
    del eng
    decode.release()
    plain_proj, plain_mlp = decode.Projections, decode._mlp
    decode.Projections, decode._mlp = MergedProjections, merged_mlp
    try:
        eng = make_engine(model, lora, prompts, args.group, args.new_tokens)
        out["merged_ms"] = step_ms(eng, args.span)
        del eng
        decode.release()
    finally:
        decode.Projections, decode._mlp = plain_proj, plain_mlp
    eng = make_engine(model, lora, prompts, args.group, args.new_tokens)  # the order's effect, if any
    out["separate_again_ms"] = step_ms(eng, args.span)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
