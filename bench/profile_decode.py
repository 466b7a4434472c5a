"""Where a decode step's time goes: the captured decode step of the fast path timed per variant
(fused RMSNorm or transformers'), with and without the lora2r adapter, the prompt prefill, and a
torch.profiler table of eager decode steps. Prints the fastest variant last as json.

    python -m bench.profile_decode --batch 256 --group 8 --prompt-len 512 --new-tokens 256 --r 16
"""
from __future__ import annotations

import argparse
import json
import time

import torch
from torch.profiler import ProfilerActivity, profile

from bench.harness import EOS, PAD, build_model, random_prompts
from vgrout.engine import adapter as ad
from vgrout.engine import arch, decode


def timed(fn, n: int = 30) -> float:
    """Milliseconds per call of fn on the GPU, after 3 untimed calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return 1e3 * (time.perf_counter() - t0) / n


def graph(fn) -> torch.cuda.CUDAGraph:
    """fn captured as a CUDA graph, after one eager call on a side stream (the libraries' lazy set-up)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    gr = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gr):
        fn()
    return gr


def step_ms(eng: decode.Engine, span: int, n: int = 30) -> float:
    return timed(lambda: eng.replay(span), n)  # the first untimed call captures the step's graph at this span


def make_engine(model, lora, prompts, group, new_tokens) -> decode.Engine:
    """The engine of one generation at this shape (groups of `group` rows share a prompt slot),
    its graphs captured by a two-token run."""
    decode.release()
    decode.generate_ids(model, prompts, 2, 1.0, batch_size=len(prompts), lora=lora, eos_id=EOS,
                        pad=PAD, ignore_eos=True, cache_new_tokens=new_tokens)
    eng = next(iter(decode._ENGINE.values()))
    assert eng.R == group
    return eng


def experiment_args(batch: int, group: int, new_tokens: int) -> argparse.Namespace:
    """The decode-step experiments' command line (bench/try_*.py): the shape (`batch` rows in
    prompt slots of `group`), the adapter's rank and the attended span, with these defaults."""
    ap = shape_args(batch, group, new_tokens)
    ap.add_argument("--span", type=int, default=256)
    return ap.parse_args()


def shape_args(batch: int, group: int, new_tokens: int) -> argparse.ArgumentParser:
    """A command line with the engine's shape (`batch` rows in prompt slots of `group`, 512-token
    prompts, `new_tokens` new) and the adapter's rank (32), with these defaults."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=batch)
    ap.add_argument("--group", type=int, default=group)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=new_tokens)
    ap.add_argument("--r", type=int, default=32)
    return ap


def adapted_model(args, name: str = "qwen3-4b-random", device: str = "cuda"):
    """(model, its lora2r adapter of rank args.r, the prompts: args.group rows per random prompt)."""
    model, _ = build_model(name, device)
    lora = ad.attach(model, r=args.r)
    prompts = random_prompts(args.batch // args.group, args.prompt_len, model.config.vocab_size, group=args.group)
    return model, lora, prompts


def variants(model, lora, prompts, group, new_tokens, span) -> list[dict]:
    rows = []
    for norm in (False, True):
        arch.FAST_NORM = norm
        eng = make_engine(model, lora, prompts, group, new_tokens)
        rows.append({"fast_norm": norm, "step_ms": step_ms(eng, span)})
        print(rows[-1], flush=True)
        del eng
        decode.release()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--r", type=int, default=16)
    ap.add_argument("--rows", type=int, default=25)
    args = ap.parse_args()
    model, _ = build_model("qwen3-4b-random", "cuda")
    prompts = random_prompts(args.batch // args.group, args.prompt_len, model.config.vocab_size, group=args.group)
    span = min(decode.aligned(args.new_tokens - 1), decode.SPAN * 2)  # a mid-generation span
    print(f"no adapter, defaults: {variants(model, None, prompts, args.group, args.new_tokens, span)[0]}")
    lora = ad.attach(model, r=args.r)
    rows = variants(model, lora, prompts, args.group, args.new_tokens, span)
    best = min(rows, key=lambda r: r["step_ms"])
    arch.FAST_NORM = best["fast_norm"]
    eng = make_engine(model, lora, prompts, args.group, args.new_tokens)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    eng.prefill(prompts, [False] * args.batch)
    torch.cuda.synchronize()
    print(f"prefill {args.batch // args.group} distinct prompts x {args.prompt_len}: {time.perf_counter() - t0:.2f} s")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            eng.decode_step(span)
        torch.cuda.synchronize()
    print(f"decode, 3 eager steps at span {span}, best variant")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.rows, max_name_column_width=60))
    print(json.dumps({"span": span, "variants": rows, "best": best}))


if __name__ == "__main__":
    main()
