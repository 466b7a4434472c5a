"""Teacher-forced log-prob forwards: log π(token) on the completion tokens of a `Seqs` batch.

- `reference_token_logprobs`: the model's own forward (transformers' layers, the adapter's fp32
  deltas), [B, Lc, V] logits materialised; the reference every other path is tested against.
- `token_logprobs`, its fast drop-in (same arguments and results; `vgrout.engine.fastgen.select` picks
  it): the decoder layers run under activation checkpointing (only each layer's input is kept for
  the backward), and the log-probs are computed from the final hidden states in chunks of time
  steps, so [batch, time, vocab] is never materialised, in fp32 or at all. The lora2r masks in
  force at the forward are restored for the recompute in the backward, so `loss.backward()` may
  run outside `Lora2r.masked`. With fused_adapter the adapter's routing state selects FusedDelta
  (`Lora2rDelta` in the model's dtype) and the RMSNorms run as torch's fused rms_norm. The
  rotation (with Qwen3's q/k norms), SiLU·up and each chunk's log-probs are `vgrout.engine.compiled`'s
  chains: one kernel each on a GPU, the same ops eagerly elsewhere.

The fast forward runs the layout of `vgrout.engine.arch` (Llama / Qwen2 / Qwen3, full attention in every layer).
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right
from torch.utils.checkpoint import checkpoint
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

import vgrout.engine.arch as arch_module
from vgrout.engine import compiled
from vgrout.engine.adapter import ExactDelta, FrozenReader, FusedDelta, Lora2rLinear, routing_state
from vgrout.engine.arch import arch, rms_norm
from vgrout.engine.rollout import Seqs

LOGP_TOKENS = 4096      # tokens per log-prob chunk: [LOGP_TOKENS, vocab] fp32 at most
# On a CPU a chunk's fp32 logits stay under glibc's largest mmap threshold (32 MiB): a larger
# block is fresh pages from the kernel at every allocation, and its page faults cost more than
# the chunk's products (the tiny student's extract_vact probe ran twice as long at 768 tokens a chunk).
CPU_LOGP_BYTES = 16 << 20
# On a CPU a call whose fp32 logits total at most this keeps them for the backward instead of
# recomputing each chunk's (a third of the log-prob's cost); larger calls, and every call on a GPU,
# recompute, so [tokens, vocab] is never held whole.
CPU_KEEP_LOGITS_BYTES = 256 << 20
CHECKPOINT_ABOVE_TOKENS = 8192  # micro-batches of more tokens checkpoint their decoder layers,
KEEP_LAYERS = 0                 # all but the top KEEP_LAYERS (kept activations: memory for less recompute)
SHARE_ABOVE_TOKENS = 8192       # on a GPU, micro-batches of more tokens compute each prompt once


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    # Left padding: positions count real tokens only, matching what generate() used.
    return (attention_mask.cumsum(-1) - 1).clamp(min=0)


def reference_token_logprobs(model, seqs: Seqs, temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """log π(token) for the completion tokens: ([B, Lc], mask [B, Lc]), π = softmax(logits / T):
    at the temperature the tokens were sampled at, π is the policy that sampled them.

    Completions sit at the right end of every left-padded row, so only the last Lc+1
    positions need logits: [B, Lc, V] is materialised, never [B, T, V]."""
    Lc = int(seqs.completion_mask.sum(1).max())
    out = model(input_ids=seqs.input_ids, attention_mask=seqs.attention_mask,
                position_ids=position_ids(seqs.attention_mask), logits_to_keep=Lc + 1)
    logits = out.logits[:, :-1].float() / temperature
    targets = seqs.input_ids[:, -Lc:]
    logp = torch.gather(F.log_softmax(logits, -1), 2, targets.unsqueeze(-1)).squeeze(-1)
    mask = seqs.completion_mask[:, -Lc:].to(logp.dtype)
    return logp * mask, mask


# -- one decoder layer --------------------------------------------------------------------------

def _layer_forward(layer, h, st, fused_adapter, **kw):
    """One decoder layer. The variant of the lora2r deltas is set on the routing state here, so
    that a checkpoint recompute has it too. fused_adapter: FusedDelta, and the layer's RMSNorms
    through `rms_norm` (`_fused_layer`); else transformers' layer with ExactDelta. Under
    `Lora2r.frozen` the variant stays FrozenReader, which adds no delta for either kernel."""
    variant = st.variant if issubclass(st.variant, FrozenReader) else FusedDelta if fused_adapter else ExactDelta
    with st.scope(variant=variant):
        if fused_adapter:
            return _fused_layer(layer, h, **kw)
        out = layer(h, **kw)
    return out[0] if isinstance(out, tuple) else out


def _fused_layer(layer, h, attention_mask, position_ids, position_embeddings):
    """transformers' Llama / Qwen2 / Qwen3 decoder layer op for op (its attention function), except that
    its RMSNorms, q_norm and k_norm included, run through `rms_norm`, and its element-wise chains
    through `vgrout.engine.compiled`. position_ids: unused (the rotation comes in position_embeddings),
    taken as transformers' layer takes it."""
    attn = layer.self_attn
    q, k, v = (t.transpose(1, 2) for t in _project_qkv(layer, rms_norm(layer.input_layernorm, h),
                                                         *position_embeddings, rms_norm))
    impl = attn.config._attn_implementation
    family = sys.modules[type(attn).__module__]  # modeling_llama, modeling_qwen2, modeling_qwen3
    attend = family.eager_attention_forward if impl == "eager" else ALL_ATTENTION_FUNCTIONS[impl]
    o, _ = attend(attn, q, k, v, attention_mask, dropout=attn.attention_dropout if attn.training else 0.0,
                  scaling=attn.scaling)
    return _after_attention(layer, h, o.reshape(*h.shape[:-1], -1).contiguous(), rms_norm)


