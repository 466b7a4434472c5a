"""The fast engine as a backend: one `fast` switch, with the reference path wherever the engine
does not run the model.

    be = fastgen.select(model, fast)
    ids = be.generate(model, tok, prompts, max_new_tokens, temperature, top_p, batch_size=..., lora=...,
                      deploy_rows=...)           # rollout.generate's arguments and result
    be.release()                               # the engine's KV cache back before the log-prob forwards
    logp, mask = be.token_logprobs(model, seqs, keep_layers=..., temperature=T)  # also trunk= / return_trunk=

fast: `decode.generate` (static KV caches, CUDA graphs) and `logprob.token_logprobs` (checkpointed,
chunked, fused lora2r deltas); reference: `rollout.generate` (HF generate) and
`logprob.reference_token_logprobs` (the model's forward). Both compute the same function; the fast
one is tested against the reference (tests/engine/test_fastgen.py). With `fast` on and a model whose layout
the engine does not run (`supports`), select says which part once and takes the reference path.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

import torch

from vgrout.engine import decode, logprob, rollout
from vgrout.engine.adapter import Lora2rLinear
from vgrout.engine.arch import arch


@dataclass(frozen=True)
class Backend:
    name: str                        # "fast" | "reference"
    generate: Callable               # rollout.generate's arguments and result
    token_logprobs: Callable         # (model, seqs, trunk=None, return_trunk=False, keep_layers=None, temperature=1.0)
    release: Callable[[], None]      # free what generate keeps (the engine's cache and graphs)


def _reference_logprobs(model, seqs, trunk=None, return_trunk: bool = False, keep_layers: int | None = None,
                        temperature: float = 1.0):
    """`logprob.reference_token_logprobs` taking the fast path's keywords: it keeps no trunk
    (return_trunk appends None, and trunk is None: the only trunk it hands out), keep_layers has no use."""
    if trunk is not None:
        raise ValueError("the reference log-prob forward takes no trunk")
    out = logprob.reference_token_logprobs(model, seqs, temperature=temperature)
    return (*out, None) if return_trunk else out


FAST = Backend("fast", decode.generate, logprob.token_logprobs, decode.release)
REFERENCE = Backend("reference", rollout.generate, _reference_logprobs, lambda: None)
ATTENTION = ("sdpa", "eager")  # transformers' attention functions the fused log-prob forward calls
# transformers' rotary types that recompute their tables from the longest position of each call: the
# engine's tables come from calls of other lengths (a prompt pass, packed completions, a captured
# decode step), so they would differ from the model's own forward
SEQ_LEN_ROPE = ("dynamic", "longrope")
_TOLD: set[str] = set()


def supports(model) -> str | None:
    """None when the fast engine runs this model; else the first part of its layout it does not
    run, in words (the layout is vgrout.engine.arch's: Llama / Qwen2 / Qwen3 in transformers)."""
    name = type(model).__name__
    try:
        a = arch(model)
        lm_head = a.lm_head
    except (AttributeError, IndexError, TypeError) as e:
        return f"{name} is not laid out like Llama / Qwen2 / Qwen3 in transformers ({e})"
    except ValueError as e:  # a layer that is not full attention
        return f"{name}: {e}"
    rope = getattr(a.rotary, "rope_type", "default")
    if rope in SEQ_LEN_ROPE:
        return f"{name}: rotary embedding {rope!r}, whose tables change with the sequence's length"
    impl = getattr(model.config, "_attn_implementation", None)
    if impl not in ATTENTION:
        return f"{name}: attention implementation {impl!r} (supported: {', '.join(ATTENTION)})"
    if type(lm_head) is not torch.nn.Linear or lm_head.bias is not None:
        return f"{name}: the output head is a {type(lm_head).__name__} (supported: nn.Linear without bias)"
    for i, layer in enumerate(a.layers):
        attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        parts = {f"self_attn.{p}": getattr(attn, p, None) for p in ("q_proj", "k_proj", "v_proj", "o_proj")}
        parts.update({f"mlp.{p}": getattr(mlp, p, None) for p in ("gate_proj", "up_proj", "down_proj")})
        for where, m in parts.items():
            base = m.base if isinstance(m, Lora2rLinear) else m
            if type(base) is not torch.nn.Linear:
                return (f"{name}: layer {i} {where} is a {type(m).__module__}.{type(m).__qualname__} "
                        f"(supported: torch.nn.Linear, lora2r's Lora2rLinear around one)")
        if not hasattr(mlp, "act_fn"):
            return f"{name}: layer {i} has no gated MLP (mlp.act_fn)"
        if getattr(attn, "sliding_window", None) is not None:
            return f"{name}: layer {i} attends a sliding window of {attn.sliding_window}"
        if hasattr(attn, "q_norm") != hasattr(attn, "k_norm"):
            return f"{name}: layer {i} normalises only one of q and k"
        norms = {"input_layernorm": getattr(layer, "input_layernorm", None),
                 "post_attention_layernorm": getattr(layer, "post_attention_layernorm", None),
                 **{f"self_attn.{n}": getattr(attn, n) for n in ("q_norm", "k_norm") if hasattr(attn, n)}}
        if i == 0:
            norms["model.norm"] = a.norm
        for where, m in norms.items():
            if not (type(m).__name__.endswith("RMSNorm") and hasattr(m, "variance_epsilon")):
                return f"{name}: layer {i} {where} is a {type(m).__name__} (supported: Llama / Qwen2 / Qwen3 RMSNorm)"
    return None


def select(model, fast: bool) -> Backend:
    """The fast backend when `fast` is on and `supports(model)`, else the reference one; the
    first time a layout sends a fast request to the reference path, one line on stderr says why."""
    if not fast:
        return REFERENCE
    reason = supports(model)
    if reason is None:
        return FAST
    if reason not in _TOLD:
        _TOLD.add(reason)
        print(f"vgrout: fast path off, the fast engine does not run this model: {reason}; "
              f"using the reference path (rollout.generate, logprob.reference_token_logprobs)",
              file=sys.stderr)
    return REFERENCE
