"""The element-wise chains of the log-prob forwards, each one kernel on a GPU.

Eager PyTorch runs `x·cos + rotate_half(x)·sin` as five kernels, SiLU(gate)·up as two, and the
log-prob of a chunk of tokens as a cast, a division and a log-sum-exp over [tokens, vocab] in
fp32, each pass reading and writing the whole tensor; the backward pays as much again. These are
pure tensor functions, so Inductor (`torch.compile`) fuses each chain, and its backward, into a
few kernels. The matrix products stay cuBLAS's. On a CPU they run eagerly: the same ops, the
reference the compiled ones are tested against.

Every tensor argument is 2-D or 1-D with the tokens first; only that dimension varies between
calls (marked dynamic), so a training run compiles each chain once per grad mode, not once per
micro-batch's shape.

COMPILE: "cuda" compiles where the first input is on a GPU; "always" everywhere (tests);
"never" nowhere.
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

COMPILE = "cuda"


def _compiled_on_gpu(tokens_first: int):
    """fn compiled, for calls whose first tokens_first arguments are tensors of tokens × features."""
    def wrap(fn):
        @functools.wraps(fn)
        def call(*args):
            if COMPILE not in ("cuda", "always", "never"):
                raise ValueError(f"vgrout.engine.compiled.COMPILE = {COMPILE!r}; valid: 'cuda', 'always', 'never'")
            if COMPILE == "always" or (COMPILE == "cuda" and args[0].is_cuda):
                for t in args[:tokens_first]:
                    torch._dynamo.maybe_mark_dynamic(t, 0)
                if call.compiled is None:  # on first use: torch.compile imports Inductor (seconds)
                    call.compiled = torch.compile(fn)
                return call.compiled(*args)
            return fn(*args)
        call.eager, call.compiled = fn, None
        return call
    return wrap


@_compiled_on_gpu(tokens_first=4)
def norm_rotate(q, k, cos, sin, q_w, k_w, q_eps: float, k_eps: float, head_dim: int):
    """q [M, Hq·Dh], k [M, Hk·Dh] of M tokens → q [M, Hq, Dh], k [M, Hk, Dh]: Qwen3's per-head
    RMSNorm (q_w, k_w None: none, as in Llama), then transformers' rotation by cos, sin [M, Dh]."""
    q, k = q.unflatten(-1, (-1, head_dim)), k.unflatten(-1, (-1, head_dim))
    if q_w is not None:
        q, k = F.rms_norm(q, (head_dim,), q_w, q_eps), F.rms_norm(k, (head_dim,), k_w, k_eps)
    return apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)


@_compiled_on_gpu(tokens_first=2)
def silu_mul(gate, up):
    """The gated MLP's SiLU(gate)·up, gate and up [M, I]."""
    return F.silu(gate) * up


@_compiled_on_gpu(tokens_first=2)
def logp_chunk(h, targets, weight, temperature: float):
    """log π(target) of each of M tokens, h [M, D] and targets [M], under the logits
    h·weightᵀ / temperature, in fp32."""
    logits = F.linear(h, weight).float()
    if temperature != 1.0:
        logits = logits / temperature
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - logits.logsumexp(-1)