def trunk_depth(model) -> int:
    """Decoder layers below the first one holding a lora2r module: a frozen trunk whose output
    no adapter update can change, so it is computed once per rollout batch, not per forward."""
    for i, layer in enumerate(arch(model).layers):
        if any(isinstance(m, Lora2rLinear) for m in layer.modules()):
            return i
    return len(arch(model).layers)


# -- teacher-forced forwards with each prompt computed once, completions packed ------------------
# The G rollouts of a group share their prompt, and a prompt is most of a row's tokens. The
# forward therefore runs in two passes per layer: the distinct prompts (with the K/V they leave
# behind), then every row's completion attending to its prompt's K/V. A prompt is computed once
# per distinct routing mask (m, d) among its rows, since the adapter's forward depends on the mask.
# The completion pass runs its projections and MLP on the real tokens alone, packed one after
# another ([N, 1, D]: a token is a row of its own, with its row's masks), so a step's cost follows
# the rows' real lengths, not the longest; only its attention lays them out per row: on a GPU in
# flash's variable-length layout (`Varlen`), elsewhere in groups of rows of like length (`Packing`).

@dataclass
class Split:
    """A Seqs batch cut into distinct prompts and per-row completions."""
    prompt_ids: torch.Tensor    # [U, Tp] left-padded distinct prompts
    prompt_mask: torch.Tensor   # [U, Tp]
    owner: torch.Tensor         # [B] the prompt of each row
    comp_ids: torch.Tensor      # [B, Tc] right-padded completions
    comp_mask: torch.Tensor     # [B, Tc]
    lengths: torch.Tensor       # [B] real prompt tokens of each row (its completion's first position)


def split(seqs: Seqs) -> Split:
    ids, attn, comp = seqs.input_ids, seqs.attention_mask.bool(), seqs.completion_mask.bool()
    prompts, owner, comps = {}, [], []
    for i in range(ids.shape[0]):
        p = tuple(ids[i][attn[i] & ~comp[i]].tolist())
        owner.append(prompts.setdefault(p, len(prompts)))
        comps.append(ids[i][comp[i]])
    dev = ids.device
    Tp, Tc = max(map(len, prompts)), max(1, max(len(c) for c in comps))
    U, B = len(prompts), len(comps)
    p_ids, p_mask = torch.zeros(U, Tp, dtype=torch.long, device=dev), torch.zeros(U, Tp, dtype=torch.long, device=dev)
    for p, u in prompts.items():
        p_ids[u, Tp - len(p):] = torch.tensor(p, device=dev)
        p_mask[u, Tp - len(p):] = 1
    c_ids, c_mask = torch.zeros(B, Tc, dtype=torch.long, device=dev), torch.zeros(B, Tc, dtype=torch.long, device=dev)
    for i, c in enumerate(comps):
        c_ids[i, :len(c)], c_mask[i, :len(c)] = c, 1
    owner_t = torch.tensor(owner, device=dev)
    return Split(p_ids, p_mask, owner_t, c_ids, c_mask, p_mask.sum(1)[owner_t])


