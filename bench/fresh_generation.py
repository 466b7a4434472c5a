"""A step's generation as a training run has it: a fresh engine each time (the kept one released,
then `decode.generate_ids` builds its engine, warms up, captures its graphs and decodes), at
paper_natural's shape and lengths, N times in one process. Prints one json line per run: wall
seconds, the host's seconds in the warm-up and captures, decode seconds, the layouts decoded in.
The first run of a process pays the libraries' first-use costs; a training run pays them once.

    python -m bench.fresh_generation [N]
"""
import json
import sys
import time

import torch

from bench import harness as bench
from vgrout.engine import adapter as ad
from vgrout.engine import decode


def natural_generation():
    """paper_natural's model, adapter, prompts and lengths on the GPU, and a function that runs one
    fresh generation of them (the kept engine released first; `timings` as decode's) and returns
    its wall seconds."""
    shape = bench.PRESETS["paper_natural"]
    mdl, _ = bench.build_model(shape.get("model", "qwen3-4b-random"), "cuda", seed=0)
    lora = ad.attach(mdl, r=shape["r"], seed=0)
    batch, group, new = shape["batch"], shape["group"], shape["new_tokens"]
    prompts = bench.random_prompts(batch // group, shape["prompt_len"], mdl.config.vocab_size, 0, group)
    lengths = bench.natural_lengths(batch, shape["length_mean"], new, shape.get("length_sigma", 0.7), 0)

    def run(timings: list | None = None) -> float:
        decode.release()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        decode.generate_ids(mdl, prompts, new, temperature=1.0, batch_size=batch, lora=lora, eos_id=bench.EOS,
                            pad=bench.PAD, ignore_eos=True, timings=timings, lengths=lengths)
        torch.cuda.synchronize()
        return time.perf_counter() - t0
    return run


def main(n: int = 3) -> None:
    run = natural_generation()
    for i in range(n):
        timings = []
        wall = run(timings)
        t = timings[0]
        print(json.dumps({"run": i, "wall_s": round(wall, 3), "capture_s": round(t["capture_s"], 3),
                          "decode_s": round(t["decode_s"], 3), "layouts": len(t["shapes"])}), flush=True)

if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
