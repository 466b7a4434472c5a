"""The decode step's attention: the engine's batched matmuls (vgrout.decode._decode_attention)
against vgrout.flashdecode's Triton kernels, on a GPU. Each runs `--layers` times (over 4
distinct layers' caches, more than L2 holds) in one captured CUDA graph, as in the engine's
step; prints ms per step, and each one's largest difference from the same attention in fp32.

    python bench/try_flashdecode.py [--layers 36] [--programs 1024,4096]
"""
from __future__ import annotations

import argparse
import json

import torch

from profile_decode import graph, timed  # noqa: E402 (this folder is on the path: the script's own)
from vgrout import decode, flashdecode

DISTINCT = 4


def case(B, U, Tp, Tc, span, written, layers, H, Hkv, Dh, programs, dev, dt) -> dict:
    g = torch.Generator(device=dev).manual_seed(B + span)
    n = min(DISTINCT, layers)
    q = torch.randn(B, H, Dh, generator=g, device=dev, dtype=dt) * Dh ** -0.5
    kp = [torch.randn(U, Hkv, Tp, Dh, generator=g, device=dev, dtype=dt) for _ in range(n)]
    vp = [torch.randn_like(k) for k in kp]
    kc = [torch.randn(B, Hkv, Tc, Dh, generator=g, device=dev, dtype=dt) for _ in range(n)]
    vc = [torch.randn_like(k) for k in kc]
    pad = torch.randint(0, Tp // 2, (U,), generator=torch.Generator().manual_seed(B)).to(dev)
    prompt_ok = (torch.arange(Tp, device=dev)[None] >= pad[:, None]).repeat_interleave(B // U, 0)
    slot_lane, lane_qrow = torch.arange(B, device=dev).view(U, B // U), torch.arange(B, device=dev)  # the grid
    slot = torch.tensor([written], device=dev)
    own = (torch.arange(span, device=dev) <= slot)[None].expand(B, -1)
    blocked = ~torch.cat([prompt_ok, own], 1)[:, None, None, :]

    def matmul(i):
        return decode._decode_attention(q, kp[i], vp[i], kc[i], vc[i], blocked, span)

    def kernel(i):
        return flashdecode.attend(q, kp[i], vp[i], kc[i], vc[i], prompt_ok, slot_lane, lane_qrow, slot, span)

    exact = decode._decode_attention(q.float(), kp[0].float(), vp[0].float(), kc[0].float(), vc[0].float(),
                                     blocked, span)
    out = {"B": B, "U": U, "Tp": Tp, "span": span, "written": written, "layers": layers,
           "diff_matmul_vs_fp32": float((matmul(0).float() - exact).abs().max()),
           "diff_kernel_vs_fp32": float((kernel(0).float() - exact).abs().max())}
    gr = graph(lambda: [matmul(i % n) for i in range(layers)])
    out["matmul_ms"] = timed(gr.replay)
    del gr
    for p in programs:
        flashdecode.PROGRAMS = p
        gr = graph(lambda: [kernel(i % n) for i in range(layers)])
        out[f"kernel_ms_programs{p}"] = timed(gr.replay)
        del gr
    kv_bytes = layers * 2 * (B * Hkv * (written + 1) * Dh + U * Hkv * Tp * Dh) * q.element_size()
    out["kv_GB_per_step"] = kv_bytes / 1e9
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=36)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--programs", default="1024,4096")
    args = ap.parse_args()
    dev, dt = torch.device("cuda"), torch.bfloat16
    programs = [int(p) for p in args.programs.split(",")]
    print(torch.cuda.get_device_name(), torch.__version__)
    # (lanes, slots, prompt, completion cache, span, written): the paper shape early, mid and late
    # in a forced generation, the issue shape, and a natural generation's tail of few lanes
    shapes = [(256, 16, 512, 1600, 256, 255), (256, 16, 512, 1600, 768, 700), (256, 16, 512, 1600, 1536, 1535),
              (64, 8, 320, 320, 256, 200), (96, 16, 512, 1600, 768, 767), (8, 8, 512, 1600, 1280, 1279),
              (6, 6, 512, 1600, 1536, 1500)]
    for B, U, Tp, Tc, span, written in shapes:
        print(json.dumps(case(B, U, Tp, Tc, span, written, args.layers, args.heads, args.kv, args.head_dim,
                              programs, dev, dt)), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