ATTENTION_BUCKETS = 4  # the completion pass attends in up to this many groups of rows of like length
# The completion pass's attention on a GPU in bf16 / fp16: flash's variable-length kernel over the
# packed tokens (no padding, no per-group copies). "cuda": where it runs (`flash_runs`); "always":
# the same layout elsewhere too, through a per-row loop (tests); "never": groups of like length.
VARLEN = "cuda"


@dataclass
class Packing:
    """Where each packed completion token sits: its row and its position in the row's completion."""
    row: torch.Tensor    # [N]
    col: torch.Tensor    # [N]
    rows: int            # B
    width: int           # Tc

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """[N, ...] -> [B, Tc, ...], zeros where a row has no token."""
        out = x.new_zeros(self.rows, self.width, *x.shape[1:])
        return out.index_put((self.row, self.col), x)

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        return x[self.row, self.col]

    def buckets(self, n: int = ATTENTION_BUCKETS) -> list[tuple[torch.Tensor, torch.Tensor, "Packing"]]:
        """The rows in up to n groups of like length (sorted, cut into equal counts; groups of one
        width merged): per group, its rows, the packed indices of its tokens, and their Packing
        inside the group, padded to the group's longest row only."""
        lengths = torch.bincount(self.row, minlength=self.rows)
        order = lengths.argsort(stable=True)
        cuts = [order[i:i + math.ceil(self.rows / n)] for i in range(0, self.rows, math.ceil(self.rows / n))]
        groups: list[torch.Tensor] = []
        for c in cuts:
            if groups and int(lengths[groups[-1]].min()) == int(lengths[c].max()):
                groups[-1] = torch.cat([groups[-1], c])  # one width: one group
            else:
                groups.append(c)
        local = torch.empty_like(order)
        out = []
        for rows in groups:
            rows = rows.sort().values
            local[rows] = torch.arange(len(rows), device=rows.device)
            tok = torch.isin(self.row, rows).nonzero().squeeze(1)
            out.append((rows, tok, Packing(local[self.row[tok]], self.col[tok], len(rows), max(1, int(lengths[rows].max())))))
        return out


def _attend(q, k, v, allowed, scale):
    """Attention of q [b, H, Lq, Dh] over k, v [b, Hkv, Lk, Dh]. allowed None: every key is real and
    query i sees keys up to Lk − Lq + i (causal from the lower right: the flash kernel on a GPU);
    else the boolean mask [b, Lq, Lk]."""
    if allowed is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(q.shape[2], k.shape[2]),
                                              scale=scale, enable_gqa=True)
    G = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(G, 1), v.repeat_interleave(G, 1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed[:, None], scale=scale)


@dataclass
class Varlen:
    """The completion pass's keys as flash's variable-length layout: row r's keys are its prompt's
    real tokens, then its own completion tokens (`idx` into [prompt K/V of every key, flattened;
    packed completion K/V]); its queries are its packed tokens. Rows without a completion token
    have no queries and are left out."""
    idx: torch.Tensor    # [Σ keys] rows of the source
    cu_q: torch.Tensor   # [rows + 1] int32 offsets of each row's queries
    cu_k: torch.Tensor   # [rows + 1] int32 offsets of each row's keys
    max_q: int
    max_k: int


def _varlen(key_of_row: torch.Tensor, K: int, Tp: int, prompt_len: torch.Tensor, n: torch.Tensor) -> Varlen:
    """The Varlen of rows whose prompt K/V is key key_of_row[r] of K (left-padded to Tp,
    prompt_len[r] real tokens) and who have n[r] packed completion tokens (row-major)."""
    rows = (n > 0).nonzero().squeeze(1)
    L, c = prompt_len[rows], n[rows]
    first = (n.cumsum(0) - n)[rows]  # each row's first packed token
    lk = L + c
    cu_q, cu_k = F.pad(c.cumsum(0), (1, 0)), F.pad(lk.cumsum(0), (1, 0))
    seg = torch.repeat_interleave(torch.arange(len(rows), device=n.device), lk)
    j = torch.arange(len(seg), device=n.device) - cu_k[seg]
    idx = torch.where(j < L[seg], key_of_row[rows][seg] * Tp + Tp - L[seg] + j, K * Tp + first[seg] + j - L[seg])
    return Varlen(idx, cu_q.int(), cu_k.int(), int(c.max()), int(lk.max()))


