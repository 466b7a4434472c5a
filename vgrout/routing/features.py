"""A row's features in the gate's two spaces, each of size r per adapted module (the deployed
bottleneck), read in the frozen scorer's model (the base model, the adapter at its init:
quarantine ablated, as the direction was taken), so a text scores the same at every step:

    act:  h(seq) = mean over completion tokens of A_deployed·x                       (routeA)
    grad: g(seq) = ∂ mean-NLL(completion) / ∂c at c = 1, c a per-row gate
                   multiplying the deployed bottleneck (adapter.ProbeReader)          (routeV)
    nll:  mean-NLL(completion) itself, the value g differentiates                    (the nll control)

g is the gradient of the text's own likelihood: no advantage, no reward. The same functions
read the pairs (routing.extract) and every step's rollouts (train), so directions and scores
share one space.

Oracle-free rule: the only inputs are the texts and the student; nothing here reads rewards,
grader output or rollout labels (tests/routing/test_oracle_free.py).
"""
from __future__ import annotations

import torch
from tqdm import tqdm

from vgrout.engine import fastgen, logprob
from vgrout.engine.adapter import Lora2r
from vgrout.engine.rollout import Seqs
from vgrout.routing.directions import SPACES


@torch.no_grad()
def pooled_activations(lora: Lora2r, seqs: Seqs, batch_size: int = 16, progress: bool = False,
                       frozen: bool = True, fast: bool = False, deploy: list[bool] | None = None,
                       keep_trunks: bool | None = None):
    """Pooled deployed-block bottleneck activations {module: [N, r]}. frozen: in the frozen
    scorer's space (base model, A0_d; the same at every step); else in the current basis
    (current A_d: gate.scorer live), the full model, or with `deploy` each row in its sampling
    mode (True: the quarantine ablated). fast: through the fast engine's forward
    (`logprob.hidden_states`, where the model's layout allows; the pairs and the rollouts are
    pooled by the same forward, so v_act and the scores share one space). keep_trunks True or
    False: return (activations, trunks), the frozen trunk's output of each batch of `batch_size`
    rows (the layers below the first adapter: the same in every mode, so the train forward starts
    above them), or None (not kept, or the model's layout gives none)."""
    device = lora.device
    engine = fastgen.select(lora.model, fast) is fastgen.FAST
    parts: dict[str, list[torch.Tensor]] = {name: [] for name in lora.modules}
    trunks = []
    starts = range(0, len(seqs), batch_size)
    for start in tqdm(starts, desc="pooling h", disable=not progress, leave=False):
        b = seqs.rows(slice(start, start + batch_size)).to(device)
        if frozen:
            space = lora.frozen()
        elif deploy is not None:
            space = lora.sampling(deploy[start:start + batch_size])
        else:
            space = lora.masked(["absorb"] * len(b))
        with space, lora.capture(b.pool_weights()) as pooled:
            if engine:
                _, trunk = logprob.hidden_states(lora.model, b, checkpoint_layers=False, return_trunk=True)
                if keep_trunks:
                    trunks.append(trunk)
            else:
                lora.model(input_ids=b.input_ids, attention_mask=b.attention_mask,
                           position_ids=logprob.position_ids(b.attention_mask), logits_to_keep=1)
        for name in parts:
            parts[name].append(pooled[name].float().cpu())
    acts = {name: torch.cat(p) for name, p in parts.items()}
    if keep_trunks is None:
        return acts
    return acts, trunks if keep_trunks and engine and all(t is not None for t in trunks) else None


def probe_gradients(lora: Lora2r, seqs: Seqs, batch_size: int = 16, progress: bool = False,
                    frozen: bool = True, fast: bool = False) -> dict[str, torch.Tensor]:
    """routeV's features {module: [N, r]}: per row, the gradient of its mean completion-token NLL (the
    text's own likelihood at temperature 1) with respect to its own probe gates c (adapter.ProbeReader,
    at c = 1, so the forward is unchanged). frozen: in the frozen scorer's model (the base model, the
    adapter at its init); else the current deployed model, quarantine ablated (a live refresh). Rows
    never share a forward value (one pass, each row its own prompt), so a row's gradient is its own."""
    device = lora.device
    engine = fastgen.select(lora.model, fast) is fastgen.FAST
    parts: dict[str, list[torch.Tensor]] = {name: [] for name in lora.modules}
    starts = range(0, len(seqs), batch_size)
    for start in tqdm(starts, desc="probe gradients", disable=not progress, leave=False):
        b = seqs.rows(slice(start, start + batch_size)).to(device)
        gates = {m: torch.ones(len(b), lora.r, device=device, requires_grad=True) for m in lora.modules}
        with torch.enable_grad(), lora.probed(gates, live=not frozen):
            if engine:
                logp, mask = logprob.token_logprobs(lora.model, b, fused_adapter=False, one_pass=True)
            else:
                logp, mask = logprob.reference_token_logprobs(lora.model, b)
            nll = -(logp * mask).sum(1) / mask.sum(1).clamp(min=1)
            grads = torch.autograd.grad(nll.sum(), list(gates.values()))
        for m, g in zip(gates, grads):
            parts[m].append(g.float().cpu())
    return {name: torch.cat(p) for name, p in parts.items()}


@torch.no_grad()
def frozen_nll(lora: Lora2r, seqs: Seqs, batch_size: int = 16, fast: bool = False) -> torch.Tensor:
    """Each row's mean completion-token NLL [N] in the frozen scorer's model, at temperature 1: the
    quantity whose probe gradient routeV scores (the same probed forward, c = 1, so the same model),
    which the nll control ranks by to ask whether routeV is an NLL filter. The text alone: no label."""
    device = lora.device
    engine = fastgen.select(lora.model, fast) is fastgen.FAST
    out = []
    for start in range(0, len(seqs), batch_size):
        b = seqs.rows(slice(start, start + batch_size)).to(device)
        ones = {m: torch.ones(len(b), lora.r, device=device) for m in lora.modules}
        with lora.probed(ones):
            if engine:
                logp, mask = logprob.token_logprobs(lora.model, b, fused_adapter=False, one_pass=True)
            else:
                logp, mask = logprob.reference_token_logprobs(lora.model, b)
        out.append((-(logp * mask).sum(1) / mask.sum(1).clamp(min=1)).double().cpu())
    return torch.cat(out)


def features(lora: Lora2r, seqs: Seqs, space: str, batch_size: int = 16, progress: bool = False,
             frozen: bool = True, fast: bool = False) -> dict[str, torch.Tensor]:
    """The gate's features of every row in `space`: pooled activations (act) or probe gradients
    (grad)."""
    if space == "act":
        return pooled_activations(lora, seqs, batch_size, progress, frozen, fast)
    if space == "grad":
        return probe_gradients(lora, seqs, batch_size, progress, frozen, fast)
    raise ValueError(f"feature space '{space}' unknown; valid: {', '.join(SPACES)}")
