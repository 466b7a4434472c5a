"""Would flash's kernel speed up the decode step's attention? A micro-benchmark of one token's
attention per row, over its prompt slot's K/V and its own completion K/V, on a GPU:

- batched: the engine's own (vgrout.decode._decode_layer): head-major caches [U, Hkv, Tp, Dh] and
  [B, Hkv, Tc, Dh], the R rows of a slot as R·G query rows of one matmul, one softmax over the
  prompt's and the row's own scores (masked), two matmuls for the output;
- flash: token-major caches [U·Tp, Hkv, Dh] and [B·Tc, Hkv, Dh], two calls of
  `torch.ops.aten._flash_attention_forward` (the slot's rows against its real prompt tokens; each
  row against its first slot+1 completion tokens, `seqused_k`), merged by their log-sum-exp;
- flash_gqa: the engine's head-major caches as they are, each (slot or row, KV head) a sequence of
  one head whose queries are the G heads (and the R rows) that share it, so flash reads each K/V
  once, as the batched matmuls do; the same two calls and merge.

Each variant runs `--layers` times (over 4 distinct layers' caches) in one captured CUDA graph,
as the engine's step does; prints ms per step and the largest difference between the outputs.

    python bench/try_flash_decode.py [--layers 36] [--heads 32 --kv 8 --head-dim 128]
"""
from __future__ import annotations

import argparse
import json

import torch

from profile_decode import graph, timed  # noqa: E402 (this folder is on the path: the script's own)
from vgrout import decode

DISTINCT = 4  # distinct layers' caches: more than the L2 cache holds, as in the real step


def batched(q, kp, vp, kc, vc, blocked, span, scale):
    """decode._decode_layer's attention: q [B, H, Dh] -> o [B, H, Dh]."""
    return decode._decode_attention(q * scale, kp, vp, kc, vc, blocked, span)


def flash(q, kp_t, vp_t, kc_t, vc_t, meta, scale):
    """The same attention from token-major caches: two flash calls and a log-sum-exp merge."""
    fa = torch.ops.aten._flash_attention_forward
    op, lp = fa(q, kp_t, vp_t, meta["cu_q_p"], meta["cu_k_p"], meta["R"], meta["Tp"], 0.0, False, False,
                scale=scale, seqused_k=meta["used_p"])[:2]
    oc, lc = fa(q, kc_t, vc_t, meta["cu_q_c"], meta["cu_k_c"], 1, meta["span"], 0.0, False, False,
                scale=scale, seqused_k=meta["used_c"])[:2]
    a = torch.sigmoid(lp - lc).t()[:, :, None].to(q.dtype)  # lse [H, B]: the prompt part's share
    return oc + (op - oc) * a


def flash_gqa(q, kp, vp, kc, vc, meta, scale):
    """Flash over the head-major caches, one head per sequence: q [B, H, Dh] -> o [B, H, Dh]."""
    fa = torch.ops.aten._flash_attention_forward
    B, H, Dh = q.shape
    U, Hkv, Tp, Tc = kp.shape[0], kp.shape[1], kp.shape[2], kc.shape[2]
    R, G = B // U, H // Hkv
    qp = q.view(U, R, Hkv, G, Dh).transpose(1, 2).reshape(-1, 1, Dh)  # (slot, KV head) sequences of R·G queries
    op, lp = fa(qp, kp.reshape(-1, 1, Dh), vp.reshape(-1, 1, Dh), meta["g_cu_q_p"], meta["g_cu_k_p"], R * G, Tp,
                0.0, False, False, scale=scale, seqused_k=meta["g_used_p"])[:2]
    op = op.view(U, Hkv, R, G, Dh).transpose(1, 2).reshape(B, H, Dh)
    lp = lp.view(U, Hkv, R, G).transpose(1, 2).reshape(B, H)
    oc, lc = fa(q.reshape(-1, 1, Dh), kc.reshape(-1, 1, Dh), vc.reshape(-1, 1, Dh), meta["g_cu_q_c"],
                meta["g_cu_k_c"], G, meta["span"], 0.0, False, False, scale=scale, seqused_k=meta["g_used_c"])[:2]
    a = torch.sigmoid(lp - lc.view(B, H))[:, :, None].to(q.dtype)
    return oc.view(B, H, Dh) + (op - oc.view(B, H, Dh)) * a