class _Gather(torch.autograd.Function):
    """src.index_select(0, idx), its gradient summed in fp32: a prompt key is read by every row
    of its group, and atomic adds in bf16 would round at each of them."""

    @staticmethod
    def forward(ctx, src, idx):
        ctx.save_for_backward(idx)
        ctx.rows = src.shape[0]
        return src.index_select(0, idx)

    @staticmethod
    def backward(ctx, grad):
        idx, = ctx.saved_tensors
        acc = grad.new_zeros(ctx.rows, *grad.shape[1:], dtype=torch.float32).index_add_(0, idx, grad.float())
        return acc.to(grad.dtype), None


def flash_runs(device, dtype, head_dim: int) -> bool:
    """Whether flash's variable-length kernel takes these inputs: a GPU of compute capability 8 or
    more, bf16 or fp16, a head size up to 256 and a multiple of 8."""
    return (device.type == "cuda" and dtype in (torch.bfloat16, torch.float16) and head_dim <= 256
            and head_dim % 8 == 0 and torch.cuda.get_device_capability(device)[0] >= 8)


def _attend_varlen(q, k_src, v_src, vl: Varlen, scale):
    """Attention of packed queries q [N, H, Dh] over each row's keys (`Varlen`), causal from the
    lower right: a completion token sees its prompt and its own row up to itself."""
    k, v = _Gather.apply(k_src, vl.idx), _Gather.apply(v_src, vl.idx)
    if flash_runs(q.device, q.dtype, q.shape[-1]):
        return torch.ops.aten._flash_attention_forward(q, k, v, vl.cu_q, vl.cu_k, vl.max_q, vl.max_k, 0.0, True,
                                                       False, scale=scale)[0]
    cq, ck = vl.cu_q.tolist(), vl.cu_k.tolist()
    return torch.cat([_attend(q[cq[i]:cq[i + 1]].transpose(0, 1)[None], k[ck[i]:ck[i + 1]].transpose(0, 1)[None],
                              v[ck[i]:ck[i + 1]].transpose(0, 1)[None], None, scale)[0].transpose(0, 1)
                      for i in range(len(cq) - 1)])


def _project_qkv(layer, x, cos, sin, norm):
    """q, k, v [b, L, heads, Dh] of the normed input x [b, L, D], q and k rotated (transformers' rotation)."""
    attn = layer.self_attn
    shape = (*x.shape[:-1], -1, attn.head_dim)
    q, k, v = attn.q_proj(x), attn.k_proj(x), attn.v_proj(x).view(shape)
    qk_norm = hasattr(attn, "q_norm")  # Qwen3: RMSNorm per head before the rotation
    if _chains(norm):  # as tokens × features
        norms = (attn.q_norm.weight, attn.k_norm.weight, attn.q_norm.variance_epsilon, attn.k_norm.variance_epsilon) \
            if qk_norm else (None, None, 0.0, 0.0)
        q, k = compiled.norm_rotate(q.flatten(0, -2), k.flatten(0, -2), cos.flatten(0, -2), sin.flatten(0, -2),
                                    *norms, attn.head_dim)
        return q.view(shape), k.view(shape), v
    q, k = q.view(shape), k.view(shape)
    if qk_norm:
        q, k = norm(attn.q_norm, q), norm(attn.k_norm, k)
    return (*apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=2), v)


def _after_attention(layer, h, o, norm):
    h = h + layer.self_attn.o_proj(o)
    x, mlp = norm(layer.post_attention_layernorm, h), layer.mlp
    if _chains(norm) and getattr(getattr(mlp, "config", None), "hidden_act", None) == "silu":
        act = compiled.silu_mul(mlp.gate_proj(x).flatten(0, -2), mlp.up_proj(x).flatten(0, -2))
        return h + mlp.down_proj(act.view(*x.shape[:-1], -1))
    return h + mlp(x)


def _chains(norm) -> bool:
    """Whether a layer runs `vgrout.engine.compiled`'s chains: in the fused forward with torch's fused
    RMSNorm (transformers' own modules otherwise)."""
    return norm is rms_norm and arch_module.FAST_NORM


