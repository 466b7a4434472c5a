"""The fast sampler: batched decode over preallocated static KV caches (a drop-in for
`rollout.generate`, same arguments and results; `vgrout.engine.fastgen.select` picks it).

A group's prompt is computed and stored once for its rollouts, each row's completion apart. The
decode step (every layer, the lora2r deltas, sampling, the cache write) has fixed shapes, so on a
GPU it is captured once as a CUDA graph and replayed once per new token: no Python and no launch
overhead per layer. Sampling runs on the GPU (softmax / exponential race, the same distribution as
multinomial). Each row keeps its own sampling mode: quarantine on (absorb) or ablated (keep, a
deploy row), as `Lora2r.sampling` sets it.

In the engine (prompt prefill and decode step) each lora2r delta is one pair of matmuls in the
model's dtype, from copies of the adapter refreshed at every call:
    delta(x) = [B − B0, B0] · (s ⊙ [A; A − A0]·x),   s = (1 … 1, m … m, 1 … 1, m … m)
(B·A − B0·A0 regrouped so no difference of nearly equal terms is formed after rounding)
the same function as `Lora2rLinear` (deployed + m · quarantine; m = 0 on deploy rows makes the
quarantine term exactly zero), computed in bf16 with fp32 accumulation on a GPU instead of
Lora2rLinear's fp32. Sampling carries no gradient, and the loss reads logπ and logπ_sample from
teacher-forced forwards, not the sampler's, so this rounding only perturbs the sampler.

Finished rows leave the decode batch. Every COMPACT_EVERY steps the engine counts the running
rows and, when they fit a smaller shape, moves them (their caches, tokens and positions) to the
front, densely: the step's projections, MLP and own-completion attention run on as many lanes as
hold them, and only the prompt part of the attention lays them out per prompt slot (U' slots of
R' query rows, R' set by the slot with the most; `Lanes`, the matmul path's layout; the Triton
kernels of `vgrout.engine.flashdecode` read the same layout from `Engine.slot_lane` and `lane_qrow`). Each
size comes from a short list (`shape_sizes`), each shape with its own captured graphs. A step then costs what its running
rows cost, not the batch's. The rows a compaction drops are those done a quarter interval before
it (a row done since stays a lane, sampling pad, until the next one): the host waits only for the
steps before that snapshot, so the device still holds a quarter interval of queued steps while
the host moves the rows and captures the new layout's graphs (`capture_graph`: no capture
synchronises the device).
The sampling noise is drawn for the full batch and read by each row's original index, so a row
meets the same noise compacted or not: in fp32 on the CPU it samples the same tokens at
temperature 0 and 1 (tested); on a GPU a smaller shape may pick other kernels, whose rounding
can tip a near-tie of two tokens (the GPU check is greedy tokens of a tiny fp32 model).

Runs the layout of `vgrout.engine.arch` (Llama / Qwen2 / Qwen3, full attention in every layer).
"""
from __future__ import annotations

import math
import time
from collections import Counter
from functools import partial

import torch
import torch.nn.functional as F
from tqdm import tqdm

from vgrout.engine import arch as arch_module
from vgrout.engine import flashdecode
from vgrout.engine.adapter import Lora2r, Lora2rLinear
from vgrout.engine.arch import Arch, arch, base_linear, rms_norm
from vgrout.engine.rollout import pad_id

CACHE_ALIGN = 64       # cache lengths rounded up: aligned attention masks, fewer graph shapes
SPAN = 128             # a decode step attends the first k·SPAN completion slots, not all of them
PREFILL_TOKENS = 16384  # prompt tokens per prefill chunk (bounds the fp32 lora2r activations)
COMPACT_EVERY = 64     # decode steps between compactions of the running rows
ATTENTION = "kernel"   # the decode step's attention: "kernel" (vgrout.engine.flashdecode, where usable) or "matmul"
FUSED_MLP = True       # the gated MLP's silu(gate)·up through flashdecode.silu_mul, where it serves (a GPU with Triton)
# A compaction plans from which rows were done a quarter interval before it (`Engine.snapshot`): the
# host moves the rows and captures the new layout's graphs while the device still runs the steps
# queued since the snapshot.


# -- one decoder layer over static KV caches ----------------------------------------------------
# The engine keeps two caches per layer: each prompt slot's K/V [U, Hkv, Tp, Dh], shared by the
# R = B / U rows sampled from that prompt in the same mode (a group's rollouts), and each row's
# own completion K/V [B, Hkv, Tc, Dh]. A decode step reads a prompt's K/V once for its R rows, and
# the cache holds a prompt once per group instead of once per rollout.

def _rotation(cos, sin):
    """The rotary tables [B, L, 1, Dh] as `_qkv` applies them, made once per forward: transformers'
    rotation x·cos + rotate_half(x)·sin, with rotate_half(x) = roll(x, Dh/2)·(−1 … −1, 1 … 1) and
    the signs folded into sin, is one multiply, one roll and one fused multiply-add per layer (two
    kernels fewer than rotate_half's negation and concatenation)."""
    half = sin.shape[-1] // 2
    return cos[:, :, None], torch.cat([-sin[..., :half], sin[..., half:]], -1)[:, :, None]


@torch.no_grad()
def qk_norm_weights(a: Arch, layer) -> torch.Tensor | None:
    """Qwen3's per-head RMSNorm weights of q and k as one table [H + Hkv, Dh] (`_qkv`); None for
    a layout without them."""
    attn = layer.self_attn
    if not hasattr(attn, "q_norm"):
        return None
    if attn.q_norm.variance_epsilon != attn.k_norm.variance_epsilon:
        raise ValueError("decode: q_norm and k_norm have different epsilons; one norm cannot serve both")
    return torch.cat([attn.q_norm.weight.expand(a.n_heads, -1), attn.k_norm.weight.expand(a.n_kv, -1)])


def _qkv_projection(layer, h, lin):
    """q, k and v of h [B, L, D] side by side, [B, L, (H + 2·Hkv)·Dh], from one GEMM."""
    attn = layer.self_attn
    return lin((attn.q_proj, attn.k_proj, attn.v_proj), rms_norm(layer.input_layernorm, h))


