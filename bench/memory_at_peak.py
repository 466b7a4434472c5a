"""Where the generation's GPU memory goes at a bench preset's shape: the engine built at the full
cache length (as a step's generation holds it), with AdamW's state made by one optimizer step, and
every live block of the allocator attributed to the line of vgrout (or the bench) that allocated it.

    python -m bench.memory_at_peak paper
"""
from __future__ import annotations

import argparse
import collections

import torch

from bench.harness import EOS, PAD, PRESETS, build_model, random_prompts
from vgrout.engine import adapter as ad
from vgrout.engine import decode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("preset", choices=sorted(PRESETS))
    args = ap.parse_args()
    p = PRESETS[args.preset]
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    mdl, _ = build_model("qwen3-4b-random", torch.device("cuda"), seed=0)
    lora = ad.attach(mdl, r=p["r"], seed=0)
    opt = torch.optim.AdamW(lora.parameters(), lr=1e-4)
    for t in lora.parameters():  # AdamW's state exists from the first step on
        t.grad = torch.zeros_like(t)
    opt.step()
    opt.zero_grad(set_to_none=True)
    prompts = random_prompts(p["batch"] // p["group"], p["prompt_len"], mdl.config.vocab_size, 0, p["group"])
    decode.generate_ids(mdl, prompts, 4, temperature=1.0, batch_size=p["batch"], lora=lora, eos_id=EOS, pad=PAD,
                        ignore_eos=True, cache_new_tokens=p["new_tokens"])
    torch.cuda.synchronize()
    print(f"allocated {torch.cuda.memory_allocated() / 1e9:.3f} GB, reserved {torch.cuda.memory_reserved() / 1e9:.3f} GB, "
          f"peak allocated {torch.cuda.max_memory_allocated() / 1e9:.3f} GB, peak reserved {torch.cuda.max_memory_reserved() / 1e9:.3f} GB")
    snap = torch.cuda.memory._snapshot()
    by_line: dict[str, list] = collections.defaultdict(lambda: [0, 0])
    for seg in snap["segments"]:
        for b in seg["blocks"]:
            if b["state"] != "active_allocated":
                continue
            frames = b.get("frames") or []
            ours = [f for f in frames if "vgrout" in f["filename"] or "bench" in f["filename"]]
            where = " < ".join(f"{f['filename'].split('/')[-1]}:{f['line']} {f['name']}" for f in ours[:3]) or "?"
            by_line[where][0] += b["size"]
            by_line[where][1] += 1
    pools = collections.Counter()
    for seg in snap["segments"]:
        pools[str(seg.get("segment_pool_id"))] += seg["total_size"]
    print("segments by pool (GB):", {k: round(v / 1e9, 3) for k, v in pools.items()})
    for where, (size, n) in sorted(by_line.items(), key=lambda kv: -kv[1][0])[:30]:
        print(f"{size / 1e9:8.3f} GB {n:6d} blocks  {where}")


if __name__ == "__main__":
    main()