def _two_pass_layer(layer, hp, hc, st, prompt_rows, comp_rows, key_of_row, p_kw, c_kw, fused_adapter):
    """One decoder layer over the prompts hp [K, Tp, D], then over the packed completion tokens hc
    [N, 1, D] attending to their prompt's K/V. The masks are explicit arguments ({m, d,
    pool_weights} of each pass's rows, per key and per token; {}: leave the routing state as it
    is), so a checkpoint recompute in the backward sees the forward's masks."""
    attn = layer.self_attn
    norm = rms_norm if fused_adapter else (lambda mod, x: mod(x))
    variant = st.variant if issubclass(st.variant, FrozenReader) else FusedDelta if fused_adapter else ExactDelta
    K, Tp = hp.shape[:2]
    with st.scope(variant=variant, **prompt_rows):
        q, k_tok, v_tok = _project_qkv(layer, norm(layer.input_layernorm, hp), *p_kw["rotary"], norm)
        q, k, v = (t.transpose(1, 2) for t in (q, k_tok, v_tok))
        o = _attend(q, k, v, p_kw["allowed"], attn.scaling).transpose(1, 2).reshape(K, Tp, -1)
        hp = _after_attention(layer, hp, o, norm)
    with st.scope(variant=variant, **comp_rows):
        qc, kc, vc = _project_qkv(layer, norm(layer.input_layernorm, hc), *c_kw["rotary"], norm)
        if c_kw["varlen"] is not None:  # every row's keys gathered in one layout, no padding
            k_src, v_src = torch.cat([k_tok.flatten(0, 1), kc[:, 0]]), torch.cat([v_tok.flatten(0, 1), vc[:, 0]])
            o = _attend_varlen(qc[:, 0], k_src, v_src, c_kw["varlen"], attn.scaling)
        else:
            o = qc.new_empty(qc.shape[0], *qc.shape[2:])  # [N, H, Dh]
            for rows, tok, pk in c_kw["buckets"]:  # rows of like length: little padding in attention
                qb, kb, vb = (pk.pad(t[tok, 0]).transpose(1, 2) for t in (qc, kc, vc))  # [b, heads, Tb, Dh]
                keys, values = torch.cat([k[key_of_row[rows]], kb], 2), torch.cat([v[key_of_row[rows]], vb], 2)
                allowed = c_kw["allowed"]
                if allowed is not None:  # its prompt's real keys, then its own tokens up to itself
                    Tb = qb.shape[2]
                    allowed = torch.cat([allowed[rows, :Tb, :Tp], allowed[rows, :Tb, Tp:Tp + Tb]], 2)
                o[tok] = pk.pack(_attend(qb, keys, values, allowed, attn.scaling).transpose(1, 2))
        hc = _after_attention(layer, hc, o.flatten(1)[:, None], norm)
    return hp, hc


def trunk_rows(seqs: Seqs, trunk, rows: list[int]):
    """The trunk of seqs.rows(rows), cut from the trunk of seqs (a frozen layer's output at a row's
    token depends on that row alone). rows: ascending. The one-pass trunk [B, T, D] by row; the
    two-pass trunk's prompts by the rows' own (their last columns: left-padded to the longest of
    them, as the subset lays them out) and its packed completion tokens by row."""
    if list(rows) != sorted(set(rows)):
        raise ValueError(f"logprob.trunk_rows: rows must ascend without repeats, got {rows}")
    idx = torch.tensor(rows, device=seqs.input_ids.device)
    if not isinstance(trunk, tuple):
        return trunk[idx]
    hp, hc = trunk
    full, sub = split(seqs), split(seqs.rows(rows))
    prompt_of = torch.empty_like(sub.prompt_ids[:, 0]).index_put_((sub.owner,), full.owner[idx])
    row, _ = full.comp_mask.nonzero(as_tuple=True)  # the packed tokens' rows, row-major
    return hp[prompt_of][:, hp.shape[1] - sub.prompt_ids.shape[1]:], hc[torch.isin(row, idx)]


def _additive(allowed: torch.Tensor, dtype) -> torch.Tensor:
    """A boolean [B, Tq, Tk] mask as the additive [B, 1, Tq, Tk] form transformers' attention takes."""
    mask = torch.zeros(allowed.shape[0], 1, *allowed.shape[1:], dtype=dtype, device=allowed.device)
    return mask.masked_fill_(~allowed[:, None], torch.finfo(dtype).min)


