"""The decode step's attention as Triton kernels: q and k normed, rotated and k, v written into
the cache in one kernel (`rotate_into_cache`); then each lane's G query heads of one KV head
against its prompt slot's keys and its own completion keys, split over the keys, and the
splits merged by their log-sum-exp (`attend`).

`rotate_into_cache` replaces eight kernels a layer (Qwen3's per-head norm and its weights, the
rotation's multiply, roll and multiply-add, q's scaling, two cache writes): a decode step is
bound by its kernels' count at few lanes.

`decode._decode_attention` runs it as batched matmuls: the prompt's scores per slot, the row's
own scores, their concatenation, a masked fill, a softmax and two products with V, with layout
copies between them, about ten kernels a layer, and the own products read the cache at about
80% of the copy rate. Here one kernel reads each K/V block once for the lane's G heads, keeps
the softmax online in fp32 (as flash attention does), skips the completion slots past the one
written at this step (the span's empty tail), and a second merges the splits. A lane's prompt is
read by each of its slot's lanes, but those are consecutive programs, so the repeated reads
mostly come from L2.

Same function as the matmul path up to rounding: the scores and the softmax's running max and sum
stay fp32 here, where the matmul path rounds the scores and weights to the model's dtype (in bf16
the weights are rounded to bf16 for the product with V, as flash attention does). Only the sampler reads it (see vgrout.decode).
Runs on a GPU with Triton; `usable` says when, and the engine keeps the matmul path elsewhere.
"""
from __future__ import annotations

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the engine's matmul path
    triton = None

BLOCK = 64      # keys per block; the prompt cache length is a multiple of it (decode.CACHE_ALIGN)
PROGRAMS = 1024  # splits over the keys until lanes × KV heads × splits reach this many programs


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
    def _split_kernel(q_ptr, kp_ptr, vp_ptr, kc_ptr, vc_ptr, ok_ptr, lane_slot_ptr, slot_ptr,
                      m_ptr, l_ptr, o_ptr,
                      s_qb, s_qh, s_pu, s_ph, s_pt, s_cb, s_ch, s_ct, s_ok,
                      Tp, per_split, n_split,
                      HKV: tl.constexpr, G: tl.constexpr, GP: tl.constexpr, DH: tl.constexpr,
                      BLOCK_N: tl.constexpr, IEEE: tl.constexpr):
        lane_head = tl.program_id(0)  # lane b, KV head h
        split = tl.program_id(1)
        b, h = (lane_head // HKV).to(tl.int64), lane_head % HKV  # 64-bit offsets: a layer's cache may pass 2^31 elements
        u = tl.load(lane_slot_ptr + b)
        written = tl.load(slot_ptr)  # the own slots 0 … written hold keys
        g, d, n = tl.arange(0, GP), tl.arange(0, DH), tl.arange(0, BLOCK_N)
        q = tl.load(q_ptr + b * s_qb + (h * G + g)[:, None] * s_qh + d[None, :], mask=(g < G)[:, None], other=0.0)
        if IEEE:
            q = q.to(tl.float32)
        m_i = tl.full([GP], float("-inf"), tl.float32)
        l_i = tl.zeros([GP], tl.float32)
        acc = tl.zeros([GP, DH], tl.float32)
        n_prompt = Tp // BLOCK_N
        n_blocks = n_prompt + (written + BLOCK_N) // BLOCK_N
        lo = split * per_split
        hi = tl.minimum(lo + per_split, n_blocks)
        for blk in range(lo, tl.minimum(hi, n_prompt)):  # the prompt slot's keys
            t = blk * BLOCK_N + n
            valid = tl.load(ok_ptr + b * s_ok + t) != 0
            off = u * s_pu + h * s_ph + t[:, None] * s_pt + d[None, :]
            m_i, l_i, acc = _block(q, kp_ptr + off, vp_ptr + off, valid, m_i, l_i, acc, IEEE)
        for blk in range(tl.maximum(lo, n_prompt), hi):  # the lane's own keys, up to this step's
            t = (blk - n_prompt) * BLOCK_N + n
            off = b * s_cb + h * s_ch + t[:, None] * s_ct + d[None, :]
            m_i, l_i, acc = _block(q, kc_ptr + off, vc_ptr + off, t <= written, m_i, l_i, acc, IEEE)
        row = (b * HKV * G + h * G + g) * n_split + split  # query head b·H + h·G + g
        gm = g < G
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


def attend(q: torch.Tensor, kp: torch.Tensor, vp: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor,
           prompt_ok: torch.Tensor, lane_slot: torch.Tensor, written: torch.Tensor, span: int) -> torch.Tensor:
    """q [B, H, Dh] (scaled) -> o [B, H, Dh]: lane b attends its prompt slot lane_slot[b]'s keys
    kp, vp [U, Hkv, Tp, Dh] where prompt_ok[b] [Tp], and its own completion keys kc, vc [B, Hkv,
    Tc, Dh] at slots 0 … written (a one-element tensor, read on the device: capturable); span
    bounds how many own slots a split may need, so the host sizes the splits."""
    B, H, Dh = q.shape
    Hkv, Tp = kp.shape[1], kp.shape[2]
    G = H // Hkv
    if kp.stride() != vp.stride() or kc.stride() != vc.stride() or not q.is_contiguous() or kp.stride(-1) != 1 \
            or kc.stride(-1) != 1:
        raise ValueError("flashdecode: attend needs q contiguous and K, V caches of one layout with contiguous heads")
    n_blocks = Tp // BLOCK + triton.cdiv(span, BLOCK)
    n_split = max(1, min(n_blocks, triton.cdiv(PROGRAMS, B * Hkv)))
    per_split = triton.cdiv(n_blocks, n_split)
    n_split = triton.cdiv(n_blocks, per_split)
    m = torch.empty(B * H * n_split, dtype=torch.float32, device=q.device)
    l = torch.empty_like(m)
    o = torch.empty(B * H * n_split, Dh, dtype=torch.float32, device=q.device)
    ieee = q.dtype == torch.float32
    _split_kernel[(B * Hkv, n_split)](
        q, kp, vp, kc, vc, prompt_ok, lane_slot, written, m, l, o,
        q.stride(0), q.stride(1), kp.stride(0), kp.stride(1), kp.stride(2),
        kc.stride(0), kc.stride(1), kc.stride(2), prompt_ok.stride(0),
        Tp, per_split, n_split,
        HKV=Hkv, G=G, GP=16, DH=Dh, BLOCK_N=BLOCK, IEEE=ieee, num_warps=4)
    out = torch.empty_like(q)
    _merge_kernel[(B * H,)](m, l, o, out, n_split, SP=max(16, triton.next_power_of_2(n_split)), DH=Dh, num_warps=4)
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
