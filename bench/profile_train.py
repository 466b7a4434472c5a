"""Where the train forward+backward's time goes: torch.profiler over one micro-batch of
logprob.token_logprobs (checkpointed layers, chunked log-probs, fused lora2r deltas) + backward.

    python bench/profile_train.py --rows 8 --prompt-len 300 --new-tokens 256 --r 16
"""
from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

from vgrout import adapter as ad
from vgrout import logprob, rollout
from vgrout.bench import PAD, build_model, random_prompts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=300)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--r", type=int, default=16)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    model, _ = build_model("qwen3-4b-random", "cuda")
    lora = ad.attach(model, r=args.r)
    v = model.config.vocab_size
    prompts = random_prompts(args.rows, args.prompt_len, v)
    comps = random_prompts(args.rows, args.new_tokens, v, seed=1)
    seqs = rollout.pack(prompts, comps, PAD).to("cuda")
    zones = [("keep", "absorb", "route")[i % 3] for i in range(args.rows)]

    def step(fused, grad=True):
        with torch.set_grad_enabled(grad), lora.masked(zones):
            logp, _ = logprob.token_logprobs(model, seqs, fused_adapter=fused)
        if grad:
            logp.sum().backward()

    for fused in (False, True):
        for grad in (False, True):
            step(fused, grad)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(3):
                step(fused, grad)
            torch.cuda.synchronize()
            print(f"fused_adapter={fused} grad={grad}: {(time.perf_counter() - t0) / 3:.3f} s per micro-batch")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(True)
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.top, max_name_column_width=60))


if __name__ == "__main__":
    main()
