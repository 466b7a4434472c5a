"""Where a GRPO step makes the host wait for the GPU: torch's sync debug mode over one step of
`bench.harness.grpo_step` (after a first step that compiles the chains), each synchronising call
counted by the line of vgrout code that made it and the step phase it ran in.

    python -m bench.sync_points                     # the issue preset's shape
    python -m bench.sync_points --preset paper_natural

A phase that syncs once per micro-batch makes the host wait for the GPU's queue to drain before
it issues the next micro-batch's kernels, so host time and GPU time add instead of overlapping.
"""
from __future__ import annotations

import argparse
import collections
import traceback
import warnings
from pathlib import Path

import torch

from bench.harness import PRESETS, STEP_PRESETS, build_model, grpo_step, natural_lengths, random_prompts
from vgrout.engine import adapter as ad

PHASES = ("generate_ids", "frozen_acts", "score", "sample_forward", "train_forward_backward", "clip_grad_norms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="issue", choices=STEP_PRESETS)
    args = ap.parse_args()
    p = PRESETS[args.preset]
    model, _ = build_model("qwen3-4b-random", "cuda")
    lora = ad.attach(model, r=p["r"])
    opt = torch.optim.AdamW(lora.parameters(), lr=1e-5)
    prompts = random_prompts(p["batch"] // p["group"], p["prompt_len"], model.config.vocab_size, group=p["group"])
    lengths = natural_lengths(p["batch"], p["length_mean"], p["new_tokens"], p.get("length_sigma", 0.7), seed=0) \
        if p.get("length_mean") else None
    kw = dict(group=p["group"], new_tokens=p["new_tokens"], micro_batch=p["micro_batch"],
              gen_batch=p.get("gen_batch") or p["batch"], device="cuda", keep_layers=p.get("keep_layers", 0),
              old_micro_batch=p.get("old_micro_batch"), lengths=lengths)
    grpo_step(lora, opt, prompts, seed=0, **kw)  # compiles the chains, captures the graphs

    repo = Path(__file__).resolve().parents[1]
    root = (str(repo / "vgrout"), str(repo / "bench" / "harness.py"))  # the step's code: the library and grpo_step
    counts: collections.Counter = collections.Counter()

    def record(message, category, filename, lineno, file=None, line=None):
        if "synchroniz" not in str(message):  # torch's sync warnings only
            return
        stack = [f for f in traceback.extract_stack()[:-1] if not f.filename.endswith("warnings.py")]
        ours = [f for f in stack if f.filename.startswith(root)]
        phase = next((f.name for f in ours if f.name in PHASES), "?")
        site = ours[-1] if ours else stack[-1]
        counts[(phase, f"{Path(site.filename).name}:{site.lineno} {site.name}", (site.line or "").strip()[:90])] += 1

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        t, _ = grpo_step(lora, opt, prompts, seed=1, **kw)
        torch.cuda.set_sync_debug_mode("default")
    print({k: round(v, 3) for k, v in t.items()})
    print(f"{'phase':<24} {'syncs':>6}  site")
    for (phase, site, line), n in sorted(counts.items(), key=lambda kv: (PHASES.index(kv[0][0]) if kv[0][0] in PHASES else 9, -kv[1])):
        print(f"{phase:<24} {n:>6}  {site}  | {line}")


if __name__ == "__main__":
    main()
