"""Eager against compiled log-prob chains inside `paper_natural`'s steps, on the same rollouts: each
call of train.frozen_acts and train.sample_forward (no grad, so repeatable) runs four times,
vgrout.engine.compiled.COMPILE = never, cuda, never, cuda, and prints the seconds of each; each no-grad
log-prob forward prints its rows, completion tokens and seconds.

    python -m bench.chains_in_step            # three steps of paper_natural (the first compiles)
"""
from __future__ import annotations

import dataclasses
import time

import torch

from bench import harness as bench
from vgrout.engine import compiled, fastgen
from vgrout.train import loop as train


def eager_then_compiled(name, fn):
    def run(*args, **kw):
        seconds = {}
        for mode in ("never", "cuda", "never", "cuda"):
            compiled.COMPILE = mode
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = fn(*args, **kw)
            torch.cuda.synchronize()
            seconds.setdefault(mode, []).append(round(time.perf_counter() - t0, 3))
        compiled.COMPILE = "cuda"
        print(name, seconds, flush=True)
        return out
    return run


def timed_logprobs(logprobs):
    def run(model, seqs, **kw):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = logprobs(model, seqs, **kw)
        torch.cuda.synchronize()
        if not torch.is_grad_enabled():
            print(f"  token_logprobs {compiled.COMPILE} rows {seqs.input_ids.shape[0]} tokens "
                  f"{int(seqs.completion_mask.sum())} trunk {kw.get('trunk') is not None}: "
                  f"{time.perf_counter() - t0:.3f}", flush=True)
        return out
    return run


def main() -> None:
    train.sample_forward = eager_then_compiled("sample_forward", train.sample_forward)
    train.frozen_acts = eager_then_compiled("frozen_acts", train.frozen_acts)
    fastgen.FAST = dataclasses.replace(fastgen.FAST, token_logprobs=timed_logprobs(fastgen.FAST.token_logprobs))
    bench.main(["paper_natural", "/tmp/chains_in_step.json", "steps=3"])


if __name__ == "__main__":
    main()
