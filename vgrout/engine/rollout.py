"""Rollouts: batched sampling from the student and the (prompt, completion) token batches
that every teacher-forced forward (logπ_sample, logπ, v_act pooling) reads.

Sampling is exploration only: no gradient flows through it. Each row is sampled in its own
mode: quarantine on (full model) or ablated (deploy), set per row by `Lora2r.sampling`.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from tqdm import tqdm

from vgrout.engine.adapter import Lora2r


@dataclass
class Seqs:
    """A left-padded batch of prompt+completion sequences."""
    input_ids: torch.Tensor        # [B, T]
    attention_mask: torch.Tensor   # [B, T] 1 on real tokens
    completion_mask: torch.Tensor  # [B, T] 1 on completion tokens

    def to(self, device) -> "Seqs":
        return Seqs(self.input_ids.to(device), self.attention_mask.to(device),
                    self.completion_mask.to(device))

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def rows(self, idx: list[int] | slice) -> "Seqs":
        return Seqs(self.input_ids[idx], self.attention_mask[idx], self.completion_mask[idx])

    def pool_weights(self) -> torch.Tensor:
        """Mean over completion tokens, as weights [B, T] (for pooled bottleneck activations)."""
        cm = self.completion_mask.float()
        return cm / cm.sum(1, keepdim=True).clamp(min=1.0)


def pack(prompt_ids: list[list[int]], completion_ids: list[list[int]], pad_id: int) -> Seqs:
    if len(prompt_ids) != len(completion_ids):
        raise ValueError("prompt and completion lists differ in length")
    T = max(len(p) + len(c) for p, c in zip(prompt_ids, completion_ids))
    B = len(prompt_ids)
    ids = torch.full((B, T), pad_id, dtype=torch.long)
    attn = torch.zeros(B, T, dtype=torch.long)
    comp = torch.zeros(B, T, dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids)):
        n = len(p) + len(c)
        ids[i, T - n:] = torch.tensor(p + c, dtype=torch.long)
        attn[i, T - n:] = 1
        comp[i, T - len(c):] = 1
    return Seqs(ids, attn, comp)


def as_completion(tokenizer, text: str, budget: int) -> list[int]:
    """A whole written response (teacher pool, v_act pairs) as the student would have emitted it:
    its tokens, then EOS (a finished rollout keeps its EOS), cut at the rollout budget (a student
    cannot write past max_new_tokens, and a cut rollout has no EOS)."""
    return (tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])[:budget]


def encode(tokenizer, prompts: list[str], completions: list[str], budget: int) -> Seqs:
    """Chat-formatted prompts and whole responses (`as_completion`), as a rollout batch."""
    p_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    return pack(p_ids, [as_completion(tokenizer, c, budget) for c in completions], pad_id(tokenizer))


def pad_id(tokenizer) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


@torch.no_grad()
def generate(model, tokenizer, prompts: list[str], max_new_tokens: int, temperature: float,
             top_p: float = 1.0, batch_size: int = 64, lora: Lora2r | None = None,
             deploy_rows: list[bool] | None = None, progress: bool = False) -> list[list[int]]:
    """Sample one completion per prompt; returns completion token ids, cut after the first EOS
    (the EOS kept, so the learned stop is trained like any other token). With a lora2r
    student, `deploy_rows` picks per row whether the quarantine is ablated while sampling."""
    device = next(model.parameters()).device
    eos = tokenizer.eos_token_id
    tokenizer.padding_side = "left"  # generation appends on the right
    deploy_rows = deploy_rows if deploy_rows is not None else [False] * len(prompts)
    out: list[list[int]] = []
    starts = range(0, len(prompts), batch_size)
    for start in tqdm(starts, desc="generate", disable=not progress, leave=False):
        chunk = prompts[start:start + batch_size]
        enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        kw = dict(do_sample=temperature > 0, max_new_tokens=max_new_tokens,
                  pad_token_id=pad_id(tokenizer), eos_token_id=eos)
        if temperature > 0:
            kw.update(temperature=temperature, top_p=top_p, top_k=0)
        mode = lora.sampling(deploy_rows[start:start + batch_size]) if lora else contextlib.nullcontext()
        with mode:
            seqs = model.generate(**enc, **kw)
        for row in seqs[:, enc["input_ids"].shape[1]:].tolist():
            if eos in row:  # finished rows are padded after their EOS
                row = row[:row.index(eos) + 1]
            out.append(row)
    return out
