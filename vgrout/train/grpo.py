"""Dr.GRPO: group-mean advantages (no std division) and the clipped surrogate summed over
tokens and divided by a constant (no per-sequence length normalisation), with a truncated
importance weight where a row trains under another mask than it was sampled in, and the dual
clip for A < 0 (`bounded_surrogate`). The log-probs it reads come from vgrout.engine.logprob."""
from __future__ import annotations

from dataclasses import dataclass

import torch

STD_EPS = 1e-4  # GRPO's guard against a group whose baseline rows all earned the same reward


def advantages(rewards: torch.Tensor, group_size: int, baseline_rows: torch.Tensor | None = None,
               scale: str = "dr_grpo", screened: torch.Tensor | None = None) -> torch.Tensor:
    """A = r − b, b the mean reward of the group's baseline rows (all of them by default); scale std:
    divided by the sample standard deviation of those rows' rewards + STD_EPS (GRPO's normalisation,
    which Dr.GRPO drops because it weighs groups by how little their rewards vary), and a group whose
    baseline rows tie gets A = 0 on every row, as GRPO gives a tied group (its rows outside the
    baseline, the teacher rows, would otherwise be divided by STD_EPS). screened: rows left out of
    the baseline and given A = 0 (a screen: the environment's screened scores are dropped, not
    counted as the group's), a group with no baseline row left gets A = 0 on every row.
    Rewards are laid out group after group: [P*G]; baseline_rows and screened bool masks of the same layout."""
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    if scale not in ("dr_grpo", "std"):
        raise ValueError(f"advantage scale '{scale}' unknown; valid: dr_grpo, std")
    r = rewards.view(-1, group_size)
    on = torch.ones_like(r, dtype=torch.bool) if baseline_rows is None else baseline_rows.view(-1, group_size)
    if (on.sum(1) == 0).any():
        raise ValueError("a group has no baseline row")
    if scale == "std" and (on.sum(1) < 2).any():
        raise ValueError("the std-normalised advantage needs two baseline rows a group")
    off = torch.zeros_like(on) if screened is None else screened.view(-1, group_size)
    on = on & ~off
    n = on.sum(1, keepdim=True)
    mean = (r * on).sum(1, keepdim=True) / n.clamp(min=1)
    a = r - mean
    if scale == "std":
        std = (((r - mean) ** 2 * on).sum(1, keepdim=True) / (n - 1).clamp(min=1)).sqrt()
        a = torch.where((n < 2) | (std == 0), torch.zeros_like(a), a / (std + STD_EPS))
    return torch.where(off | (n == 0), torch.zeros_like(a), a).view(-1)


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


# -- bounded importance weights -----------------------------------------------------------------
# A row is sampled in one mode (π_sample: the deploy model for deploy-sampled rows, the full model
# otherwise) and may be trained under another mask (keep trains the deploy model, absorb and
# route the full one). The trust region is then taken around π_old of the training mask (the
# proximal policy) and the change of policy is corrected by a separate importance weight, as in
# decoupled PPO (Hilton et al. 2021), here truncated at c and without gradient (as V-trace):
#     obj_t = w_t · min(ρ_t A, clip(ρ_t, 1−ε, 1+ε) A),   w_t = sg(min(π_old_mask / π_sample, c)),
#     ρ_t = π_θ / π_old_mask,
# and for A < 0 floored at c_dual·A (dual clip, Ye et al. 2020): without it nothing bounds w·ρ·A
# from below when ρ grows.

@dataclass
class TokenStats:
    """Per-token diagnostics of `bounded_surrogate`, detached, zero off the completion."""
    rho: torch.Tensor        # π_θ / π_old under the training mask (the PPO ratio)
    ratio_is: torch.Tensor   # π_old_mask / π_sample before the cap (1 where the modes agree)
    weff: torch.Tensor       # the effective weight: ∂obj/∂logπ = weff · A (0 where no gradient flows, A = 0 included)
    clip_ppo: torch.Tensor   # the PPO clip holds the token's objective constant
    clip_is: torch.Tensor    # the importance weight is capped at c
    clip_dual: torch.Tensor  # A < 0 and the dual clip's floor c_dual·A is the objective


def importance_weight(logp_prox: torch.Tensor, logp_behav: torch.Tensor, cap: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(min(π_prox / π_behav, cap), the ratio before the cap), both without gradient. π_behav
    sampled the tokens, π_prox is π_old under the mask the row trains in."""
    ratio = torch.exp(logp_prox - logp_behav).detach()
    return ratio.clamp(max=cap), ratio


def weight_bound(eps: float, is_cap: float, dual_clip: float) -> float:
    """The largest effective weight w·ρ `bounded_surrogate` can put on any token's gradient:
    where A > 0 the gradient flows only while ρ ≤ 1+ε, so w·ρ ≤ c·(1+ε); where A < 0 the PPO clip
    leaves ρ unbounded above, and the gradient flows only while w·ρ ≤ c_dual (the dual clip). So
    the cap c bounds w, not w·ρ: the bound is c·(1+ε) or c_dual, whichever is larger."""
    return max(is_cap * (1 + eps), dual_clip)


def bounded_surrogate(logp: torch.Tensor, logp_prox: torch.Tensor, logp_behav: torch.Tensor, adv: torch.Tensor,
                      mask: torch.Tensor, eps: float, is_cap: float, dual_clip: float) -> tuple[torch.Tensor, TokenStats]:
    """Per-token w · min(ρA, clip(ρ, 1−ε, 1+ε)A), floored at c_dual·A where A < 0; zero off the
    completion. logp: π_θ under the training mask (with grad); logp_prox: π_old under the same
    mask; logp_behav: the policy that sampled the tokens (logp_prox itself where the row was
    sampled in its training mode, or not sampled by the student at all: w = 1)."""
    if dual_clip <= 1 or is_cap <= 1:
        raise ValueError(f"dual_clip ({dual_clip}) and is_cap ({is_cap}) must exceed 1")
    w, ratio = importance_weight(logp_prox, logp_behav, is_cap)
    ppo, rho = clipped_surrogate(logp, logp_prox, adv, mask, eps)
    a = adv.unsqueeze(1).expand_as(ppo)
    weighted = w * ppo
    floor = dual_clip * a * mask
    on = mask > 0
    clip_ppo = on & (((a > 0) & (rho > 1 + eps)) | ((a < 0) & (rho < 1 - eps)))
    clip_dual = on & (a < 0) & (floor > weighted.detach())
    # the floor replaces the objective only where it lies strictly above: at a tie (w·ρ = c_dual,
    # as when a capped w = c = c_dual meets ρ = 1) a max would halve the token's gradient
    obj = torch.where(clip_dual, floor, weighted)
    # the gradient flows where no clip holds the objective constant: there ∂obj/∂logπ = w·ρ·A
    flows = on & (((a > 0) & (rho <= 1 + eps)) | ((a < 0) & (rho >= 1 - eps) & ~clip_dual))
    weff = torch.where(flows, w * rho, torch.zeros_like(rho))
    stats = TokenStats(rho=rho, ratio_is=ratio * mask, weff=weff, clip_ppo=clip_ppo,
                       clip_is=on & (ratio > is_cap), clip_dual=clip_dual)
    return obj, stats
