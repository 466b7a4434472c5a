"""The train phase alone, timed several times over the same rollouts: `train.train_forward_backward`
at a `bench.harness` preset's shape (random completion tokens, at full length or at the preset's
natural lengths; its masks and micro-batches), after the frozen scorer's pass and logπ_sample as `bench.harness.grpo_step` runs them.
No optimizer step, so every repeat does the same work; the first compiles the chains.

    python -m bench.train_phase --preset issue --repeats 6
    python -m bench.train_phase --empty-cache    # each repeat twice: as it is, and after torch.cuda.empty_cache()
    python -m bench.train_phase --preset paper --repeats 2 --layouts 16:10,8:20,4:36   # micro-batch:keep_layers, each timed in turn with its peak memory

--empty-cache asks what a step's train phase pays for growing its memory again: a step frees the
decode engine and empties the allocator's cache (`decode.release`) before its train forward.
"""
from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import torch

from bench.harness import PAD, PRESETS, STEP_PRESETS, build_model, natural_lengths, random_prompts, step_config
from vgrout.engine import adapter as ad
from vgrout.engine import rollout
from vgrout.train import grpo
from vgrout.train import loop as train


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="issue", choices=STEP_PRESETS)
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--empty-cache", action="store_true",
                    help="alternate repeats after torch.cuda.empty_cache() with repeats without it")
    ap.add_argument("--layouts", default=None,
                    help="comma-separated MICRO_BATCH:KEEP_LAYERS, each timed in turn (default: the preset's)")
    args = ap.parse_args()
    if args.repeats < 2:
        raise SystemExit("train_phase: --repeats must be at least 2 (the first compiles the chains)")
    p = PRESETS[args.preset]
    model, _ = build_model("qwen3-4b-random", "cuda")
    lora = ad.attach(model, r=p["r"])
    n, v = p["batch"], model.config.vocab_size
    prompts = random_prompts(n // p["group"], p["prompt_len"], v, group=p["group"])
    g = torch.Generator().manual_seed(1)
    lengths = natural_lengths(n, p["length_mean"], p["new_tokens"], p.get("length_sigma", 0.7), seed=0) \
        if p.get("length_mean") else [p["new_tokens"]] * n
    comps = torch.randint(PAD + 2, v, (n, p["new_tokens"]), generator=g).tolist()
    seqs = rollout.pack(prompts, [c[:k] for c, k in zip(comps, lengths)], PAD)
    layouts = [tuple(int(x) for x in item.split(":")) for item in args.layouts.split(",")] if args.layouts \
        else [(p["micro_batch"], p.get("keep_layers", 0))]
    adv = grpo.advantages(torch.randn(n, generator=g), p["group"])
    zones = [ad.ZONES[i % 3] for i in torch.randperm(n, generator=g).tolist()]
    rollouts = [SimpleNamespace(deploy=False, source="student")] * n
    for micro_batch, keep_layers in layouts:
        cfg = step_config(p["new_tokens"], micro_batch, keep_layers, p.get("old_micro_batch"))
        # the scorer's trunks are per micro-batch (train.keeps_trunks): made again at each layout
        _, trunks = train.frozen_acts(cfg, lora, seqs)
        logps_sample = train.sample_forward(cfg, lora, seqs, rollouts, zones, trunks)
        torch.cuda.empty_cache()  # each layout's reserved peak its own, not the previous layout's
        torch.cuda.reset_peak_memory_stats()
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeats):
            for emptied in ((False, True) if args.empty_cache else (False,)):
                for q in lora.parameters():
                    q.grad = None
                if emptied:
                    torch.cuda.empty_cache()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                train.train_forward_backward(cfg, lora, seqs, logps_sample, trunks, adv, zones, rollouts, n)
                torch.cuda.synchronize()
                times[emptied].append(time.perf_counter() - t0)
        for emptied, ts in times.items():
            if ts:
                later = sorted(ts[1:])
                print({"preset": args.preset, "micro_batch": micro_batch, "keep_layers": keep_layers,
                       "after_empty_cache": emptied, "train_fwd_bwd_s": [round(t, 3) for t in ts],
                       "median_after_first_s": round(later[len(later) // 2], 3),
                       "peak_allocated_GB": round(torch.cuda.max_memory_allocated() / 1e9, 2),
                       "peak_reserved_GB": round(torch.cuda.max_memory_reserved() / 1e9, 2)}, flush=True)

if __name__ == "__main__":
    main()