def _keys(owner: torch.Tensor, st) -> tuple[torch.Tensor, torch.Tensor]:
    """Distinct (prompt, m, d) among the rows: (the prompt of each key, the key of each row)."""
    if st.m is None:
        return torch.unique(owner, return_inverse=True)
    d = st.d.long() if st.d is not None else torch.zeros_like(owner)
    code = (owner * 2 + d) * 2 + (st.m > 0).long()
    if not torch.equal(st.m, (st.m > 0).to(st.m.dtype)):
        raise ValueError("fastgen: the quarantine mask m must be 0 or 1 per row")
    uniq, key_of_row = torch.unique(code, return_inverse=True)
    return uniq // 4, key_of_row


def shares_prompts(seqs: Seqs) -> bool:
    """Whether the two-pass forward pays: on a CPU, fewer tokens is less time; on a GPU a small
    micro-batch is bound by kernel launches, which two passes per layer double (measured on an
    H200: the issue's shape, 8 rows of 300 + 256 tokens, went from 7.2 s to 9.4 s a step)."""
    return seqs.input_ids.device.type == "cpu" or seqs.input_ids.numel() > SHARE_ABOVE_TOKENS


def hidden_states(model, seqs: Seqs, checkpoint_layers: bool = True, fused_adapter: bool = True,
                  trunk=None, return_trunk: bool = False, keep_layers: int | None = None, one_pass: bool = False):
    """Final-norm hidden states that predict each completion token, [B, Lc, D], right-aligned like
    the completions in `seqs` (rows with fewer tokens start later). Each decoder layer is
    checkpointed when grad is on and the batch is large.
    fused_adapter: lora2r deltas through Lora2rDelta (x's dtype) instead of Lora2rLinear's fp32.
    trunk: the frozen trunk's output for these rows (from an earlier call with return_trunk), so
    only the adapted layers run; return_trunk: return (h, trunk). keep_layers: the top layers
    that keep their activations when the others are checkpointed (default KEEP_LAYERS). one_pass:
    every row computes its own prompt (no prompt shared between rows: a per-row probe stays per row)."""
    h, packing, trunk = _hidden(model, seqs, checkpoint_layers, fused_adapter, trunk, keep_layers, one_pass)
    if packing is not None:
        h = packing.pad(h)
    return (h, trunk) if return_trunk else h


def _hidden(model, seqs, checkpoint_layers, fused_adapter, trunk, keep_layers, one_pass):
    """(h, packing, trunk): packed h [N, D] and its Packing from the two-pass forward, or
    [B, Lc, D] and None from the one-pass forward."""
    keep = KEEP_LAYERS if keep_layers is None else keep_layers
    # a given trunk fixes the layout it was computed in (trunk_rows keeps it for fewer rows)
    if one_pass and isinstance(trunk, tuple):
        raise ValueError("logprob: one_pass=True with a two-pass trunk (prompts, packed completions)")
    two_pass = isinstance(trunk, tuple) if trunk is not None else shares_prompts(seqs) and not one_pass
    if two_pass:
        return _two_pass_hidden(model, seqs, checkpoint_layers, fused_adapter, trunk, keep)
    h, trunk = _one_pass_hidden(model, seqs, checkpoint_layers, fused_adapter, trunk, keep)
    return h, None, trunk


def _one_pass_hidden(model, seqs: Seqs, checkpoint_layers: bool, fused_adapter: bool, trunk, keep: int):
    """Every row's prompt and completion in one pass. trunk: [B, T, D] at the first adapted layer."""
    a = arch(model)
    ids, attn = seqs.input_ids, seqs.attention_mask
    B, T = ids.shape
    pos = position_ids(attn)
    depth = trunk_depth(model)
    st = routing_state(model)
    h = a.embed(ids)
    ar = torch.arange(T, device=ids.device)
    allowed = (ar[None, :] <= ar[:, None])[None] & attn.bool()[:, None, :]
    allowed |= torch.eye(T, dtype=torch.bool, device=ids.device)[None]  # pad queries: themselves
    kw = dict(attention_mask=_additive(allowed, h.dtype), position_ids=pos, position_embeddings=a.rotary(h, pos))
    if trunk is None:
        with torch.no_grad():  # frozen: no parameter below `depth` has a gradient
            for layer in a.layers[:depth]:
                h = _layer_forward(layer, h, st, fused_adapter, **kw)
        trunk = h
    h = trunk
    # small micro-batches keep their activations: the recompute costs a third of the step
    grad = torch.is_grad_enabled() and checkpoint_layers and B * T > CHECKPOINT_ABOVE_TOKENS
    for i, layer in enumerate(a.layers[depth:]):
        if grad and i < len(a.layers) - depth - keep:
            h = checkpoint(_layer_forward, layer, h, st, fused_adapter, use_reentrant=False,
                           context_fn=st.at_recompute(), **kw)
        else:
            h = _layer_forward(layer, h, st, fused_adapter, **kw)
    out = rms_norm(a.norm, h) if fused_adapter else a.norm(h)
    Lc = int(seqs.completion_mask.sum(1).max())
    return out[:, -(Lc + 1):-1], trunk