def case(B, U, Tp, Tc, span, pad, layers, H, Hkv, Dh, dev, dt) -> dict:
    g = torch.Generator(device=dev).manual_seed(0)
    slot = span - 1  # the step writes completion slot `slot`: every row attends span tokens of its own
    scale = Dh ** -0.5
    n = min(DISTINCT, layers)
    q = torch.randn(B, H, Dh, generator=g, device=dev, dtype=dt)
    kp = [torch.randn(U, Hkv, Tp, Dh, generator=g, device=dev, dtype=dt) for _ in range(n)]
    vp = [torch.randn_like(k) for k in kp]
    kc = [torch.randn(B, Hkv, Tc, Dh, generator=g, device=dev, dtype=dt) for _ in range(n)]
    vc = [torch.randn_like(k) for k in kc]
    real = torch.arange(Tp, device=dev)[None] >= pad[:, None]               # [U, Tp]: left-padded prompts
    ok = torch.cat([real.repeat_interleave(B // U, 0), (torch.arange(span, device=dev) <= slot)[None].expand(B, -1)], 1)
    blocked = ~ok[:, None, None, :]
    # token-major copies (what a flash engine would keep instead)
    kp_t = [k.permute(0, 2, 1, 3).reshape(U * Tp, Hkv, Dh).contiguous() for k in kp]
    vp_t = [v.permute(0, 2, 1, 3).reshape(U * Tp, Hkv, Dh).contiguous() for v in vp]
    kc_t = [k.permute(0, 2, 1, 3).reshape(B * Tc, Hkv, Dh).contiguous() for k in kc]
    vc_t = [v.permute(0, 2, 1, 3).reshape(B * Tc, Hkv, Dh).contiguous() for v in vc]
    i32 = dict(device=dev, dtype=torch.int32)
    starts = torch.arange(U, **i32) * Tp + pad.to(torch.int32)
    meta = {"cu_q_p": torch.arange(U + 1, **i32) * (B // U), "cu_k_p": torch.cat([starts, starts.new_tensor([U * Tp])]),
            "used_p": (Tp - pad).to(torch.int32), "R": B // U, "Tp": Tp,
            "cu_q_c": torch.arange(B + 1, **i32), "cu_k_c": torch.arange(B + 1, **i32) * Tc,
            "used_c": torch.full((B,), slot + 1, **i32), "span": span}
    G, R = H // Hkv, B // U
    g_starts = (torch.arange(U * Hkv, **i32) * Tp + pad.to(torch.int32).repeat_interleave(Hkv))
    meta.update({"g_cu_q_p": torch.arange(U * Hkv + 1, **i32) * (R * G),
                 "g_cu_k_p": torch.cat([g_starts, g_starts.new_tensor([U * Hkv * Tp])]),
                 "g_used_p": (Tp - pad.to(torch.int32)).repeat_interleave(Hkv),
                 "g_cu_q_c": torch.arange(B * Hkv + 1, **i32) * G, "g_cu_k_c": torch.arange(B * Hkv + 1, **i32) * Tc,
                 "g_used_c": torch.full((B * Hkv,), slot + 1, **i32)})
    ref = batched(q, kp[0], vp[0], kc[0], vc[0], blocked, span, scale)
    got = flash(q, kp_t[0], vp_t[0], kc_t[0], vc_t[0], meta, scale)
    got_gqa = flash_gqa(q, kp[0], vp[0], kc[0], vc[0], meta, scale)
    exact = batched(q.float(), kp[0].float(), vp[0].float(), kc[0].float(), vc[0].float(), blocked, span, scale)
    out = {"B": B, "U": U, "Tp": Tp, "span": span, "layers": layers,
           "diff_flash_vs_fp32": float((got.float() - exact).abs().max()),
           "diff_batched_vs_fp32": float((ref.float() - exact).abs().max()),
           "diff_flash_gqa_vs_fp32": float((got_gqa.float() - exact).abs().max())}

    g_b = graph(lambda: [batched(q, kp[i % n], vp[i % n], kc[i % n], vc[i % n], blocked, span, scale)
                         for i in range(layers)])
    out["batched_ms"] = timed(g_b.replay)
    del g_b
    g_f = graph(lambda: [flash(q, kp_t[i % n], vp_t[i % n], kc_t[i % n], vc_t[i % n], meta, scale)
                         for i in range(layers)])
    out["flash_ms"] = timed(g_f.replay)
    del g_f
    g_g = graph(lambda: [flash_gqa(q, kp[i % n], vp[i % n], kc[i % n], vc[i % n], meta, scale)
                         for i in range(layers)])
    out["flash_gqa_ms"] = timed(g_g.replay)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=36)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--comp-len", type=int, default=1536)
    args = ap.parse_args()
    dev, dt = torch.device("cuda"), torch.bfloat16
    print(torch.cuda.get_device_name(), torch.__version__)
    shapes = [(256, 16, 256), (256, 16, 768), (256, 16, 1536), (96, 16, 768), (48, 16, 1024), (8, 8, 1280),
              (6, 6, 1536)]
    for B, U, span in shapes:
        g = torch.Generator().manual_seed(B)
        pad = torch.randint(0, args.prompt_len // 2, (U,), generator=g).to(dev)
        res = case(B, U, args.prompt_len, args.comp_len, span, pad, args.layers, args.heads, args.kv,
                   args.head_dim, dev, dt)
        print(json.dumps(res))
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
