"""Dr.GRPO: group-mean advantages (no std division) and the clipped surrogate summed over
tokens and divided by a constant (no per-sequence length normalisation). The log-probs it reads
come from vgrout.logprob."""
from __future__ import annotations

import torch


def advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """A = r − mean(group). Rewards are laid out group after group: [P*G]."""
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    r = rewards.view(-1, group_size)
    return (r - r.mean(1, keepdim=True)).view(-1)


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
