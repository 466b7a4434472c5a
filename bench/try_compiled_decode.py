"""An experiment, not a path the engine takes: how much of a captured decode step is element-wise
overhead that a compiler could fuse. Times the engine's captured step at one shape, then the same
step through torch.compile (Inductor fuses the norms, rotation, score concatenation and softmax,
residual adds and the activation; the matrix products stay cuBLAS's), captured the same way.
The compiled step runs eagerly a few times before its capture (compilation cannot run inside a
capture), which advances the engine's state: the timings are of the step's work, its tokens are
not looked at.

    python bench/try_compiled_decode.py --batch 6 --group 1
    python bench/try_compiled_decode.py --batch 256 --group 16
"""
from __future__ import annotations

import json
import time

import torch
from torch.profiler import ProfilerActivity, profile

from profile_decode import adapted_model, experiment_args, make_engine, timed  # noqa: E402 (this folder is on the path: the script's own)


def kernels(fn) -> int:
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(e.count for e in prof.key_averages() if e.device_type.name == "CUDA")


def main() -> None:
    args = experiment_args(batch=6, group=1, new_tokens=512)
    model, lora, prompts = adapted_model(args)
    eng = make_engine(model, lora, prompts, args.group, args.new_tokens)
    span = args.span
    out = {"shape": [args.batch, args.group], "span": span}
    out["eager_kernels"] = kernels(lambda: eng.decode_step(span))
    out["graph_ms"] = timed(lambda: eng.replay(span))
    step = torch.compile(eng.decode_step, dynamic=False)
    t0 = time.perf_counter()
    for _ in range(3):
        step(span)
    torch.cuda.synchronize()
    out["compile_s"] = time.perf_counter() - t0
    out["compiled_kernels"] = kernels(lambda: step(span))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=eng.pool):
        step(span)
    out["compiled_graph_ms"] = timed(g.replay)
    print(json.dumps(out))


if __name__ == "__main__":
    with torch.no_grad():
        main()
