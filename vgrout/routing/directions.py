"""The hack directions v_act and v_grad as data: a unit vector per adapted module, its score of a
row's features, the Haar-random directions of the placebo and the nulls, and their files.

    v_m   = mean over pairs of (f_hack − f_clean) at module m, unit-normalised per module
    score = Σ_m <f_m, v_m>

Pure tensor code (no model, no engine): extraction (routing.extract), the per-step gate (train)
and the analysis (A5, A7) all read directions through here, so the analysis does not depend on
the sampling engine. Oracle-free: nothing here reads rewards, grader output or labels.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import torch
from safetensors.torch import load_file, save_file

from vgrout.io import InputError, atomic_path

Direction = dict[str, torch.Tensor]  # module name -> [r], unit norm per module
SPACES = {"act": "v_act", "grad": "v_grad"}  # feature space -> the name of its direction (and file)


def score(acts: dict[str, torch.Tensor], direction: Direction) -> torch.Tensor:
    """Σ_m <h_m, v_m> for every row: [N]."""
    missing = set(direction) - set(acts)
    if missing:
        raise InputError(f"direction has modules the activations lack: {sorted(missing)[:3]}...")
    return sum(acts[m].float() @ direction[m].float().to(acts[m].device) for m in direction)


def cosine(feats: dict[str, torch.Tensor], direction: Direction) -> torch.Tensor:
    """Each row's cosine to the direction [N], over every module's block concatenated:
    Σ_m <f_m, v_m> / (‖f‖·‖v‖). The dot product (`score`) scaled by the row's feature norm, so a
    row with a large gradient does not route for its size alone."""
    f_norm = sum(feats[m].float().pow(2).sum(-1) for m in direction).sqrt()
    v_norm = sum(direction[m].float().pow(2).sum() for m in direction).sqrt()
    return score(feats, direction) / (f_norm * v_norm).clamp(min=1e-12)


def band_cosine(feats: dict[str, torch.Tensor], direction: Direction, band: tuple[float, float]) -> torch.Tensor:
    """The seeds' score (gate.score cosine): the cosine to the direction, centred at the pairs' clean
    level and scaled by the band's width, (cos − c_clean) / |c_hack − c_clean|, with band =
    (c_clean, c_hack) the mean cosine of the pairs' clean and hack sides: 0 at the clean pairs' level,
    ±1 one band width from it. The width is taken unsigned: the direction alone orients the score
    (higher = further along it). A signed width would cancel the direction's sign, since −v negates
    the cosine and both band ends (c_clean and c_hack of −v are −c_clean and −c_hack): +h and −h of an
    antithetic placebo would then score every row alike and route the same rows, and a Haar direction
    would be re-oriented by the pairs it was meant to ignore. So −v scores exactly −(v's score)
    (IEEE negation is exact); the map is affine and increasing, so the rows rank as their cosines
    do. A zero width counts as 1e-12."""
    c_clean, c_hack = band
    return (cosine(feats, direction).double() - c_clean) / max(abs(c_hack - c_clean), 1e-12)


def pair_band(h_hack: dict[str, torch.Tensor], h_clean: dict[str, torch.Tensor], direction: Direction) -> tuple[float, float]:
    """(c_clean, c_hack): the mean cosine to the direction of the pairs' clean sides and of their hack
    sides, `band_cosine`'s band. −v gives (−c_clean, −c_hack) exactly."""
    return float(cosine(h_clean, direction).mean()), float(cosine(h_hack, direction).mean())


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


def loo_scores(h_hack, h_clean) -> tuple[torch.Tensor, torch.Tensor]:
    """Each pair's (hack, clean) scores along the mean difference refitted without it, [n] each: the pairs'
    held-out scores along a fitted direction (a direction fitted to a pair would separate it whatever it reads)."""
    n = next(iter(h_hack.values())).shape[0]
    one = lambda h, i: {m: t[i:i + 1] for m, t in h.items()}  # noqa: E731
    fits = [mean_difference(h_hack, h_clean, [j for j in range(n) if j != i]) for i in range(n)]
    return (torch.cat([score(one(h_hack, i), v) for i, v in enumerate(fits)]),
            torch.cat([score(one(h_clean, i), v) for i, v in enumerate(fits)]))


BAND_Q = (0.25, 0.75)  # the pairs' width: their pooled scores' interquartile width (the default plan's band.q_lo, q_hi)


def pair_units_band(hack_scores: torch.Tensor, clean_scores: torch.Tensor) -> float:
    """The pairs' band in their own units: (mean hack − mean clean score) over the BAND_Q width of the pooled scores.
    Signed (−v gives −band). The plan's band (analysis.bands) divides the same gap by a step's student width instead,
    so band_plan = band_pairs / width_ratio (student width / pair width, A2's band table beside it)."""
    pooled = torch.cat([hack_scores, clean_scores]).double()
    lo, hi = (float(torch.quantile(pooled, q)) for q in BAND_Q)
    gap = float(hack_scores.double().mean() - clean_scores.double().mean())
    return gap / max(hi - lo, 1e-12)


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


def save_direction(path: str | Path, direction: Direction, meta: dict | None = None) -> None:

    with atomic_path(path) as tmp:
        save_file({m: v.contiguous().float() for m, v in direction.items()}, str(tmp),
                  metadata={"vgrout": json.dumps(meta or {})})


def load_direction(path: str | Path, lora=None) -> Direction:
    """The direction saved at `path`; with `lora` (an engine.adapter.Lora2r) checked against its modules and rank."""
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


def gate_direction(name: str, vact_dir: str | Path, seed: int, placebo_seed: int, lora=None) -> Direction:
    """The direction the run of arm name `name` (placebo_routeV: a yoked run's; placeboV3n: an
    antithetic draw) gates with in run seed `seed`: its direction file (v_act, v_grad, heldout), or a
    Haar direction of that space's shape: seeded placebo_seed + seed, or for draw k the Haar
    direction h of arms.haar_seed(k, seed), +h (sign p) or −h (sign n): the two runs of a draw rank
    every row in opposite orders, so no sign of one draw can decide the control."""
    from vgrout import arms
    arm = arms.get(name)
    v = load_direction(arm.direction_file(vact_dir, arms.space(name)), lora)
    if arm.direction != "haar":
        return v
    if arms.draw(name) is None:
        return haar_direction(v, placebo_seed + seed)
    _, k, sign = arms.draw(name)
    h = haar_direction(v, arms.haar_seed(k, seed))
    return h if sign == "p" else {m: -x for m, x in h.items()}
