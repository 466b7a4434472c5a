"""TRL's GRPOTrainer on the shape bench/harness.py times, for the side-by-side ratio.

Same random model shape and synthetic tokenizer as bench.harness, same prompts x group, prompt
and completion lengths (completions forced to full length with min_new_tokens), a plain PEFT LoRA
of the adapter's total rank on every linear layer, loss_type dr_grpo, scale_rewards none,
beta 0, HF generate (no vLLM), bf16, TRL's defaults otherwise; gradient checkpointing as asked
(TRL's default is on; vgrout's micro-batches of this size keep their activations, so both are timed).
Writes {"step_s": median seconds per optimizer step after the first, ...} as json.

    python -m bench.trl_grpo --batch 64 --group 8 --prompt-len 300 --new-tokens 256 --out trl.json

`run_trl` runs it in its own process and returns that json: `python -m bench.harness ... trl=True` calls it (TRL is
imported only in that process).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch


def run_trl(model: str, batch: int, prompt_len: int, new_tokens: int, group: int, micro_batch: int,
            rank: int, seed: int, checkpointing: bool = True, steps: int = 4) -> dict:
    """This script on that shape in its own process (its memory is its own): its json, or
    {"error": the end of its output}."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "trl.json"
        # as a module from the repository root, so that its `bench.harness` import resolves
        cmd = [sys.executable, "-m", "bench.trl_grpo", "--model", model, "--batch", str(batch),
               "--group", str(group), "--prompt-len", str(prompt_len), "--new-tokens", str(new_tokens),
               "--micro-batch", str(micro_batch), "--rank", str(rank), "--steps", str(steps),
               "--seed", str(seed), "--out", str(out),
               "--gradient-checkpointing" if checkpointing else "--no-gradient-checkpointing"]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
        if done.returncode != 0 or not out.exists():
            return {"error": (done.stderr or done.stdout)[-3000:]}
        return json.loads(out.read_text())


def step_timer():
    """A TrainerCallback recording the wall time of each optimizer step (generation included:
    TRL generates inside the step)."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.times, self._t0 = [], None

        def on_step_begin(self, args, state, control, **kw):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self._t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.times.append(time.perf_counter() - self._t0)

    return StepTimer()


def random_reward(completions, **kwargs):
    return torch.randn(len(completions)).tolist()


def main() -> None:
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    from bench.harness import build_model, random_prompts

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen3-4b-random")
    ap.add_argument("--batch", type=int, default=64, help="rollouts per step (prompts x group)")
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=300)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--rank", type=int, default=32)
    ap.add_argument("--steps", type=int, default=4, help="optimizer steps; the figure is the median of those after the first")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    cuda = torch.cuda.is_available()
    model, tok = build_model(args.model, "cuda" if cuda else "cpu", seed=args.seed)
    n_prompts = args.batch // args.group
    prompts = random_prompts(n_prompts * (args.steps + 1), args.prompt_len, model.config.vocab_size, args.seed)
    ds = Dataset.from_dict({"prompt": [" ".join(f"t{i}" for i in p) for p in prompts]})
    timer = step_timer()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = GRPOConfig(
            output_dir=tmp, max_steps=args.steps, per_device_train_batch_size=args.micro_batch,
            gradient_accumulation_steps=args.batch // args.micro_batch, num_generations=args.group,
            max_completion_length=args.new_tokens, generation_kwargs={"min_new_tokens": args.new_tokens},
            temperature=1.0, top_p=1.0, loss_type="dr_grpo", scale_rewards="none", beta=0.0,
            learning_rate=1e-4, logging_steps=1, report_to="none", save_strategy="no",
            bf16=cuda, use_cpu=not cuda, seed=args.seed, dataloader_num_workers=0,
            gradient_checkpointing=args.gradient_checkpointing)
        lora = LoraConfig(r=args.rank, lora_alpha=args.rank, lora_dropout=0.0,
                          target_modules="all-linear", task_type="CAUSAL_LM")
        trainer = GRPOTrainer(model=model, reward_funcs=random_reward, args=cfg, train_dataset=ds,
                              processing_class=tok, peft_config=lora, callbacks=[timer])
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        trainer.train()
    later = sorted(timer.times[1:]) or timer.times
    res = {"step_s": later[len(later) // 2], "step_times_s": timer.times, "trl": _version("trl"),
           "config": {k: getattr(cfg, k) for k in ("per_device_train_batch_size", "gradient_accumulation_steps",
                                                   "num_generations", "max_completion_length", "loss_type",
                                                   "scale_rewards", "gradient_checkpointing", "bf16")},
           "lora_rank": args.rank}
    if cuda:
        res["peak_allocated_GB"] = torch.cuda.max_memory_allocated() / 1e9
        res["peak_reserved_GB"] = torch.cuda.max_memory_reserved() / 1e9
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)
    print(json.dumps(res, indent=2))


def _version(pkg: str) -> str:
    from importlib.metadata import version
    return version(pkg)


if __name__ == "__main__":
    main()
