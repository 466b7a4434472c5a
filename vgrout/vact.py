"""The hack directions v_act and v_grad, from hand-written (hack, clean) pairs of the same prompt.

Two feature spaces of a sequence, both of size r per adapted module (the deployed bottleneck):
    act:  h(seq)  = mean over completion tokens of A_deployed·x           (routeA)
    grad: g(seq)  = ∂ mean-NLL(completion) / ∂c at c = 1, c a per-row gate
                    multiplying the deployed bottleneck (adapter.ProbeReader)  (routeV)
    v_m   = mean over pairs of (f_hack − f_clean) at module m, unit-normalised per module
    score = Σ_m <f_m, v_m>
Both are read in the frozen scorer's model (the base model, the adapter at its init: quarantine
ablated, as the direction was taken), so a text scores the same at every step. g is the gradient
of the text's own likelihood: no advantage, no reward.

Placebo: a Haar-random unit direction per module (same shapes), from `gate.random_seed`.

Oracle-free rule: the only inputs are the authored pairs and the student; nothing here reads
rewards, grader output or rollout labels (tests/test_oracle_free.py).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from vgrout.adapter import Lora2r
from vgrout.io import InputError, atomic_path
from vgrout.layout import Layout
from vgrout.rollout import Seqs, encode

Direction = dict[str, torch.Tensor]  # module name -> [r], unit norm per module
SPACES = {"act": "v_act", "grad": "v_grad"}  # feature space -> the name of its direction (and file)


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
    from vgrout import fastgen, logprob  # here, not above: what only reads directions (aggregate) skips transformers
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
    from vgrout import fastgen, logprob  # here, not above: what only reads directions (aggregate) skips transformers
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


def features(lora: Lora2r, seqs: Seqs, space: str, batch_size: int = 16, progress: bool = False,
             frozen: bool = True, fast: bool = False) -> dict[str, torch.Tensor]:
    """The gate's features of every row in `space`: pooled activations (act) or probe gradients
    (grad)."""
    if space == "act":
        return pooled_activations(lora, seqs, batch_size, progress, frozen, fast)
    if space == "grad":
        return probe_gradients(lora, seqs, batch_size, progress, frozen, fast)
    raise ValueError(f"feature space '{space}' unknown; valid: {', '.join(SPACES)}")


def score(acts: dict[str, torch.Tensor], direction: Direction) -> torch.Tensor:
    """Σ_m <h_m, v_m> for every row: [N]."""
    missing = set(direction) - set(acts)
    if missing:
        raise InputError(f"direction has modules the activations lack: {sorted(missing)[:3]}...")
    return sum(acts[m].float() @ direction[m].float().to(acts[m].device) for m in direction)


def _unit(diff: dict[str, torch.Tensor]) -> Direction:
    return {m: d / d.norm().clamp(min=1e-12) for m, d in diff.items()}


def mean_difference(h_hack: dict[str, torch.Tensor], h_clean: dict[str, torch.Tensor],
                    rows: Sequence[int] | None = None) -> Direction:
    """Unit-normalised per module mean paired difference (hack − clean)."""
    out = {}
    for m in h_hack:
        d = h_hack[m] - h_clean[m]
        out[m] = (d if rows is None else d[list(rows)]).mean(0)
    return _unit(out)


def haar_direction(like: dict[str, torch.Tensor], seed: int) -> Direction:
    """A Haar-random unit direction per module with the shapes of `like` (seeded)."""
    g = torch.Generator().manual_seed(int(seed))
    # sorted names: the same seed gives the same direction whatever the dict order
    return _unit({m: torch.randn(like[m].shape[-1], generator=g) for m in sorted(like)})


def separation(h_hack, h_clean, direction: Direction) -> float:
    """Fraction of pairs whose hack side scores above its clean side."""
    return float((score(h_hack, direction) > score(h_clean, direction)).float().mean())


def loo_separation(h_hack, h_clean) -> float:
    """Leave-one-out: v_act from the other pairs, judged on the held-out pair."""
    n = next(iter(h_hack.values())).shape[0]
    if n < 2:
        return float("nan")
    hits = 0
    for i in range(n):
        v = mean_difference(h_hack, h_clean, [j for j in range(n) if j != i])
        one = lambda h: {m: t[i:i + 1] for m, t in h.items()}  # noqa: E731
        hits += int(score(one(h_hack), v)[0] > score(one(h_clean), v)[0])
    return hits / n


def pair_features(lora: Lora2r, tokenizer, pairs, system: str | None = None, *, budget: int,
                  batch_size: int = 16, progress: bool = False, frozen: bool = True, fast: bool = False,
                  space: str = "act"):
    """The features (`space`) of every pair's hack and clean completion under its own prompt, each
    encoded as the rollout the student would have emitted within `budget` tokens (train.max_new_tokens):
    a gate that reads a rollout's first `budget` tokens and its EOS is fitted on the same view."""
    from vgrout.model import chat_prompt
    prompts = [chat_prompt(tokenizer, _messages(p.prompt, system)) for p in pairs]
    seqs = encode(tokenizer, prompts + prompts, [p.hack for p in pairs] + [p.clean for p in pairs], budget)
    acts = features(lora, seqs, space, batch_size=batch_size, progress=progress, frozen=frozen, fast=fast)
    n = len(pairs)
    return {m: a[:n] for m, a in acts.items()}, {m: a[n:] for m, a in acts.items()}


