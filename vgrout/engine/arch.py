"""The model layout the fast engine runs (vgrout.engine.decode, vgrout.engine.logprob): decoder-only models laid
out like Llama / Qwen2 / Qwen3 in transformers: embed_tokens, layers[i].self_attn.{q,k,v,o}_proj (+ q_norm,
k_norm), a gated mlp, the two RMSNorms, rotary_emb, norm; full attention in every layer. The
projections may carry biases (Qwen2's q, k and v), the output head may be tied to the embedding or
not, and the rotation is whatever the model's rotary_emb computes (its rope_theta and scaling). What
it does not run, `vgrout.engine.fastgen.supports` names."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from vgrout.engine.adapter import Lora2rLinear

# Measured on an H200 (docs/performance.md): torch's fused rms_norm beat transformers' six-kernel
# RMSNorm (the one-token decode attention: vgrout.engine.flashdecode on a GPU since 4936b38).
FAST_NORM = True           # torch's fused rms_norm in the engine's forwards


@dataclass
class Arch:
    embed: torch.nn.Module
    layers: torch.nn.ModuleList
    norm: torch.nn.Module
    rotary: torch.nn.Module
    lm_head: torch.nn.Module
    n_heads: int
    n_kv: int
    head_dim: int

    @property
    def kv_bytes_per_token(self) -> int:
        w = self.embed.weight
        return 2 * len(self.layers) * self.n_kv * self.head_dim * w.element_size()


def arch(model) -> Arch:
    inner = model.model
    cfg = model.config
    types = set(getattr(cfg, "layer_types", None) or ["full_attention"])
    if types != {"full_attention"}:
        raise ValueError(f"fastgen: only full-attention layers are supported, model has {sorted(types)}")
    attn = inner.layers[0].self_attn
    return Arch(inner.embed_tokens, inner.layers, inner.norm, inner.rotary_emb,
                model.get_output_embeddings(), cfg.num_attention_heads, cfg.num_key_value_heads,
                attn.head_dim)


def rms_norm(mod, x):
    """The RMSNorm module `mod` applied to x: torch's one fused kernel when FAST_NORM, instead of
    transformers' six (rounding differs slightly on a GPU; on a CPU in fp32 they agree bit for bit)."""
    if FAST_NORM:
        return F.rms_norm(x, (x.shape[-1],), mod.weight, mod.variance_epsilon)
    return mod(x)


def base_linear(module) -> torch.nn.Linear:
    """The plain Linear of a projection (its base when lora2r wraps it)."""
    return module.base if isinstance(module, Lora2rLinear) else module
