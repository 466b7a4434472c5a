"""Where a decode step's time goes: the captured decode step of the fast path timed per variant
(attention kernel, fused RMSNorm), with and without the lora2r adapter, the prompt prefill, and a
torch.profiler table of eager decode steps. Prints the fastest variant last as json.

    python bench/profile_decode.py --batch 256 --prompt-len 512 --new-tokens 256 --r 16
"""
from __future__ import annotations

import argparse
import itertools
import json
import time

import torch
from torch.profiler import ProfilerActivity, profile

from vgrout import adapter as ad
from vgrout import fastgen
from vgrout.bench import EOS, PAD, build_model, random_prompts


def step_ms(eng: fastgen.Engine, span: int, n: int = 30) -> float:
    g = eng.graphs[span]
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        g.replay()
    torch.cuda.synchronize()
    return 1e3 * (time.perf_counter() - t0) / n


def variants(model, lora, prompts, T, span) -> list[dict]:
    rows = []
    for attn, norm in itertools.product(("sdpa", "bmm"), (False, True)):
        fastgen.DECODE_ATTENTION, fastgen.FAST_NORM = attn, norm
        eng = fastgen.Engine(model, lora, len(prompts), T, 1.0, 1.0, EOS, PAD, True)
        eng.run(prompts, 2, [False] * len(prompts))
        rows.append({"attention": attn, "fast_norm": norm, "step_ms": step_ms(eng, span)})
        print(rows[-1], flush=True)
        del eng
        fastgen.release()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--r", type=int, default=16)
    ap.add_argument("--rows", type=int, default=25)
    args = ap.parse_args()
    model, _ = build_model("qwen3-4b-random", "cuda")
    prompts = random_prompts(args.batch, args.prompt_len, model.config.vocab_size)
    T = fastgen.cache_length(args.prompt_len, args.new_tokens)
    span = min(T, fastgen.SPAN * (args.prompt_len // fastgen.SPAN + 2))  # a mid-generation span
    print(f"no adapter, defaults: {variants(model, None, prompts, T, span)[0]}")
    lora = ad.attach(model, r=args.r)
    rows = variants(model, lora, prompts, T, span)
    best = min(rows, key=lambda r: r["step_ms"])
    fastgen.DECODE_ATTENTION, fastgen.FAST_NORM = best["attention"], best["fast_norm"]
    eng = fastgen.Engine(model, lora, args.batch, T, 1.0, 1.0, EOS, PAD, True)
    eng.run(prompts, 2, [False] * args.batch)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    eng.prefill(prompts, torch.ones(args.batch, device="cuda"))
    torch.cuda.synchronize()
    print(f"prefill {args.batch} x {args.prompt_len}: {time.perf_counter() - t0:.2f} s")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            eng.decode_step(span)
        torch.cuda.synchronize()
    print(f"decode, 3 eager steps at span {span}, best variant")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.rows, max_name_column_width=60))
    print(json.dumps({"span": span, "variants": rows, "best": best}))


if __name__ == "__main__":
    main()
