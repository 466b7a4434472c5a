"""The decode step's attention as Triton kernels: q and k normed, rotated and k, v written into
the cache in one kernel (`rotate_into_cache`); then the attention (`attend`): each prompt slot's
query rows (its lanes' G query heads of one KV head) against the slot's keys, and each lane's
against its own completion keys, starting from the prompt's partial result; split over the keys
while lanes are few, the splits merged by their log-sum-exp.

`rotate_into_cache` replaces eight kernels a layer (Qwen3's per-head norm and its weights, the
rotation's multiply, roll and multiply-add, q's scaling, two cache writes): a decode step is
bound by its kernels' count at few lanes.

`decode._decode_attention` runs it as batched matmuls: the prompt's scores per slot, the row's
own scores, their concatenation, a masked fill, a softmax and two products with V, with layout
copies between them, about ten kernels a layer, and the own products read the cache at about
80% of the copy rate. Here a kernel reads each prompt K/V block once for the slot's R lanes and
G heads (a tile of up to ROWS = 64 of those R·G rows, so once per slot where R·G ≤ 64, as at
Qwen3-4B's G = 4 and groups of 16: a group's rollouts share their prompt), another each completion block
once for its lane's G heads, both keep the softmax online in fp32 (as flash attention does), the
second skips the completion slots past the one written at this step (the span's empty tail) and,
with one split per lane, writes the output itself; with more, a third merges them. Until
2026-11-27 one kernel per lane read its slot's prompt as well, each lane of a slot reading it
again (from L2 mostly): at the `paper` shape that was most of a step's attention at short spans.

`silu_mul` is the gated MLP's silu(gate)·up in one pass, eager's rounding kept (`decode._mlp`).

Same function as the matmul path up to rounding: the scores and the softmax's running max and sum
stay fp32 here, where the matmul path rounds the scores and weights to the model's dtype (in bf16
the weights are rounded to bf16 for the product with V, as flash attention does). Only the sampler reads it (see vgrout.engine.decode).
Runs on a GPU with Triton; `usable` says when, and the engine keeps the matmul path elsewhere.
"""
from __future__ import annotations

import torch
from transformers.activations import SiLUActivation

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the engine's matmul path
    triton = None

BLOCK = 64      # keys per block; the prompt cache length is a multiple of it (decode.CACHE_ALIGN)
# the own keys split until lanes × KV heads × splits reach this many programs. 512 (was 1024): at
# 64 lanes and 8 KV heads the keys are not split, so no merge kernel runs. Evidence, thin: one replay
# pair at the issue shape (span 256, H100: 7.69 ms at 512, 7.88 at 1024) and paper_natural's
# generation in two warm runs at 512 against one at 1024 (docs/performance.md)
PROGRAMS = 512
PROMPT_PROGRAMS = 128  # the prompt's keys split until slots × row tiles × KV heads × splits reach this many
PROMPT_WARPS = 4  # warps of a prompt program
ROWS = 64       # a prompt program's query rows (a slot's lanes × G heads), at most


def usable(x: torch.Tensor, Tp: int, groups: int, head_dim: int) -> bool:
    """Whether the kernels serve a step on x's device: a GPU, Triton present, prompt slots a whole
    number of blocks, a KV head's query heads within one 16-row tile, a power-of-two head."""
    return triton is not None and x.is_cuda and Tp % BLOCK == 0 and groups <= 16 and head_dim in (64, 128)


