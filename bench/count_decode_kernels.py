"""The kernels one eager decode step launches (the captured graph replays the same ones), counted
by torch.profiler, with the most frequent. The engine at `paper`'s shape by default.

    python -m bench.count_decode_kernels --batch 256 --group 16 --new-tokens 1536
"""
from __future__ import annotations

import json

import torch
from torch.profiler import ProfilerActivity, profile

from profile_decode import adapted_model, experiment_args, make_engine  # noqa: E402 (this folder is on the path: the script's own)


def main() -> None:
    args = experiment_args(256, 16, 1536)
    model, lora, prompts = adapted_model(args)
    eng = make_engine(model, lora, prompts, args.group, args.new_tokens)
    eng.decode_step(args.span)  # any lazy set-up outside the count
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        eng.decode_step(args.span)
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.key_averages() if e.device_type.name == "CUDA"), key=lambda e: -e.count)
    total = sum(e.count for e in kernels)
    print(json.dumps({"lanes": eng.lanes, "span": args.span, "kernels": total,
                      "per_layer": round(total / len(eng.a.layers), 2)}))
    for e in kernels[:15]:
        print(e.count, e.key[:110])


if __name__ == "__main__":
    main()