def _qkv(a: Arch, layer, h, cos, sin, lin, qk_w=None):
    """The attention inputs of h [B, L, D]: q [B, H, L, Dh], k and v [B, Hkv, L, Dh], rotated by
    `_rotation`'s tables. q, k and v come out of one projection, and q and k are rotated in one
    pass (fewer kernels: a decode step is bound by their count). qk_w: `qk_norm_weights` of the
    layer, where it has them."""
    attn = layer.self_attn
    B, L, _ = h.shape
    H, Hkv = a.n_heads, a.n_kv
    y = _qkv_projection(layer, h, lin).view(B, L, H + 2 * Hkv, a.head_dim)
    qk, v = y[:, :, :H + Hkv], y[:, :, H + Hkv:]
    if qk_w is not None and arch_module.FAST_NORM:
        # Qwen3: RMSNorm per head before the rotation, q's and k's heads in one norm and their
        # weights applied after it from one table (transformers' order: normalised in fp32,
        # rounded, then weighted): three kernels where a norm each and their concatenation were five
        qk = F.rms_norm(qk, (a.head_dim,), eps=attn.q_norm.variance_epsilon) * qk_w
    elif qk_w is not None:
        qk = torch.cat([rms_norm(attn.q_norm, qk[:, :, :H]), rms_norm(attn.k_norm, qk[:, :, H:])], 2)
    qk = torch.addcmul(qk * cos, qk.roll(a.head_dim // 2, -1), sin)  # heads on dim 2
    return qk[:, :, :H].transpose(1, 2), qk[:, :, H:].transpose(1, 2), v.transpose(1, 2)


def _finish(layer, h, o, lin):
    """The residual stream h after attention output o [B, L, H·Dh]: o_proj, then the MLP, each
    accumulated into h in place by its output projection's GEMMs (`Projections`: into)."""
    h = lin((layer.self_attn.o_proj,), o, into=h)
    return _mlp(layer.mlp, rms_norm(layer.post_attention_layernorm, h), lin, into=h)


def _prefill_layer(a: Arch, layer, h, cos, sin, k_out, v_out, slots, mask, lin, qk_w=None):
    """Prompts h [b, P, D] attending to themselves under mask [b, 1, G·P, P]; their K/V go to
    prompt slots `slots` [b] of the layer's cache k_out, v_out [U, Hkv, P, Dh]."""
    B, P, _ = h.shape
    q, k, v = _qkv(a, layer, h, cos, sin, lin, qk_w)
    k_out.index_copy_(0, slots, k)
    v_out.index_copy_(0, slots, v)
    # grouped-query attention without repeating K/V: the G query heads that share a KV head
    # become G·P query rows of that head (head h = kv·G + g, as transformers' repeat_kv)
    G = a.n_heads // a.n_kv
    q = q.reshape(B, a.n_kv, G * P, a.head_dim)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=layer.self_attn.scaling)
    o = o.reshape(B, a.n_heads, P, a.head_dim).transpose(1, 2).reshape(B, P, -1)
    return _finish(layer, h, o, lin)


def _decode_layer(a: Arch, layer, h, cos, sin, kp, vp, kc, vc, slot, blocked, span, lin, lanes=None, qk_w=None,
                  kernel=None):
    """One new token per lane, h [B, 1, D]; this token's K/V is written at completion `slot`, then
    it attends (`_decode_attention`; kernel: (prompt_ok, slot_lane, lane_qrow), through `flashdecode.attend`)."""
    B, attn = h.shape[0], layer.self_attn
    if kernel is not None and (qk_w is None or arch_module.FAST_NORM):
        q = flashdecode.rotate_into_cache(_qkv_projection(layer, h, lin), qk_w,
                                          attn.q_norm.variance_epsilon if qk_w is not None else 0.0, cos, sin,
                                          attn.scaling, kc, vc, slot, a.n_heads)
    else:
        q, k, v = _qkv(a, layer, h, cos, sin, lin, qk_w)
        kc.index_copy_(2, slot, k)
        vc.index_copy_(2, slot, v)
        # scaled here, not the scores; the product is also q's contiguous copy, which Lanes.to_slots reads
        q = q.reshape(B, a.n_heads, a.head_dim) * attn.scaling
    if kernel is not None:
        o = flashdecode.attend(q, kp, vp, kc, vc, *kernel, slot, span)
    else:
        o = _decode_attention(q, kp, vp, kc, vc, blocked, span, lanes)
    return _finish(layer, h, o.reshape(B, 1, -1), lin)


def _decode_attention(q, kp, vp, kc, vc, blocked, span, lanes=None):
    """q [B, H, Dh] (scaled) -> o [B, H, Dh]. Lane b attends its prompt slot's K/V kp, vp and the
    first `span` slots of its own completion K/V kc, vc[b], except where blocked [B, 1, 1, Tp + span]
    is True. lanes: where the lanes sit among the prompt slots' query rows (`Lanes`); None: lane b
    is row b % R of slot b // R."""
    B, H, Dh = q.shape
    U, Hkv, Tp = kp.shape[0], kp.shape[1], kp.shape[2]
    lanes = lanes if lanes is not None else Lanes(U, B // U)
    q = q.view(B, Hkv, H // Hkv, Dh)  # head h = kv·G + g
    # the rows of a prompt slot are R·G query rows of one matmul against its K: read once
    sp = lanes.to_lanes(torch.matmul(lanes.to_slots(q, Dh), kp.transpose(-1, -2)))
    sc = torch.matmul(q, kc[:, :, :span].transpose(-1, -2))
    # one softmax over the prompt's and the row's own positions; batched matmuls, no query
    # tile padded from G rows to 64+ as a fused attention kernel would. The scores are the big
    # elementwise tensor of the step ([B, H, Tp + span]): three passes in the model's dtype
    # (softmax accumulates in fp32 inside its kernel)
    w = torch.cat([sp, sc], -1).masked_fill_(blocked, float("-inf")).softmax(-1)
    # contiguous: to_lanes' own copy, except on a grid of one slot, where it is a view
    o = lanes.to_lanes(torch.matmul(lanes.to_slots(w, Tp), vp)).contiguous()
    # the row's own part accumulates onto the prompt's inside the GEMM (no separate add)
    G = H // Hkv
    o.view(B * Hkv, G, Dh).baddbmm_(w[..., Tp:].reshape(B * Hkv, G, span), vc[:, :, :span].reshape(B * Hkv, span, Dh))
    return o.view(B, H, Dh)


class Lanes:
    """Where the decode batch's lanes sit among the prompt slots' query rows. The prompt part of
    the attention runs per slot, U slots of R query rows (a slot's K/V read once for its rows); the
    rest of the step runs per lane. On the grid (as prefilled) lane b is row b % R of slot b // R,
    and the two layouts are views of one another. Packed (after a compaction), the running lanes
    are dense, B ≤ U·R: slot j's lanes are consecutive, and a query row no lane fills repeats a
    lane of its slot (a spare slot, lane 0), so a slot's R is its longest run of lanes while the
    other slots' lanes cost nothing in the rest of the step. The layouts are exchanged by row
    gathers (`Engine.compact` writes the indices): srow, the lane and head of each slot query row
    (u, kv, r); lrow, the slot query row of each lane and head (b, kv)."""

    def __init__(self, U: int, R: int, srow: torch.Tensor | None = None, lrow: torch.Tensor | None = None):
        self.U, self.R, self.srow, self.lrow = U, R, srow, lrow

    def to_slots(self, t: torch.Tensor, cols: int) -> torch.Tensor:
        """[B, Hkv, G, X] per lane (contiguous), its first `cols` columns -> [U, Hkv, R·G, cols]
        per slot (head h = kv·G + g, query row r·G + g)."""
        B, Hkv, G, X = t.shape
        if self.srow is None:
            return t[..., :cols].reshape(self.U, self.R, Hkv, G, cols).transpose(1, 2).reshape(self.U, Hkv, self.R * G, cols)
        return t.view(B * Hkv, G, X).index_select(0, self.srow).view(self.U, Hkv, self.R * G, X)[..., :cols]

    def to_lanes(self, t: torch.Tensor) -> torch.Tensor:
        """[U, Hkv, R·G, X] per slot (contiguous) -> [B, Hkv, G, X] per lane."""
        U, Hkv, RG, X = t.shape
        G = RG // self.R
        if self.srow is None:
            return t.view(U, Hkv, self.R, G, X).transpose(1, 2).reshape(U * self.R, Hkv, G, X)
        return t.view(U * Hkv * self.R, G, X).index_select(0, self.lrow).view(-1, Hkv, G, X)


def _mlp(mlp, x, lin, into=None):
    # not compiled.silu_mul (the log-prob forwards'): the engine runs it inside CUDA-graph captures at
    # lane counts that change with each compaction, where a Dynamo recompile was never tried, and
    # flashdecode's keeps eager's rounding (silu rounded to the model's dtype before the product)
    g, u = lin((mlp.gate_proj,), x), lin((mlp.up_proj,), x)
    fused = FUSED_MLP and flashdecode.fuses_silu(mlp.act_fn, g)
    return lin((mlp.down_proj,), flashdecode.silu_mul(g, u) if fused else mlp.act_fn(g) * u, into=into)


class Projections:
    """The engine's linear maps, called on a group of projections that read the same input: a
    layer's (q, k, v), or one projection alone. A group of several runs as one GEMM on a
    concatenated copy of their base weights (the engine's own, freed with it: 1.1 GB at Qwen3-4B's
    shape). Its lora2r modules run as one GEMM into the static copy [A; A − A0] of all of them and
    one into a block-diagonal [B − B0, B0], scaled per row by s. `refresh` copies the current
    adapter in (it changes every optimizer step) and sets each row's quarantine factor m.
    one_mode: every row has the same m, so m is folded into the copy of A and no row is scaled
    (a kernel fewer per group in the decode step)."""

    def __init__(self, layers, lora: Lora2r | None, batch: int, dtype: torch.dtype, one_mode: bool = False):
        self.lora, self.one_mode = lora, one_mode
        self.base: dict[tuple, tuple] = {}     # group -> (W, bias) concatenated
        self.delta: dict[tuple, tuple] = {}    # group -> (A, B, [(module, first output row, first column)])
        self.s: dict[int, torch.Tensor] = {}   # modules in a group -> per-row scale [batch, n · 4r]
        for layer in layers:
            at, mlp = layer.self_attn, layer.mlp
            for group in [(at.q_proj, at.k_proj, at.v_proj), (at.o_proj,), (mlp.gate_proj,),
                          (mlp.up_proj,), (mlp.down_proj,)]:
                self._add(group, batch, dtype)

    @torch.no_grad()
    def _add(self, group: tuple, batch: int, dtype: torch.dtype) -> None:
        lins = [base_linear(m) for m in group]
        if len(group) > 1:
            bias = None
            if any(b.bias is not None for b in lins):
                bias = torch.cat([b.bias if b.bias is not None else b.weight.new_zeros(b.out_features)
                                  for b in lins])
            self.base[group] = (torch.cat([b.weight for b in lins]), bias)
        parts, row, col = [], 0, 0
        for m in group:
            if isinstance(m, Lora2rLinear):
                parts.append((m, row, col))
                col += 4 * m.r
            row += base_linear(m).out_features
        if not parts:
            return
        w = lins[0].weight
        # zeros, not empty: no buffer a decode step reads is ever uninitialised (a NaN left in
        # a masked cache slot still poisons the step: its weight is 0, and 0 · NaN = NaN)
        self.delta[group] = (w.new_zeros(col, w.shape[1], dtype=dtype), w.new_zeros(row, col, dtype=dtype), parts)
        if len(parts) not in self.s:
            self.s[len(parts)] = w.new_ones(batch, col, dtype=dtype)

    @torch.no_grad()
    def refresh(self, m_rows: torch.Tensor) -> None:
        if self.lora is None:
            return
        m = m_rows[:, None]
        if self.one_mode and not torch.equal(m, m[:1].expand_as(m)):
            raise ValueError("Projections(one_mode=True): the rows' quarantine factors differ")
        for A, B, parts in self.delta.values():
            for mod, o, c in parts:
                r, n = mod.r, mod.B.shape[0]
                A[c:c + 2 * r].copy_(mod.A)
                A[c + 2 * r:c + 4 * r].copy_(mod.A - mod.A0)  # differences in fp32, then rounded: see Lora2rDelta
                B[o:o + n, c:c + 2 * r].copy_(mod.B - mod.B0)
                B[o:o + n, c + 2 * r:c + 4 * r].copy_(mod.B0)
                if self.one_mode:  # the quarantine rows of A and of A − A0
                    A[c + r:c + 2 * r] *= m[0, 0]
                    A[c + 3 * r:c + 4 * r] *= m[0, 0]
        r = self.lora.r
        for s in self.s.values():
            for c in range(0, s.shape[1], 4 * r):
                s[:, c + r:c + 2 * r] = m
                s[:, c + 3 * r:c + 4 * r] = m

    def __call__(self, group: tuple, x: torch.Tensor, rows: slice = slice(None),
                 into: torch.Tensor | None = None) -> torch.Tensor:
        """The group's outputs side by side for rows `rows` of the batch: W·x + [B − B0, B0]·(s ⊙ [A; A − A0]·x).
        into: added in place to this tensor (the residual stream), which is returned. Every sum
        accumulates inside a GEMM (cuBLAS's β = 1 on its own output): an out-of-place addmm
        would first copy its addend, and a separate add is a kernel of its own."""
        first = base_linear(group[0])
        W, bias = self.base.get(group, (first.weight, first.bias))
        if into is None:
            y = F.linear(x, W, bias)
        else:
            y = into
            y.view(-1, y.shape[-1]).addmm_(x.flatten(0, -2), W.t())
            if bias is not None:
                y += bias
        if group not in self.delta:
            return y
        A, B, parts = self.delta[group]
        h = F.linear(x, A)
        if not self.one_mode:
            s = self.s[len(parts)][rows]
            h *= s.view(s.shape[0], *[1] * (x.dim() - 2), s.shape[1])
        y.view(-1, y.shape[-1]).addmm_(h.flatten(0, -2), B.t())
        return y


def sample_next(logits: torch.Tensor, temperature: float, top_p: float = 1.0,
                noise_rows: tuple[int, torch.Tensor] | None = None) -> torch.Tensor:
    """Next token per row [B] from logits [B, V], on the device with no host sync (capturable):
    greedy at temperature 0, else softmax(logits / temperature) restricted to the top-p nucleus.
    noise_rows (n, idx): draw the noise for n rows and give row b draw idx[b], so a row's draw
    does not depend on which other rows are in the batch (the engine's compaction)."""
    if temperature == 0:
        return logits.argmax(-1)
    logits = logits.float() / temperature
    if top_p < 1.0:
        srt, idx = logits.sort(-1, descending=True)
        p = srt.softmax(-1)
        drop = p.cumsum(-1) - p > top_p  # keep the smallest prefix whose mass reaches top_p
        srt = srt.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, idx, srt)
    probs = logits.softmax(-1)
    # argmax_i p_i / E_i with E_i ~ Exp(1) i.i.d. picks token i with probability p_i
    n, idx = noise_rows or (len(probs), None)
    noise = probs.new_empty(n, probs.shape[1]).exponential_()
    return (probs / (noise if idx is None else noise.index_select(0, idx))).argmax(-1)


# -- the engine: static buffers and the captured decode step ------------------------------------

def shape_sizes(n: int) -> list[int]:
    """The sizes a compacted dimension of n may take: n, 3n/4, n/2, 3n/8, … 1 (rounded up), so a
    shape wastes at most a third of its rows and an engine captures few graphs."""
    sizes, x = {n}, n
    while x > 1:
        sizes.add(math.ceil(3 * x / 4))
        x = math.ceil(x / 2)
        sizes.add(x)
    return sorted(sizes)


def _at_least(k: int, n: int) -> int:
    return next(s for s in shape_sizes(n) if s >= k)


class Engine:
    """Static buffers and the decode step for one shape: B rows in U = B / R prompt slots of R
    rows each, prompts of up to Tp tokens, up to Tc + 1 new tokens; one_mode: all rows sample in
    the same mode (see Projections).

    A running engine uses the first `lanes` rows (lanes) of its buffers and the first U' prompt
    slots, each read by R' query rows (`Lanes`: lane b in slot b // R' until a compaction packs
    them); `lane_row` is each lane's row in the run (−1: an empty lane, counted done). Compaction
    (`compact`) moves the running rows to the front and shrinks the lanes and (U', R')."""

    def __init__(self, model, lora: Lora2r | None, batch: int, group: int, prompt_len: int,
                 comp_len: int, temperature: float, top_p: float, eos_id: int | None, pad: int,
                 ignore_eos: bool, one_mode: bool = False):
        if batch % group:
            raise ValueError(f"engine batch {batch} is not a multiple of its group {group}")
        self.model, self.lora, self.a = model, lora, arch(model)
        self.B, self.R, self.U = batch, group, batch // group
        self.Tp, self.Tc = prompt_len, comp_len
        self.temperature, self.top_p = temperature, top_p
        self.eos_id, self.pad_id, self.ignore_eos = eos_id, pad, ignore_eos
        w = self.a.embed.weight
        dev, dt = w.device, w.dtype
        L, kv, Dh = len(self.a.layers), self.a.n_kv, self.a.head_dim
        self.kp = torch.zeros(L, self.U, kv, prompt_len, Dh, dtype=dt, device=dev)
        self.vp = torch.zeros_like(self.kp)
        self.kc = torch.zeros(L, batch, kv, comp_len, Dh, dtype=dt, device=dev)
        self.vc = torch.zeros_like(self.kc)
        z = dict(dtype=torch.long, device=dev)
        self.tok = torch.zeros(batch, 1, **z)       # the token fed at this step
        self.pos = torch.zeros(batch, 1, **z)       # its rotary position (real tokens before it)
        self.prompt_ok = torch.zeros(batch, prompt_len, dtype=torch.bool, device=dev)  # real prompt slots of each row
        self.slot = torch.zeros(1, **z)             # completion slot written at this step
        self.col = torch.zeros(1, **z)              # output column written at this step
        self.done = torch.zeros(batch, dtype=torch.bool, device=dev)
        self.limit = torch.zeros(batch, **z)        # a row is done once it has this many tokens
        self.lane_row = torch.arange(batch, **z)
        # the layout as the kernels read it (`place`): each slot query row's lane, each lane's query row
        self.slot_lane, self.lane_qrow = torch.arange(batch, **z), torch.arange(batch, **z)
        # the packed layout (`Lanes`), read by the captured steps: each lane's query row, each
        # query row's lane
        self.srow, self.lrow = torch.zeros(batch * kv, **z), torch.zeros(batch * kv, **z)
        self.lanes, self.packed = batch, False  # lanes in use; False: on the grid of self.shape
        # the host's copy of each lane's row (the device's lane_row), each lane's slot (host only),
        # and `done` as the last snapshot saw it: a compaction reads these, not the device, so it
        # waits for no step queued after the snapshot
        self.rows_host: list[int] = list(range(batch))
        self.slots_host: list[int] = [b // group for b in range(batch)]
        cuda = w.is_cuda
        self.done_seen = torch.zeros(batch, dtype=torch.bool, pin_memory=cuda)
        self.seen = torch.cuda.Event() if cuda else None
        self.out = torch.zeros(batch, comp_len + 1, **z)     # per lane
        self.result = torch.zeros(batch, comp_len + 1, **z)  # per row, filled as lanes are dropped
        self.ar = torch.arange(comp_len, device=dev)
        self.proj = Projections(self.a.layers, lora, batch, dt, one_mode)
        self.qk_w = [qk_norm_weights(self.a, layer) for layer in self.a.layers]
        self.shape = (self.U, self.R)
        self.graphs: dict[tuple, torch.cuda.CUDAGraph] = {}  # (U', R', lanes, packed, span) -> the captured step
        self.pool = None
        self.capture_s = 0.0  # seconds spent capturing graphs in the current run
        # one decode graph per attended span: early steps do not read the empty tail of the cache
        self.spans = sorted({min(comp_len, SPAN * k) for k in range(1, math.ceil(comp_len / SPAN) + 1)})

    def sample(self, logits: torch.Tensor) -> torch.Tensor:
        """The lanes' next tokens; a lane already done gets pad, and is done after an EOS (unless
        ignore_eos) or once it holds its `limit` tokens."""
        n = logits.shape[0]
        lanes = self.lane_row[:n].clamp(min=0)
        nxt = sample_next(logits, self.temperature, self.top_p, noise_rows=(self.B, lanes))
        done = self.done[:n]
        nxt = torch.where(done, torch.full_like(nxt, self.pad_id), nxt)
        if not self.ignore_eos and self.eos_id is not None:
            done |= nxt == self.eos_id
        done |= self.col + 1 >= self.limit[:n]
        return nxt

    def layout(self) -> tuple[int, int, int]:
        """(U', R', lanes): the slots, their query rows, the lanes decoded."""
        return (*self.shape, self.lanes)

    def span_for(self, slot: int) -> int:
        return next(s for s in self.spans if s > slot)

    def decode_step(self, span: int) -> None:
        a = self.a
        U, R = self.shape
        B = self.lanes
        kv = self.a.n_kv
        lanes = Lanes(U, R, self.srow[:U * R * kv], self.lrow[:B * kv]) if self.packed else None
        h = a.embed(self.tok[:B])
        cos, sin = _rotation(*a.rotary(h, self.pos[:B]))
        kernel = blocked = None
        if ATTENTION == "kernel" and flashdecode.usable(h, self.Tp, a.n_heads // a.n_kv, a.head_dim):
            kernel = (self.prompt_ok[:B], self.slot_lane[:U * R].view(U, R), self.lane_qrow[:B])
        else:
            own = (self.ar[:span] <= self.slot)[None, :].expand(B, -1)
            blocked = ~torch.cat([self.prompt_ok[:B], own], 1)[:, None, None, :]
        lin = partial(self.proj, rows=slice(0, B))
        for i, layer in enumerate(a.layers):
            h = _decode_layer(a, layer, h, cos, sin, self.kp[i, :U], self.vp[i, :U], self.kc[i, :B],
                              self.vc[i, :B], self.slot, blocked, span, lin, lanes, self.qk_w[i], kernel)
        nxt = self.sample(a.lm_head(rms_norm(a.norm, h[:, -1])))
        self.out[:B].index_copy_(1, self.col, nxt[:, None])
        self.tok[:B].copy_(nxt[:, None])
        self.pos[:B] += 1
        self.slot += 1
        self.col += 1

    def warm_up(self) -> None:
        """One eager step on a side stream before the first capture: the libraries' lazy set-up
        (a training run builds an engine every step, so warm-ups are paid often). It writes the
        step's buffers, so it runs before the prefill."""
        self.pool = torch.cuda.graph_pool_handle()
        self.capture_stream = torch.cuda.Stream()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            self.slot.fill_(self.spans[-1] - 1)
            self.col.fill_(0)
            self.decode_step(self.spans[-1])
        torch.cuda.current_stream().wait_stream(s)

    def replay(self, span: int) -> None:
        """The decode step at the current layout, through its CUDA graph (`capture`)."""
        self.capture(span).replay()

    def capture(self, span: int) -> torch.cuda.CUDAGraph:
        """The decode step's graph at the current layout and this span, captured unless held
        (`capture_graph`: the steps queued before it run on while the host records). A capture
        records without running, so the buffers it reads keep their values. The graphs share one
        memory pool: they never run at once."""
        key = (*self.layout(), self.packed, span, ATTENTION, FUSED_MLP, arch_module.FAST_NORM)  # a switch recaptures
        if key not in self.graphs:
            t0 = time.perf_counter()
            self.graphs[key] = capture_graph(partial(self.decode_step, span), self.pool, self.capture_stream)
            self.capture_s += time.perf_counter() - t0
        return self.graphs[key]

    def capture_ahead(self, steps: range) -> None:
        """Capture the graphs the current layout needs for these steps, while the device still
        runs the steps queued before (a later capture could find the device idle)."""
        for span in sorted({self.span_for(t - 1) for t in steps}):
            self.capture(span)

    def snapshot(self) -> None:
        """Queue a copy of which lanes are done, for the next `compact` to plan from; the host
        does not wait for it here."""
        B = self.lanes
        if self.seen is None:
            self.done_seen[:B] = self.done[:B]
            return
        self.done_seen[:B].copy_(self.done[:B], non_blocking=True)
        self.seen.record()

    def put(self, t: torch.Tensor) -> torch.Tensor:
        """Host tensor t on the engine's device, copied from pinned memory: the host does not wait
        for the queued work (a copy from pageable memory does)."""
        return t if self.seen is None else t.pin_memory().to(self.tok.device, non_blocking=True)

    def index(self, values: list[int]) -> torch.Tensor:
        return self.put(torch.tensor(values, dtype=torch.long))

    def flush(self) -> None:
        """Copy every lane's tokens to its row of `result`."""
        real = [b for b, r in enumerate(self.rows_host[:self.lanes]) if r >= 0]
        self.result.index_copy_(0, self.index([self.rows_host[b] for b in real]),
                                self.out.index_select(0, self.index(real)))

    @torch.no_grad()
    def compact(self, written: int) -> bool:
        """Move the lanes running at the last `snapshot` to the front, each prompt slot's together
        and in slot order, as few lanes as hold them (`shape_sizes`), in the smallest slot layout
        (U', R') whose R' holds the slot with the most (`Lanes`). written: the completion slots
        filled so far (the cache columns to move). False when every lane was done."""
        B, (U, R) = self.lanes, self.shape
        if self.seen is not None:
            self.seen.synchronize()  # the snapshot's copy, queued steps ago: the later steps run on
        live, slot_of = (~self.done_seen[:B]).tolist(), self.slots_host[:B]
        runs: dict[int, list[int]] = {}
        for b in range(B):
            if live[b]:
                runs.setdefault(slot_of[b], []).append(b)
        if not runs:
            return False
        groups = [runs[u] for u in sorted(runs)]
        n = sum(map(len, groups))
        U2, R2 = _at_least(len(groups), self.U), _at_least(max(map(len, groups)), self.R)
        B2 = min(_at_least(n, self.B), U2 * R2)
        if (U2, R2, B2) == (U, R, B):
            return True
        self.flush()
        src = [b for g in groups for b in g]
        src += [src[0]] * (B2 - n)  # a spare lane copies a real one: finite K/V
        slot_src = sorted(runs) + [min(runs)] * (U2 - len(groups))
        lane_slot, lane_r, qrow = [], [], []
        for j, g in enumerate(groups):
            first = len(lane_slot)
            lane_slot += [j] * len(g)
            lane_r += range(len(g))
            qrow += [first + i for i in range(len(g))] + [first] * (R2 - len(g))
        qrow += [0] * (R2 * (U2 - len(groups)))
        lane_slot += [0] * (B2 - n)
        lane_r += [0] * (B2 - n)
        idx, sidx = self.index(src), self.index(slot_src)
        for i in range(len(self.a.layers)):
            for c in (self.kc, self.vc):
                c[i, :B2, :, :written] = c[i, :B, :, :written].index_select(0, idx)
            if slot_src != list(range(U2)):
                for c in (self.kp, self.vp):
                    c[i, :U2] = c[i, :U].index_select(0, sidx)
        bufs = [self.tok, self.pos, self.prompt_ok, self.done, self.limit, self.lane_row, self.out,
                *self.proj.s.values()]
        for t in bufs:
            t[:B2] = t[:B].index_select(0, idx)
        self.rows_host = [self.rows_host[b] for b in src[:n]] + [-1] * (B2 - n)
        if B2 > n:
            self.done[n:B2] = True
            self.lane_row[n:B2] = -1
        self.place(U2, R2, lane_slot, lane_r, qrow)
        return True

    def place(self, U: int, R: int, lane_slot: list[int], lane_r: list[int], qrow: list[int]) -> None:
        """Set the layout (`Lanes`): lane b is query row lane_r[b] of slot lane_slot[b]; slot u's
        query row r reads lane qrow[u·R + r]."""
        B, kv = len(lane_slot), self.a.n_kv
        self.slots_host = list(lane_slot)
        # a lane owns its query row where that row reads it; a spare lane (a copy, done) owns none,
        # and a row no lane owns (a repeat, a spare slot's) is no lane's for the kernels
        lane_qrow = [lane_slot[b] * R + lane_r[b] if qrow[lane_slot[b] * R + lane_r[b]] == b else -1
                     for b in range(B)]
        slot_lane = [b if lane_qrow[b] == i else -1 for i, b in enumerate(qrow)]
        # flashdecode's prompt kernel reads a slot's padding from the lane in its row 0
        if any(slot_lane[u * R] < 0 <= max(slot_lane[u * R:(u + 1) * R]) for u in range(U)):
            raise RuntimeError(f"Engine.place: a slot's lanes do not start at its row 0 ({slot_lane})")
        self.lane_qrow[:B] = self.index(lane_qrow)
        self.slot_lane[:U * R] = self.index(slot_lane)
        self.srow[:U * kv * R] = self.index([qrow[u * R + r] * kv + h for u in range(U) for h in range(kv)
                                             for r in range(R)])
        self.lrow[:B * kv] = self.index([(lane_slot[b] * kv + h) * R + lane_r[b] for b in range(B)
                                         for h in range(kv)])
        self.shape, self.lanes, self.packed = (U, R), B, qrow != list(range(B))

    @torch.no_grad()
    def prefill(self, prompts: list[list[int]], deploy: list[bool]) -> None:
        """Left-pad each prompt slot's prompt into [0, Tp), run it through the layers (in chunks
        of slots; a slot whose prompt and mode an earlier slot has is copied, not recomputed),
        and sample every row's first new token."""
        a, dev, R = self.a, self.tok.device, self.R
        Tp = self.Tp
        slot_rows = range(0, self.B, R)  # the first row of each prompt slot
        keys: dict[tuple, int] = {}
        src = [keys.setdefault((tuple(prompts[b]), deploy[b]), u) for u, b in enumerate(slot_rows)]
        comp = sorted(keys.values())  # the slots computed; the others copy one of them
        ids = torch.full((self.U, Tp), self.pad_id, dtype=torch.long)
        first = torch.zeros(self.U, dtype=torch.long)
        for u, b in enumerate(slot_rows):
            p = prompts[b]
            ids[u, Tp - len(p):] = torch.tensor(p, dtype=torch.long)
            first[u] = Tp - len(p)
        ids, first = self.put(ids), self.put(first)
        ar = torch.arange(Tp, device=dev)
        self.prompt_ok.copy_((ar[None, :] >= first[:, None]).repeat_interleave(R, 0))
        pos = (ar[None, :] - first[:, None]).clamp(min=0)  # = cumsum(attention_mask) - 1 on real tokens
        G = a.n_heads // a.n_kv
        causal = ar[None, :] <= ar[:, None]                                     # [Tp(query), Tp(key)]
        chunk = max(1, PREFILL_TOKENS // Tp)
        last = torch.empty(self.U, a.embed.weight.shape[1], dtype=a.embed.weight.dtype, device=dev)
        for c0 in range(0, len(comp), chunk):
            us = self.index(comp[c0:c0 + chunk])
            valid = ar[None, :] >= first[us, None]                             # [b, Tp] real keys
            m = (causal[None] & valid[:, None, :]) | torch.eye(Tp, dtype=torch.bool, device=dev)[None]
            # pad queries see only themselves: no fully masked row, so no NaN in pad K/V
            mask = m[:, None].repeat(1, 1, G, 1)                               # [b, 1, G·Tp, Tp]
            h = a.embed(ids[us])
            cos, sin = _rotation(*a.rotary(h, pos[us]))
            lin = partial(self.proj, rows=us * R)
            # each layer's K/V straight into the cache (a staging copy of all layers' would be
            # 1.2 GB at the paper shape, on top of the cache, at the generation's peak)
            for i, layer in enumerate(a.layers):
                h = _prefill_layer(a, layer, h, cos, sin, self.kp[i], self.vp[i], us, mask, lin, self.qk_w[i])
            last[us] = h[:, -1]
        src_t = self.index(src)
        dup = [u for u in range(self.U) if src[u] != u]
        if dup:
            dup_t, from_t = self.index(dup), self.index([src[u] for u in dup])
            self.kp[:, dup_t], self.vp[:, dup_t] = self.kp[:, from_t], self.vp[:, from_t]
        logits = a.lm_head(rms_norm(a.norm, last[src_t]))                        # [U, V]
        self.place(self.U, R, [b // R for b in range(self.B)], [b % R for b in range(self.B)], list(range(self.B)))
        self.lane_row.copy_(torch.arange(self.B, device=dev))
        self.rows_host = list(range(self.B))
        self.done.zero_()
        self.out.fill_(self.pad_id)
        self.result.fill_(self.pad_id)
        self.col.fill_(0)
        self.tok[:, 0] = self.sample(logits.repeat_interleave(R, 0))
        self.pos.copy_((Tp - first).repeat_interleave(R, 0)[:, None])
        self.slot.fill_(0)
        self.out[:, 0] = self.tok[:, 0]
        self.col.fill_(1)

    @torch.no_grad()
    def run(self, prompts: list[list[int]], n_new: int, deploy: list[bool],
            timings: list | None = None, lengths: list[int] | None = None,
            compact_every: int | None = COMPACT_EVERY) -> torch.Tensor:
        """Completions [B, n_new] (pad after an EOS unless ignore_eos, and after a row's `lengths`
        tokens) for B prompts laid out in prompt slots: rows [u·R, (u+1)·R) share their prompt and
        sampling mode. compact_every: decode steps between compactions (None: never). With
        `timings`, appends {"capture_s", "prefill_s", "decode_s", "shapes"} (synchronising the
        device around each; capture_s: the host's seconds in the warm-up and in capturing this
        run's graphs, none once the engine holds them; the captures overlap the prefill and the
        queued steps, so prefill_s and decode_s (wall times) hold whatever of them the device's
        work did not hide, and capture_s counts it again; shapes: the (U', R', lanes) it decoded
        in, in turn: `layout`)."""
        if len(prompts) != self.B:
            raise ValueError(f"engine batch is {self.B}, got {len(prompts)} prompts")
        for b in range(self.B):
            u0 = b - b % self.R
            if prompts[b] != prompts[u0] or deploy[b] != deploy[u0]:
                raise ValueError(f"engine row {b}: prompt or sampling mode differs from row {u0}, "
                                 f"the first row of its prompt slot (group {self.R})")
        P = max(len(p) for p in prompts)
        if P > self.Tp or n_new - 1 > self.Tc:
            raise ValueError(f"prompt {P} and {n_new} new tokens exceed the engine's cache "
                             f"({self.Tp} prompt, {self.Tc + 1} new)")
        lengths = lengths if lengths is not None else [n_new] * self.B
        if len(lengths) != self.B or min(lengths) < 1:
            raise ValueError(f"engine: lengths must give each of the {self.B} rows at least one token")
        m_rows = self.put(torch.tensor([0.0 if d else 1.0 for d in deploy]))
        self.proj.refresh(m_rows.to(self.a.embed.weight.dtype))
        self.limit.copy_(self.index([min(n, n_new) for n in lengths]))
        cuda = self.tok.is_cuda
        tc = _clock(timings is not None)
        if cuda and self.pool is None:
            # before the prefill (the warm-up writes the step's buffers), after the refresh (so
            # the K/V it leaves in unwritten cache slots is finite: 0 · NaN would poison the step)
            self.warm_up()
        t0 = _clock(timings is not None)
        self.capture_s = 0.0
        self.prefill(prompts, deploy)
        # a GPU step is queued ahead of the host, so asking "all done?" stalls it; a CPU one is not
        check_every = 64 if cuda else 1
        # the steps a layout lasts at most: graphs for them are captured when it begins
        ahead = min(check_every, compact_every or check_every)
        if cuda:
            self.capture_ahead(range(1, min(ahead, n_new)))  # while the prefill runs
        t1 = _clock(timings is not None)
        shapes = [self.layout()]
        lag = compact_every // 4 if compact_every else 0  # steps between a snapshot and its compaction
        for step in range(1, n_new):
            if compact_every and (step + lag) % compact_every == 0:
                self.snapshot()
            if compact_every and step % compact_every == 0:
                if not self.compact(written=step):
                    break
                if self.layout() != shapes[-1]:
                    shapes.append(self.layout())
            if cuda and step % ahead == 0:
                self.capture_ahead(range(step, min(step + ahead, n_new)))
            span = self.span_for(step - 1)  # the completion slot this step writes
            if cuda:
                self.replay(span)
            else:
                self.decode_step(span)
            if step % check_every == 0 and bool(self.done[:self.lanes].all()):
                break
        self.flush()
        if timings is not None:
            timings.append({"capture_s": t0 - tc + self.capture_s, "prefill_s": t1 - t0,
                            "decode_s": _clock(True) - t1, "shapes": shapes})
        return self.result[:, :n_new].clone()


def capture_graph(step, pool, stream: torch.cuda.Stream) -> torch.cuda.CUDAGraph:
    """step() recorded as a CUDA graph in memory pool `pool`, on `stream`, with no wait on the host:
    torch.cuda.graph's context synchronises the device (and empties the allocator's cache) first.
    The two streams are ordered on the device instead: capture_begin writes the generator's seed
    and offset for graphs on `stream`, state that every replay also writes before it draws, so
    unordered a step still queued could draw the first draw's noise again."""
    g = torch.cuda.CUDAGraph()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        g.capture_begin(pool=pool)
        try:
            step()
        finally:
            g.capture_end()
    torch.cuda.current_stream().wait_stream(stream)
    return g


def _clock(sync: bool) -> float:
    if sync and torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter()


_ENGINE: dict[tuple, Engine] = {}


def engine(model, lora, batch, group, prompt_len, comp_len, temperature, top_p, eos_id, pad,
           ignore_eos, one_mode=False) -> Engine:
    """The engine for this shape and sampler; one is kept alive (its cache is the big buffer)."""
    key = (id(model), id(lora), batch, group, prompt_len, comp_len, float(temperature), float(top_p),
           eos_id, pad, ignore_eos, one_mode)
    if key not in _ENGINE:
        _ENGINE.clear()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        _ENGINE[key] = Engine(model, lora, batch, group, prompt_len, comp_len, temperature, top_p,
                              eos_id, pad, ignore_eos, one_mode)
    return _ENGINE[key]


def release() -> None:
    """Free the kept engine (its KV cache and graph) before memory-hungry training."""
    _ENGINE.clear()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def aligned(n: int) -> int:
    return CACHE_ALIGN * max(1, math.ceil(n / CACHE_ALIGN))


def prompt_slots(prompts: list[list[int]], deploy: list[bool]) -> tuple[list[int], int]:
    """A row order that puts rows with the same prompt and sampling mode next to each other
    (first appearance first; already-grouped rows keep their order), and the group R: the
    largest size that cuts every such run of rows into whole prompt slots."""
    first: dict[tuple, int] = {}
    keys = [first.setdefault((tuple(p), d), i) for i, (p, d) in enumerate(zip(prompts, deploy))]
    order = sorted(range(len(prompts)), key=lambda i: (keys[i], i))
    return order, math.gcd(*Counter(keys).values())


@torch.no_grad()
def generate_ids(model, prompts: list[list[int]], max_new_tokens: int, temperature: float,
                 top_p: float = 1.0, batch_size: int = 64, lora: Lora2r | None = None,
                 deploy_rows: list[bool] | None = None, eos_id: int | None = None, pad: int = 0,
                 ignore_eos: bool = False, cache_new_tokens: int | None = None,
                 progress: bool = False, timings: list | None = None, lengths: list[int] | None = None,
                 compact_every: int | None = COMPACT_EVERY) -> torch.Tensor:
    """Completion token ids [N, max_new_tokens] (on the CPU) for token-id prompts, in chunks of
    batch_size rows (a short last chunk is filled with copies of its last prompt). Rows past their
    EOS hold `pad`; ignore_eos forces every row to max_new_tokens, or with `lengths` row i to
    lengths[i] tokens (benchmarks). cache_new_tokens: size the cache for this many new tokens (one
    engine for a short warm-up and the real run). compact_every: see Engine.run."""
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    deploy_rows = deploy_rows if deploy_rows is not None else [False] * len(prompts)
    if len(deploy_rows) != len(prompts):
        raise ValueError("deploy_rows and prompts differ in length")
    Tp = aligned(max(len(p) for p in prompts))
    Tc = aligned(max(max_new_tokens, cache_new_tokens or 0) - 1)
    B = min(batch_size, len(prompts))
    out = []
    starts = range(0, len(prompts), B)
    for s in tqdm(starts, desc="fastgen", disable=not progress, leave=False):
        chunk, dep = prompts[s:s + B], deploy_rows[s:s + B]
        lens = list(lengths[s:s + B]) if lengths is not None else [max_new_tokens] * len(chunk)
        n = len(chunk)
        chunk = chunk + [chunk[-1]] * (B - n)
        dep = dep + [dep[-1]] * (B - n)
        lens = lens + [1] * (B - n)  # the filler rows stop at once
        order, R = prompt_slots(chunk, dep)
        eng = engine(model, lora, B, R, Tp, Tc, temperature, top_p, eos_id, pad, ignore_eos,
                     one_mode=len(set(dep)) == 1)
        ids = eng.run([chunk[i] for i in order], max_new_tokens, [dep[i] for i in order], timings,
                      [lens[i] for i in order], compact_every)
        back = torch.empty_like(ids)
        back[torch.tensor(order, device=ids.device)] = ids  # the caller's row order
        out.append(back[:n].cpu())
    return torch.cat(out)


@torch.no_grad()
def generate(model, tokenizer, prompts: list[str], max_new_tokens: int, temperature: float,
             top_p: float = 1.0, batch_size: int = 64, lora: Lora2r | None = None,
             deploy_rows: list[bool] | None = None, progress: bool = False) -> list[list[int]]:
    """Drop-in for `rollout.generate`: completion ids per prompt, cut after the first EOS
    (the EOS kept)."""
    eos = tokenizer.eos_token_id
    ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    toks = generate_ids(model, ids, max_new_tokens, temperature, top_p, batch_size, lora,
                        deploy_rows, eos_id=eos, pad=pad_id(tokenizer), progress=progress)
    out = []
    for row in toks.tolist():
        if eos in row:
            row = row[:row.index(eos) + 1]
        out.append(row)
    return out