def _messages(prompt: str, system: str | None) -> list[dict]:
    return ([{"role": "system", "content": system}] if system else []) + \
        [{"role": "user", "content": prompt}]


def extract(lora: Lora2r, tokenizer, pairs, system: str | None = None,
            random_seed: int | None = None, n_haar: int = 20,
            progress: bool = True, *, budget: int, batch_size: int, frozen: bool = True,
            fast: bool = False, space: str = "act") -> tuple[Direction, dict]:
    """v_act (space act) or v_grad (space grad) from the pairs (or the Haar placebo if random_seed
    is set) and its diagnostics, in the frozen scorer's model (frozen) or in the adapter's current
    basis (a live refresh); the pairs are encoded as rollouts of `budget` tokens (`pair_features`)."""
    if not pairs:
        raise InputError("no pairs selected for v_act (check vact.pair_files and vact.modes)")
    h_hack, h_clean = pair_features(lora, tokenizer, pairs, system, budget=budget, batch_size=batch_size,
                                    progress=progress, frozen=frozen, fast=fast, space=space)
    return fit(h_hack, h_clean, pairs, random_seed, n_haar, space)


def fit(h_hack, h_clean, pairs, random_seed: int | None = None, n_haar: int = 20,
        space: str = "act") -> tuple[Direction, dict]:
    """The direction from the pairs' features (hack and clean sides, row i = pairs[i]), or the Haar
    placebo if random_seed is set, and its diagnostics: each pair's scores, separation, leave-one-out
    separation, Haar directions' separation, the per-module norms before normalising."""
    raw_norms = {m: float((h_hack[m] - h_clean[m]).mean(0).norm()) for m in h_hack}
    v_act = mean_difference(h_hack, h_clean)
    direction = v_act if random_seed is None else haar_direction(v_act, random_seed)
    haar_seps = [separation(h_hack, h_clean, haar_direction(v_act, 10_000 + k)) for k in range(n_haar)]
    diagnostics = {
        "kind": SPACES[space] if random_seed is None else "haar",
        "random_seed": random_seed,
        "n_pairs": len(pairs),
        "modes": sorted({p.mode for p in pairs}),
        "n_modules": len(v_act),
        "pairs": [{"id": p.id, "mode": p.mode,
                   "hack_score": float(score({m: h_hack[m][i:i + 1] for m in h_hack}, direction)[0]),
                   "clean_score": float(score({m: h_clean[m][i:i + 1] for m in h_clean}, direction)[0])}
                  for i, p in enumerate(pairs)],
        "separation": separation(h_hack, h_clean, direction),
        "loo_separation": loo_separation(h_hack, h_clean),
        "haar_separation": {"n": n_haar, "mean": sum(haar_seps) / max(n_haar, 1),
                            "max": max(haar_seps, default=float("nan"))},
        "module_norms": raw_norms,  # norm of the mean paired difference before normalising
    }
    return direction, diagnostics


def save_direction(path: str | Path, direction: Direction, meta: dict | None = None) -> None:
    import json
    with atomic_path(path) as tmp:
        save_file({m: v.contiguous().float() for m, v in direction.items()}, str(tmp),
                  metadata={"vgrout": json.dumps(meta or {})})


def load_direction(path: str | Path, lora: Lora2r | None = None) -> Direction:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: direction file not found (run the extract_vact stage)")
    d = load_file(str(path))
    if lora is not None:
        if set(d) != set(lora.modules):
            raise InputError(f"{path}: its modules do not match the adapter's targets")
        for m, v in d.items():
            if v.shape[-1] != lora.r:
                raise InputError(f"{path}: '{m}' has size {v.shape[-1]}, adapter.r is {lora.r}")
    return d


def gate_direction(name: str, vact_dir: str | Path, seed: int, placebo_seed: int, lora: Lora2r | None = None) -> Direction:
    """The direction the run of arm name `name` (placebo_routeV: a yoked run's) gates with in run seed
    `seed`: its direction file (v_act, v_grad, heldout), or a Haar direction of that space's shape
    seeded placebo_seed + seed."""
    from vgrout import arms
    arm = arms.get(name)
    v = load_direction(arm.direction_file(vact_dir, arms.space(name)), lora)
    return haar_direction(v, placebo_seed + seed) if arm.direction == "haar" else v