if triton is not None:
    @triton.jit
    def _rotate_kernel(y_ptr, w_ptr, cos_ptr, sin_ptr, q_ptr, kc_ptr, vc_ptr, slot_ptr,
                       s_yb, s_cos, s_sin, s_cb, s_ch, s_ct, eps, scaling,
                       H: tl.constexpr, HKV: tl.constexpr, DH: tl.constexpr, NORM: tl.constexpr):
        b, head = tl.program_id(0).to(tl.int64), tl.program_id(1)  # head < H: q's; else k's head − H, with its v
        d = tl.arange(0, DH)
        partner = (d + DH // 2) % DH  # rotate_half's partner; its sign is folded into sin
        row = y_ptr + b * s_yb + head * DH
        x = tl.load(row + d).to(tl.float32)
        xp = tl.load(row + partner).to(tl.float32)
        if NORM:  # Qwen3: RMSNorm over the head, then its weight
            r = tl.rsqrt(tl.sum(x * x, 0) / DH + eps)
            x = x * r * tl.load(w_ptr + head * DH + d).to(tl.float32)
            xp = xp * r * tl.load(w_ptr + head * DH + partner).to(tl.float32)
        out = x * tl.load(cos_ptr + b * s_cos + d).to(tl.float32) + xp * tl.load(sin_ptr + b * s_sin + d).to(tl.float32)
        if head < H:
            tl.store(q_ptr + (b * H + head) * DH + d, (out * scaling).to(q_ptr.dtype.element_ty))
        else:
            j = head - H
            at = b * s_cb + j * s_ch + tl.load(slot_ptr) * s_ct + d
            tl.store(kc_ptr + at, out.to(kc_ptr.dtype.element_ty))
            tl.store(vc_ptr + at, tl.load(y_ptr + b * s_yb + (H + HKV + j) * DH + d))

    @triton.jit
    def _block(q, k_ptrs, v_ptrs, valid, m_i, l_i, acc, IEEE: tl.constexpr):
        k = tl.load(k_ptrs, mask=valid[:, None], other=0.0)
        v = tl.load(v_ptrs, mask=valid[:, None], other=0.0)
        if IEEE:
            s = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # no key yet: nothing to rescale
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        if IEEE:
            pv = tl.dot(p, v.to(tl.float32), input_precision="ieee")
        else:
            pv = tl.dot(p.to(v.dtype), v)
        acc = acc * alpha[:, None] + pv
        return m_new, l_i, acc

    @triton.jit
    def _prompt_kernel(q_ptr, kp_ptr, vp_ptr, ok_ptr, slot_lane_ptr, m_ptr, l_ptr, o_ptr,
                       s_qb, s_qh, s_pu, s_ph, s_pt, s_ok, R, n_tiles, n_prompt, per_split, n_split,
                       HKV: tl.constexpr, G: tl.constexpr, ROWS: tl.constexpr, DH: tl.constexpr,
                       BLOCK_N: tl.constexpr, IEEE: tl.constexpr):
        # one prompt slot's query rows (its R lanes' G heads of KV head h) against the slot's keys:
        # each K/V block is read once for the whole group of rollouts
        u, tile = tl.program_id(0) // n_tiles, tl.program_id(0) % n_tiles
        h, split = tl.program_id(1), tl.program_id(2)
        i, d, n = tl.arange(0, ROWS), tl.arange(0, DH), tl.arange(0, BLOCK_N)
        qr = tile * ROWS + i  # the slot's query row r·G + g
        r, g = qr // G, qr % G
        lane = tl.load(slot_lane_ptr + u * R + r, mask=r < R, other=-1)
        live = lane >= 0
        b = tl.maximum(lane, 0).to(tl.int64)  # 64-bit offsets: a layer's cache may pass 2^31 elements
        q = tl.load(q_ptr + b[:, None] * s_qb + (h * G + g)[:, None] * s_qh + d[None, :], mask=live[:, None], other=0.0)
        if IEEE:
            q = q.to(tl.float32)
        # the slot's lanes share its prompt and so its padding: the mask of its first row's lane
        first = tl.maximum(tl.load(slot_lane_ptr + u * R), 0).to(tl.int64)
        m_i = tl.full([ROWS], float("-inf"), tl.float32)
        l_i = tl.zeros([ROWS], tl.float32)
        acc = tl.zeros([ROWS, DH], tl.float32)
        lo = split * per_split
        for blk in range(lo, tl.minimum(lo + per_split, n_prompt)):
            t = blk * BLOCK_N + n
            valid = tl.load(ok_ptr + first * s_ok + t) != 0
            off = u.to(tl.int64) * s_pu + h * s_ph + t[:, None] * s_pt + d[None, :]
            m_i, l_i, acc = _block(q, kp_ptr + off, vp_ptr + off, valid, m_i, l_i, acc, IEEE)
        row = ((u * R + r).to(tl.int64) * HKV * G + h * G + g) * n_split + split  # [U·R, H, n_split]
        tl.store(m_ptr + row, m_i, mask=live)
        tl.store(l_ptr + row, l_i, mask=live)
        tl.store(o_ptr + row[:, None] * DH + d[None, :], acc, mask=live[:, None])

    @triton.jit
    def _own_kernel(q_ptr, kc_ptr, vc_ptr, slot_ptr, lane_qrow_ptr, mp_ptr, lp_ptr, op_ptr, m_ptr, l_ptr, o_ptr,
                    s_qb, s_qh, s_cb, s_ch, s_ct, n_prompt_split, per_split, n_split,
                    HKV: tl.constexpr, G: tl.constexpr, GP: tl.constexpr, DH: tl.constexpr,
                    BLOCK_N: tl.constexpr, IEEE: tl.constexpr, FINAL: tl.constexpr):
        # one lane's G heads of KV head h against its own completion keys; the first split starts
        # from the prompt's partial results (`_prompt_kernel`), and with one split this writes o
        lane_head, split = tl.program_id(0), tl.program_id(1)
        b, h = (lane_head // HKV).to(tl.int64), lane_head % HKV
        written = tl.load(slot_ptr)  # the own slots 0 … written hold keys
        g, d, n = tl.arange(0, GP), tl.arange(0, DH), tl.arange(0, BLOCK_N)
        gm = g < G
        q = tl.load(q_ptr + b * s_qb + (h * G + g)[:, None] * s_qh + d[None, :], mask=gm[:, None], other=0.0)
        if IEEE:
            q = q.to(tl.float32)
        m_i = tl.full([GP], float("-inf"), tl.float32)
        l_i = tl.zeros([GP], tl.float32)
        acc = tl.zeros([GP, DH], tl.float32)
        qrow = tl.load(lane_qrow_ptr + b)  # −1: a spare lane, in no slot (it samples pad)
        if (split == 0) & (qrow >= 0):
            for j in range(n_prompt_split):
                at = (qrow * HKV * G + h * G + g) * n_prompt_split + j
                m_p = tl.load(mp_ptr + at, mask=gm, other=float("-inf"))
                m_new = tl.maximum(m_i, m_p)
                m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
                alpha, beta = tl.exp(m_i - m_safe), tl.exp(m_p - m_safe)
                l_i = l_i * alpha + tl.load(lp_ptr + at, mask=gm, other=0.0) * beta
                acc = acc * alpha[:, None] + tl.load(op_ptr + at[:, None] * DH + d[None, :], mask=gm[:, None],
                                                     other=0.0) * beta[:, None]
                m_i = m_new
        lo = split * per_split
        for blk in range(lo, tl.minimum(lo + per_split, (written + BLOCK_N) // BLOCK_N)):
            t = blk * BLOCK_N + n
            off = b * s_cb + h * s_ch + t[:, None] * s_ct + d[None, :]
            m_i, l_i, acc = _block(q, kc_ptr + off, vc_ptr + off, t <= written, m_i, l_i, acc, IEEE)
        head = b * HKV * G + h * G + g  # query head b·H + h·G + g
        if FINAL:
            tl.store(o_ptr + head[:, None] * DH + d[None, :], (acc / l_i[:, None]).to(o_ptr.dtype.element_ty),
                     mask=gm[:, None])
        else:
            row = head * n_split + split
            tl.store(m_ptr + row, m_i, mask=gm)
            tl.store(l_ptr + row, l_i, mask=gm)
            tl.store(o_ptr + row[:, None] * DH + d[None, :], acc, mask=gm[:, None])

    @triton.jit
    def _merge_kernel(m_ptr, l_ptr, o_ptr, out_ptr, n_split, SP: tl.constexpr, DH: tl.constexpr):
        qh = tl.program_id(0)  # query head of a lane, b·H + head
        j, d = tl.arange(0, SP), tl.arange(0, DH)
        on = j < n_split
        m = tl.load(m_ptr + qh * n_split + j, mask=on, other=float("-inf"))
        l = tl.load(l_ptr + qh * n_split + j, mask=on, other=0.0)
        top = tl.max(m, 0)  # finite: the lane's own key at this step is always there
        w = tl.where(on, tl.exp(m - top), 0.0)
        o = tl.load(o_ptr + (qh * n_split + j)[:, None] * DH + d[None, :], mask=on[:, None], other=0.0)
        out = tl.sum(o * w[:, None], 0) / tl.sum(l * w, 0)
        tl.store(out_ptr + qh * DH + d, out.to(out_ptr.dtype.element_ty))


    @triton.jit
    def _silu_mul_kernel(g_ptr, u_ptr, out_ptr, n, BLOCK_E: tl.constexpr):
        i = tl.program_id(0).to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
        ok = i < n
        g = tl.load(g_ptr + i, mask=ok, other=0.0).to(tl.float32)
        u = tl.load(u_ptr + i, mask=ok, other=0.0)
        # as eager: silu in fp32, rounded to the model's dtype, then the product, rounded
        a = (g / (1.0 + tl.exp(-g))).to(u.dtype)
        tl.store(out_ptr + i, (a.to(tl.float32) * u.to(tl.float32)).to(u.dtype), mask=ok)


def fuses_silu(act_fn, x: torch.Tensor) -> bool:
    """Whether `silu_mul` serves a gated MLP with this activation on x's device."""
    return triton is not None and x.is_cuda and isinstance(act_fn, (torch.nn.SiLU, SiLUActivation))


def silu_mul(g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """silu(g) · u, the gated MLP's product, in one pass over g and u (eager: two kernels, the
    activation written out and read again)."""
    if g.shape != u.shape or g.dtype != u.dtype or not (g.is_contiguous() and u.is_contiguous()):
        raise ValueError(f"flashdecode: silu_mul needs g, u contiguous, of one shape and dtype; got "
                         f"{tuple(g.shape)} {g.dtype}, {tuple(u.shape)} {u.dtype}")
    out = torch.empty_like(g)
    _silu_mul_kernel[(triton.cdiv(g.numel(), 1024),)](g, u, out, g.numel(), BLOCK_E=1024, num_warps=4)
    return out


def _splits(n_blocks: int, programs: int, budget: int) -> tuple[int, int]:
    """(blocks per split, splits): n_blocks split over programs while `programs` of them (one per
    split) stay under `budget`, and no split is empty."""
    per = triton.cdiv(n_blocks, max(1, min(n_blocks, triton.cdiv(budget, programs))))
    return per, triton.cdiv(n_blocks, per)


def _partials(rows: int, Dh: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A split's partial results for `rows` query heads: running max, sum and unnormalised output, fp32."""
    m = torch.empty(rows, dtype=torch.float32, device=device)
    return m, torch.empty_like(m), torch.empty(rows, Dh, dtype=torch.float32, device=device)


def attend(q: torch.Tensor, kp: torch.Tensor, vp: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor,
           prompt_ok: torch.Tensor, slot_lane: torch.Tensor, lane_qrow: torch.Tensor, written: torch.Tensor,
           span: int) -> torch.Tensor:
    """q [B, H, Dh] (scaled) -> o [B, H, Dh]: each lane attends its prompt slot's keys kp, vp
    [U, Hkv, Tp, Dh] where its prompt_ok [Tp], and its own completion keys kc, vc [B, Hkv, Tc, Dh]
    at slots 0 … written (a one-element tensor, read on the device: capturable). The layout
    (`decode.Engine.place`): slot u's R query rows are lanes slot_lane [U, R] (−1: no lane), and
    lane b is query row lane_qrow[b] = u·R + r of them (−1: in no slot). A slot's lanes share its
    prompt, whose padding is read from prompt_ok of the lane in its row 0, so a slot with lanes has
    one there (`place` checks it). span bounds how many own slots a split may need, so the host
    sizes the splits."""
    B, H, Dh = q.shape
    U, Hkv, Tp = kp.shape[0], kp.shape[1], kp.shape[2]
    R, G = slot_lane.shape[1], H // Hkv
    if not q.is_contiguous():
        raise ValueError(f"flashdecode: attend needs q contiguous (strides {q.stride()})")
    if kp.stride() != vp.stride() or kc.stride() != vc.stride() or kp.stride(-1) != 1 or kc.stride(-1) != 1:
        raise ValueError("flashdecode: attend needs each K, V cache pair in one layout with contiguous heads "
                         f"(prompt {kp.stride()}, {vp.stride()}; own {kc.stride()}, {vc.stride()})")
    if slot_lane.shape[0] != U or not slot_lane.is_contiguous() or lane_qrow.shape != (B,) \
            or slot_lane.dtype != torch.long or lane_qrow.dtype != torch.long:
        raise ValueError(f"flashdecode: attend needs slot_lane [{U}, R] contiguous and lane_qrow [{B}], int64; got "
                         f"{tuple(slot_lane.shape)} {slot_lane.dtype}, {tuple(lane_qrow.shape)} {lane_qrow.dtype}")
    ieee = q.dtype == torch.float32
    # the prompt: a program per slot, tile of its query rows and KV head, split over the keys while few
    rows = min(ROWS, max(16, triton.next_power_of_2(R * G)))
    tiles, n_prompt = triton.cdiv(R * G, rows), Tp // BLOCK
    per_p, n_split_p = _splits(n_prompt, U * tiles * Hkv, PROMPT_PROGRAMS)
    mp, lp, op = _partials(U * R * H * n_split_p, Dh, q.device)
    _prompt_kernel[(U * tiles, Hkv, n_split_p)](
        q, kp, vp, prompt_ok, slot_lane, mp, lp, op,
        q.stride(0), q.stride(1), kp.stride(0), kp.stride(1), kp.stride(2), prompt_ok.stride(0),
        R, tiles, n_prompt, per_p, n_split_p,
        HKV=Hkv, G=G, ROWS=rows, DH=Dh, BLOCK_N=BLOCK, IEEE=ieee, num_warps=PROMPT_WARPS)
    # each lane's own keys, split over them while lanes are few; one split writes o itself
    per_c, n_split = _splits(triton.cdiv(span, BLOCK), B * Hkv, PROGRAMS)
    out = torch.empty_like(q)
    final = n_split == 1
    m, l, o = (out, out, out) if final else _partials(B * H * n_split, Dh, q.device)
    _own_kernel[(B * Hkv, n_split)](
        q, kc, vc, written, lane_qrow, mp, lp, op, m, l, o,
        q.stride(0), q.stride(1), kc.stride(0), kc.stride(1), kc.stride(2), n_split_p, per_c, n_split,
        HKV=Hkv, G=G, GP=16, DH=Dh, BLOCK_N=BLOCK, IEEE=ieee, FINAL=final, num_warps=4)
    if not final:
        _merge_kernel[(B * H,)](m, l, o, out, n_split, SP=max(16, triton.next_power_of_2(n_split)), DH=Dh,
                                num_warps=4)
    return out


def rotate_into_cache(y: torch.Tensor, qk_w: torch.Tensor | None, eps: float, cos: torch.Tensor, sin: torch.Tensor,
                      scaling: float, kc: torch.Tensor, vc: torch.Tensor, written: torch.Tensor, heads: int) -> torch.Tensor:
    """One token per lane: its projections y [B, 1, (H + 2·Hkv)·Dh] (q, k, v heads in turn) ->
    q [B, H, Dh], normed (qk_w [H + Hkv, Dh], `decode.qk_norm_weights`; None: no norm), rotated
    by cos, sin [B, 1, 1, Dh] (`decode._rotation`'s, sin's signs folded) and scaled; k normed and
    rotated, and v, written at completion slot `written` of kc, vc [B, Hkv, Tc, Dh]."""
    B, Hkv, Dh = y.shape[0], kc.shape[1], kc.shape[-1]
    if any(t.stride(-1) != 1 for t in (y, cos, sin, kc)) or vc.stride() != kc.stride():
        raise ValueError("flashdecode: rotate_into_cache needs contiguous heads and K, V caches of one layout")
    if cos.shape[-1] != Dh or sin.shape[-1] != Dh or y.shape[-1] != (heads + 2 * Hkv) * Dh:
        raise ValueError(f"flashdecode: rotate_into_cache got rotary tables of {cos.shape[-1]} and projections "
                         f"of {y.shape[-1]} for {heads} + 2·{Hkv} heads of {Dh}")
    q = torch.empty(B, heads, Dh, dtype=y.dtype, device=y.device)
    _rotate_kernel[(B, heads + Hkv)](
        y, qk_w if qk_w is not None else y, cos, sin, q, kc, vc, written,
        y.stride(0), cos.stride(0), sin.stride(0), kc.stride(0), kc.stride(1), kc.stride(2), eps, scaling,
        H=heads, HKV=Hkv, DH=Dh, NORM=qk_w is not None, num_warps=1)
    return q
