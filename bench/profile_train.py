"""Where the log-prob forwards' time goes: torch.profiler over one micro-batch of
logprob.token_logprobs (two-pass with packed completions when the micro-batch is large, chunked
log-probs, fused lora2r deltas), without grad (logπ_old) and with its backward (the train step).

    python -m bench.profile_train --rows 16 --prompt-len 512 --new-tokens 1536 --r 32 --shared --length-mean 500

--shared: the rows are one group (one prompt), as the paper preset's micro-batch; --length-mean:
completion lengths from bench.harness.natural_lengths (else every row at --new-tokens).
"""
from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

from bench.harness import PAD, build_model, natural_lengths, random_prompts
from vgrout.engine import adapter as ad
from vgrout.engine import compiled, logprob, rollout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=300)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--r", type=int, default=16)
    ap.add_argument("--keep-layers", type=int, default=10)
    ap.add_argument("--shared", action="store_true")
    ap.add_argument("--length-mean", type=float, default=None)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--reps", type=int, default=3, help="timed micro-batches per grad mode, after the first")
    ap.add_argument("--eager", action="store_true", help="the element-wise chains eagerly (vgrout.engine.compiled.COMPILE = 'never')")
    ap.add_argument("--stack", action="store_true", help="also a table of operators by their source lines (grad=True)")
    args = ap.parse_args()
    compiled.COMPILE = "never" if args.eager else compiled.COMPILE
    model, _ = build_model("qwen3-4b-random", "cuda")
    lora = ad.attach(model, r=args.r)
    v = model.config.vocab_size
    prompts = random_prompts(1 if args.shared else args.rows, args.prompt_len, v)
    prompts = prompts * args.rows if args.shared else prompts
    lens = (natural_lengths(args.rows, args.length_mean, args.new_tokens, 0.7, 0) if args.length_mean
            else [args.new_tokens] * args.rows)
    comps = [c[:n] for c, n in zip(random_prompts(args.rows, args.new_tokens, v, seed=1), lens)]
    seqs = rollout.pack(prompts, comps, PAD).to("cuda")
    zones = [("keep", "absorb", "route")[i % 3] for i in range(args.rows)]
    print(f"{args.rows} rows, {sum(lens)} completion tokens (longest {max(lens)}), two-pass: {logprob.shares_prompts(seqs)}")

    def step(grad):
        with torch.set_grad_enabled(grad), lora.masked(zones):
            logp, _ = logprob.token_logprobs(model, seqs, keep_layers=args.keep_layers)
        if grad:
            logp.sum().backward()

    for grad in (False, True):
        t0 = time.perf_counter()
        step(grad)
        torch.cuda.synchronize()
        print(f"grad={grad}: first micro-batch (compiles the chains) {time.perf_counter() - t0:.1f} s")
        each = []
        for _ in range(args.reps):
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            step(grad)
            torch.cuda.synchronize()
            each.append(time.perf_counter() - t1)
        print(f"grad={grad}: {sum(each) / len(each):.3f} s per micro-batch "
              f"(median {sorted(each)[len(each) // 2]:.3f}, min {min(each):.3f}, max {max(each):.3f} of {len(each)})")
        stack = args.stack and grad
        acts = [ProfilerActivity.CUDA, ProfilerActivity.CPU] if stack else [ProfilerActivity.CUDA]
        with profile(activities=acts, with_stack=stack) as prof:
            step(grad)
            torch.cuda.synchronize()
        ev = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
        print(f"grad={grad}: {sum(e.count for e in ev)} kernels and copies, GPU busy {sum(e.self_device_time_total for e in ev) / 1e3:.1f} ms")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.top, max_name_column_width=70))
        if stack:  # which lines of the forward and backward launch the time
            print(prof.key_averages(group_by_stack_n=6).table(sort_by="self_cuda_time_total", row_limit=args.top,
                                                               max_name_column_width=40))


if __name__ == "__main__":
    main()