def extract_stage(params, seed: int, layout: Layout = Layout(), progress: bool = True) -> dict:
    """DVC stage extract_vact@SEED: v_act from the selected modes (or Haar if gate.random_seed is
    set), the heldout arm's v_act from the modes not held out, and the placebo pair set's direction
    (for the separation diagnostic and A7's content-matched null only; no arm's gate reads it)."""

    from vgrout import adapter as ad
    from vgrout.io import read_json, write_json
    from vgrout.model import load
    from vgrout.pairs import Pair, select

    pairs_path, model_dir, out_dir, metrics_path = layout.pairs, layout.model, layout.vact(seed), layout.vact_metrics(seed)
    data = read_json(pairs_path)
    hack_pairs = [Pair(**{**p, "tags": tuple(p["tags"])}) for p in data["pairs"]]
    placebo_pairs = [Pair(**{**p, "tags": tuple(p["tags"])}) for p in data["placebo_pairs"]]
    system = data.get("system")
    model, tok = load(model_dir)
    a = params.adapter
    lora = ad.attach(model, r=a.r, init_scale=a.init_scale, seed=seed, targets=a.targets, last_layers=a.last_layers)
    n_haar = params.vact.n_haar
    modes = params.vact.modes
    held = set(params.vact.heldout_modes)
    chosen = select(hack_pairs, modes)
    kept = [p for p in chosen if p.mode not in held]
    if not kept:
        raise InputError(f"vact.heldout_modes {sorted(held)} leave no pairs for the heldout arm")

    # the pairs as the gate sees a rollout: the rollout budget, the engine train pools with; each
    # direction in both feature spaces (v_act for routeA, v_grad for routeV)
    enc = dict(budget=params.train.max_new_tokens, batch_size=params.vact.batch_size, fast=params.fast)
    out = Path(out_dir)
    pick = lambda h, rows: {m: t[rows] for m, t in h.items()}  # noqa: E731
    held_rows = [i for i, p in enumerate(chosen) if p.mode in held]
    kept_rows = [i for i, p in enumerate(chosen) if p.mode not in held]
    metrics = {"seed": seed}
    for space, name in SPACES.items():
        key = "" if space == "act" else f"{name}_"  # v_act's keys as before: v_act, heldout, placebo_pairs
        h_hack, h_clean = pair_features(lora, tok, chosen, system, progress=progress, space=space, **enc)
        v, diag = fit(h_hack, h_clean, chosen, params.gate.random_seed, n_haar, space)
        v_held, diag_held = fit(pick(h_hack, kept_rows), pick(h_clean, kept_rows), kept, None, 0, space)
        save_direction(out / f"{name}.safetensors", v, {"seed": seed, **{k: diag[k] for k in ("kind", "modes")}})
        save_direction(out / f"{name}_heldout.safetensors", v_held, {"seed": seed, "modes": diag_held["modes"]})
        # how well each direction separates the hack pairs (held-out pairs for the heldout one)
        metrics[name] = diag
        metrics[f"{key}heldout"] = {
            "modes_used": diag_held["modes"], "modes_held_out": sorted(held),
            "separation_on_heldout_pairs": separation(pick(h_hack, held_rows), pick(h_clean, held_rows), v_held)
            if held_rows else None}
        if placebo_pairs:
            # A7's content-matched null: pairs written like the hack pairs, contrasting style only
            v_placebo, diag_placebo = fit(*pair_features(lora, tok, placebo_pairs, system, progress=progress,
                                                         space=space, **enc), placebo_pairs, None, 0, space)
            save_direction(out / f"{name}_placebo.safetensors", v_placebo,
                           {"seed": seed, "modes": diag_placebo["modes"]})
            metrics[f"{key}placebo_pairs"] = {"n_pairs": len(placebo_pairs),
                                              "loo_separation_own_pairs": diag_placebo["loo_separation"],
                                              "separation_on_hack_pairs": separation(h_hack, h_clean, v_placebo)}
    # the budget cuts long pair sides as it cuts rollouts: how many lose their ends (a hack side may
    # lose its hack code there, leaving v_act the words that announce it)
    budget = params.train.max_new_tokens
    cut = lambda text: len(tok(text, add_special_tokens=False)["input_ids"]) + 1 > budget  # noqa: E731
    metrics["budget"] = {"max_new_tokens": budget, "n_pairs": len(chosen),
                         "hack_sides_cut": sum(cut(p.hack) for p in chosen),
                         "clean_sides_cut": sum(cut(p.clean) for p in chosen)}
    write_json(metrics_path, metrics)
    return metrics
