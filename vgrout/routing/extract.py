"""The hack directions v_act and v_grad, from hand-written (hack, clean) pairs of the same prompt:
each pair's sides encoded as rollouts, their features (routing.features) in both spaces, the mean
paired difference per module (routing.directions), and the diagnostics A5 and A6 read.

The random-direction experiment: a Haar-random unit direction per module (same shapes), from
`gate.random_seed`, in place of v_act and v_grad.

Oracle-free rule: the only inputs are the authored pairs and the student; nothing here reads
rewards, grader output or rollout labels (tests/routing/test_oracle_free.py).
"""
from __future__ import annotations

from pathlib import Path

import torch

from vgrout.engine.adapter import Lora2r
from vgrout.engine.rollout import encode
from vgrout.io import InputError
from vgrout.layout import Layout
from vgrout.routing.directions import (SPACES, Direction, haar_direction, loo_scores, loo_separation,
                                       mean_difference, pair_units_band, save_direction, score, separation)
from vgrout.routing.features import features


def pair_features(lora: Lora2r, tokenizer, pairs, system: str | None = None, *, budget: int,
                  batch_size: int = 16, progress: bool = False, frozen: bool = True, fast: bool = False,
                  space: str = "act"):
    """The features (`space`) of every pair's hack and clean completion under its own prompt, each
    encoded as the rollout the student would have emitted within `budget` tokens (train.max_new_tokens):
    a gate that reads a rollout's first `budget` tokens and its EOS is fitted on the same view."""
    from vgrout.engine.model import chat_prompt
    prompts = [chat_prompt(tokenizer, _messages(p.prompt, system)) for p in pairs]
    seqs = encode(tokenizer, prompts + prompts, [p.hack for p in pairs] + [p.clean for p in pairs], budget)
    acts = features(lora, seqs, space, batch_size=batch_size, progress=progress, frozen=frozen, fast=fast)
    n = len(pairs)
    return {m: a[:n] for m, a in acts.items()}, {m: a[n:] for m, a in acts.items()}


def _messages(prompt: str, system: str | None) -> list[dict]:
    return ([{"role": "system", "content": system}] if system else []) + \
        [{"role": "user", "content": prompt}]


def extract(lora: Lora2r, tokenizer, pairs, system: str | None = None,
            random_seed: int | None = None, n_haar: int = 0,
            progress: bool = True, *, budget: int, batch_size: int, frozen: bool = True,
            fast: bool = False, space: str = "act") -> tuple[Direction, dict]:
    """v_act (space act) or v_grad (space grad) from the pairs (or a Haar-random direction if
    random_seed is set) and its diagnostics, in the frozen scorer's model (frozen) or in the adapter's current
    basis (a live refresh); the pairs are encoded as rollouts of `budget` tokens (`pair_features`)."""
    if not pairs:
        raise InputError("no pairs selected for v_act (check pairs.files and vact.modes)")
    h_hack, h_clean = pair_features(lora, tokenizer, pairs, system, budget=budget, batch_size=batch_size,
                                    progress=progress, frozen=frozen, fast=fast, space=space)
    return fit(h_hack, h_clean, pairs, random_seed, n_haar, space)


def fit(h_hack, h_clean, pairs, random_seed: int | None = None, n_haar: int = 0,
        space: str = "act") -> tuple[Direction, dict]:
    """The direction from the pairs' features (hack and clean sides, row i = pairs[i]), or a Haar-random
    direction if random_seed is set (the random-direction experiment), and its diagnostics: each pair's
    scores, separation, leave-one-out separation, Haar directions' separation, the per-module norms
    before normalising. n_haar: the stage passes vact.n_haar (its one default, in config); 0 logs no Haar floor."""
    raw_norms = {m: float((h_hack[m] - h_clean[m]).mean(0).norm()) for m in h_hack}
    v_act = mean_difference(h_hack, h_clean)
    direction = v_act if random_seed is None else haar_direction(v_act, random_seed)
    haar = [haar_direction(v_act, HAAR_SEED + k) for k in range(n_haar)]
    haar_seps = [separation(h_hack, h_clean, h) for h in haar]
    # the Haar floor of the band: the pairs' band along directions that read nothing (a Haar direction saw no pair, so
    # its scores are already held out), so a plan can set band.min_effect above what chance gives
    haar_bands = [abs(pair_units_band(score(h_hack, h), score(h_clean, h))) for h in haar]
    # the direction's own band on held-out scores: a fitted direction scores each pair along its refit without it
    if random_seed is None and len(pairs) >= 2:
        heldout_band = pair_units_band(*loo_scores(h_hack, h_clean))
    elif random_seed is not None:
        heldout_band = pair_units_band(score(h_hack, direction), score(h_clean, direction))
    else:
        heldout_band = float("nan")  # one pair: nothing to hold out
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
        # band.min_effect's floor (analysis.yaml): the direction's held-out band in the pairs' units (directions.
        # pair_units_band; the plan's band is this over width_ratio) beside the quantiles over the Haar directions of
        # |band| and of separation (the share of pairs ordered hack > clean; 0.5 is chance)
        "heldout_band": heldout_band,
        "haar_floor": {"n": n_haar, "seeds": [HAAR_SEED, HAAR_SEED + n_haar - 1] if n_haar else [],
                       "abs_band": _quantiles(haar_bands), "separation": _quantiles(haar_seps)},
        "module_norms": raw_norms,  # norm of the mean paired difference before normalising
    }
    return direction, diagnostics


HAAR_SEED = 10_000  # the diagnostic Haar directions' seeds: HAAR_SEED + k, k < vact.n_haar
FLOOR_Q = (0.5, 0.95)  # the Haar floor's quantiles: q50 (chance's typical band), q95 (what a floor should clear)


def _quantiles(values: list[float]) -> dict[str, float | None]:
    """{q50, q95} of the values (FLOOR_Q), None where there are none."""
    t = torch.tensor(values, dtype=torch.float64)
    return {f"q{round(100 * q)}": float(torch.quantile(t, q)) if len(values) else None for q in FLOOR_Q}


PAIR_FEATURES = "{name}_pair_features.safetensors"  # in runs/vact/SEED: keys hack.MODULE, clean.MODULE: [pairs, r]


def save_pair_features(path, h_hack: dict, h_clean: dict) -> None:
    """The pairs' features of both sides (row i = pair i), so C3's band can be read along any direction
    of the same space (a Haar draw's, the heldout one's) without a model: score them with it."""
    from safetensors.torch import save_file

    from vgrout.io import atomic_path
    with atomic_path(path) as tmp:
        save_file({**{f"hack.{m}": t.contiguous().float() for m, t in h_hack.items()},
                   **{f"clean.{m}": t.contiguous().float() for m, t in h_clean.items()}}, str(tmp))


def extract_stage(params, seed: int, layout: Layout = Layout(), progress: bool = True) -> dict:
    """DVC stage extract_vact@SEED: v_act from the selected modes (or Haar if gate.random_seed is
    set), the heldout arm's v_act from the modes not held out, and the style-contrast pairs' direction
    (for the separation diagnostic and A7's content-matched null only; no arm's gate reads it)."""

    from vgrout.engine import adapter as ad
    from vgrout.engine.model import load
    from vgrout.io import read_json, write_json
    from vgrout.pairs.pairs import Pair, select

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
        save_pair_features(out / PAIR_FEATURES.format(name=name), h_hack, h_clean)
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
