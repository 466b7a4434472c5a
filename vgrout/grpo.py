"""Dr.GRPO: group-mean advantages (no std division) and the clipped surrogate summed over
tokens and divided by a constant (no per-sequence length normalisation)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from vgrout.rollout import Seqs


def advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """A = r − mean(group). Rewards are laid out group after group: [P*G]."""
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    r = rewards.view(-1, group_size)
    return (r - r.mean(1, keepdim=True)).view(-1)


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    # Left padding: positions count real tokens only, matching what generate() used.
    return (attention_mask.cumsum(-1) - 1).clamp(min=0)


def token_logprobs(model, seqs: Seqs) -> tuple[torch.Tensor, torch.Tensor]:
    """log π(token) for the completion tokens: ([B, Lc], mask [B, Lc]).

    Completions sit at the right end of every left-padded row, so only the last Lc+1
    positions need logits: [B, Lc, V] is materialised, never [B, T, V]."""
    Lc = int(seqs.completion_mask.sum(1).max())
    out = model(input_ids=seqs.input_ids, attention_mask=seqs.attention_mask,
                position_ids=position_ids(seqs.attention_mask), logits_to_keep=Lc + 1)
    logits = out.logits[:, :-1].float()
    targets = seqs.input_ids[:, -Lc:]
    logp = torch.gather(F.log_softmax(logits, -1), 2, targets.unsqueeze(-1)).squeeze(-1)
    mask = seqs.completion_mask[:, -Lc:].to(logp.dtype)
    return logp * mask, mask


def clipped_surrogate(logp: torch.Tensor, logp_old: torch.Tensor, adv: torch.Tensor,
                      mask: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token min(ρA, clip(ρ, 1−ε, 1+ε)A) and ρ, both zero off the completion."""
    rho = torch.exp(logp - logp_old) * mask
    a = adv.unsqueeze(1)
    obj = torch.minimum(rho * a, rho.clamp(1 - eps, 1 + eps) * a) * mask
    return obj, rho.detach()


def dr_grpo_loss(obj: torch.Tensor, n_rollouts: int, max_new_tokens: int) -> torch.Tensor:
    """−Σ_tokens obj / (n_rollouts × max_new_tokens): a constant divisor, so long and short
    completions weigh their tokens alike (Dr.GRPO). Per group this is G × max_new_tokens;
    summing groups and dividing by their count gives n_rollouts × max_new_tokens."""
    return -obj.sum() / (n_rollouts * max_new_tokens)