def _two_pass_hidden(model, seqs: Seqs, checkpoint_layers: bool, fused_adapter: bool, trunk, keep: int):
    """Distinct prompts, then the packed completion tokens attending to them. Returns the hidden
    states that predict each completion token, packed [N, D], their Packing in the right-aligned
    [B, Lc] layout of `seqs`, and the trunk: (prompts, packed completions) at the first adapted layer."""
    a = arch(model)
    sp = split(seqs)
    st = routing_state(model)
    if st.probe is not None:
        raise ValueError("logprob: a per-row probe needs one_pass=True (packed tokens are rows of their own)")
    B, Tp, Tc = len(sp.owner), sp.prompt_ids.shape[1], sp.comp_ids.shape[1]
    row, col = sp.comp_mask.nonzero(as_tuple=True)  # row-major: a row's tokens in order
    n = sp.comp_mask.sum(1)
    dtype = a.embed.weight.dtype
    if VARLEN not in ("cuda", "always", "never"):
        raise ValueError(f"logprob.VARLEN = {VARLEN!r}; valid: 'cuda', 'always', 'never'")
    varlen = VARLEN == "always" or (VARLEN == "cuda" and flash_runs(row.device, dtype, a.head_dim))
    buckets = None if varlen else Packing(row, col, B, Tc).buckets()
    key_prompt, key_of_row = _keys(sp.owner, st)
    m_rows, d_rows = st.m, st.d
    m_keys = None if m_rows is None else torch.zeros_like(m_rows[:len(key_prompt)]).index_copy_(0, key_of_row, m_rows)
    d_keys = None if d_rows is None else torch.zeros_like(d_rows[:len(key_prompt)]).index_copy_(0, key_of_row, d_rows)
    pool_tok = None
    if st.pool_weights is not None:
        # the caller's weights [B, T] over the left-padded rows, read at each completion token
        # (the gate pools completion tokens only; the prompt pass pools nothing)
        T = seqs.input_ids.shape[1]
        pool_tok = st.pool_weights[row, T - n[row] + col][:, None]

    dev = sp.owner.device
    ar_p, ar_c = torch.arange(Tp, device=dev), torch.arange(Tc, device=dev)
    pos_p = position_ids(sp.prompt_mask)
    pos_c = (sp.lengths[row] + col)[:, None]
    if bool(sp.prompt_mask.all()):  # no prompt is padded: causal from the lower right in both passes
        allowed_p = allowed_c = None
    else:
        allowed_p = (ar_p[None, :] <= ar_p[:, None])[None] & sp.prompt_mask.bool()[:, None, :]
        allowed_p |= torch.eye(Tp, dtype=torch.bool, device=dev)[None]  # pad queries: themselves
        # a completion token sees its own prompt and the completion tokens up to itself
        allowed_c = torch.cat([sp.prompt_mask.bool()[sp.owner][:, None, :].expand(-1, Tc, -1),
                               (ar_c[None, :] <= ar_c[:, None])[None].expand(B, -1, -1)], 2)

    depth = trunk_depth(model)
    if trunk is None:  # the frozen trunk, once per distinct prompt, without grad
        with torch.no_grad():
            hp, hc = a.embed(sp.prompt_ids), a.embed(sp.comp_ids[row, col])[:, None]
            p_kw = dict(rotary=a.rotary(hp, pos_p), allowed=allowed_p)
            c_kw = dict(rotary=a.rotary(hc, pos_c), allowed=allowed_c, buckets=buckets,
                        varlen=_varlen(sp.owner, len(sp.prompt_ids), Tp, sp.lengths, n) if varlen else None)
            for layer in a.layers[:depth]:
                hp, hc = _two_pass_layer(layer, hp, hc, st, {}, {}, sp.owner, p_kw, c_kw, fused_adapter)
        trunk = (hp, hc)
    hp, hc = trunk
    # the adapted layers: each prompt once per distinct routing mask among its rows
    hp = hp[key_prompt]
    p_kw = dict(rotary=a.rotary(hp, pos_p[key_prompt]), allowed=None if allowed_p is None else allowed_p[key_prompt])
    c_kw = dict(rotary=a.rotary(hc, pos_c), allowed=allowed_c, buckets=buckets,
                varlen=_varlen(key_of_row, len(key_prompt), Tp, sp.lengths, n) if varlen else None)
    grad = torch.is_grad_enabled() and checkpoint_layers and hp.shape[0] * Tp + len(row) > CHECKPOINT_ABOVE_TOKENS
    prompt_rows = dict(m=m_keys, d=d_keys, pool_weights=None)
    comp_rows = dict(m=None if m_rows is None else m_rows[row], d=None if d_rows is None else d_rows[row],
                     pool_weights=pool_tok)
    pooled_before = dict(st.pooled)
    for i, layer in enumerate(a.layers[depth:]):
        args = (layer, hp, hc, st, prompt_rows, comp_rows, key_of_row, p_kw, c_kw, fused_adapter)
        if grad and i < len(a.layers) - depth - keep:
            hp, hc = checkpoint(_two_pass_layer, *args, use_reentrant=False)
        else:
            hp, hc = _two_pass_layer(*args)
    if pool_tok is not None:  # per token -> per row
        for name, v in st.pooled.items():
            if v is not pooled_before.get(name):
                st.pooled[name] = v.new_zeros(B, v.shape[1]).index_add_(0, row, v)
    norm = (lambda x: rms_norm(a.norm, x)) if fused_adapter else a.norm
    # the token at completion position j is predicted by position j − 1; j = 0 by the prompt's last
    pred = torch.cat([norm(hp[:, -1])[key_of_row], norm(hc[:, 0])])
    t = torch.arange(len(row), device=dev)
    pred = pred[torch.where(col == 0, row, B + t - 1)]
    # right-align each row's completion, like the left-padded `seqs`
    Lc = int(seqs.completion_mask.sum(1).max())
    return pred, Packing(row, col + Lc - n[row], B, Lc), trunk


def token_logprobs(model, seqs: Seqs, chunk_tokens: int = LOGP_TOKENS, fused_adapter: bool = True,
                   trunk: tuple | None = None, return_trunk: bool = False, keep_layers: int | None = None,
                   temperature: float = 1.0, one_pass: bool = False):
    """Drop-in for `reference_token_logprobs`: log π(token) on the completion tokens ([B, Lc], mask),
    π = softmax(logits / temperature).
    With fused_adapter the lora2r deltas run in the model's dtype (bf16 on a GPU) with fp32
    accumulation, like a standard bf16 LoRA; fused_adapter=False keeps Lora2rLinear's fp32.
    trunk / return_trunk / keep_layers / one_pass: as in `hidden_states` (return_trunk appends the trunk)."""
    Lc = int(seqs.completion_mask.sum(1).max())
    h, packing, h_trunk = _hidden(model, seqs, True, fused_adapter, trunk, keep_layers, one_pass)
    targets = seqs.input_ids[:, -Lc:]
    if packing is not None:  # one row of tokens: [N, D] -> [1, N, D]
        h, targets = h[None], packing.pack(targets)[None]
    weight = arch(model).lm_head.weight
    cpu = h.device.type == "cpu"
    if cpu:
        chunk_tokens = min(chunk_tokens, max(1, CPU_LOGP_BYTES // (4 * weight.shape[0])))
    recompute = not (cpu and h.shape[0] * h.shape[1] * weight.shape[0] * 4 <= CPU_KEEP_LOGITS_BYTES)
    step = max(1, chunk_tokens // h.shape[0])
    parts = []
    for t0 in range(0, h.shape[1], step):
        hc, tc = h[:, t0:t0 + step], targets[:, t0:t0 + step]
        args = (hc.flatten(0, 1), tc.flatten(), weight, temperature)  # as tokens × features
        if torch.is_grad_enabled() and recompute:  # recompute the chunk's logits in the backward
            parts.append(checkpoint(compiled.logp_chunk, *args, use_reentrant=False).view(tc.shape))
        else:
            parts.append(compiled.logp_chunk(*args).view(tc.shape))
    logp = torch.cat(parts, 1)
    if packing is not None:
        logp = packing.pad(logp[0])
    mask = seqs.completion_mask[:, -Lc:].to(logp.dtype)
    return (logp * mask, mask, h_trunk) if return_trunk else (logp * mask, mask)
