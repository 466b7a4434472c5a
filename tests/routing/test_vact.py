"""The frozen scorer's features: one space for the pairs and the rollouts, whichever forward
reads it, and the pairs encoded as the rollouts the gate pools."""
from types import SimpleNamespace

import pytest
import torch

from tests.conftest import make_tiny_llama
from vgrout import config
from vgrout.engine import adapter as ad
from vgrout.engine import logprob, rollout
from vgrout.engine.model import load, resolve
from vgrout.routing import features
from vgrout.train import loop as train


def _seqs(n=6, vocab=97, seed=3):
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(3, vocab, (int(torch.randint(3, 7, (1,), generator=g)),), generator=g).tolist()
               for _ in range(n // 2)]
    comps = [torch.randint(3, vocab, (int(torch.randint(1, 9, (1,), generator=g)),), generator=g).tolist()
             for _ in range(n)]
    return rollout.pack([prompts[i // 2] for i in range(n)], comps, pad_id=0)  # two rows per prompt


def _trained(lora):
    """Move both blocks off their init, so that a forward that read the learned adapter would differ."""
    with torch.no_grad():
        for m in lora.modules.values():
            m.A.add_(0.3 * torch.randn_like(m.A))
            m.B.add_(0.3 * torch.randn_like(m.B))


def test_the_frozen_scorer_keeps_the_trunk_the_masked_forwards_start_from():
    """train.frozen_acts gives the frozen features of a full forward (within fp32 rounding of the
    model's own forward; the init's space at any adapter state) and keeps each micro-batch's
    frozen trunk. The trained adapter's masked forwards from that trunk give, bit for bit, the
    logπ of a forward from scratch (the layers below hold no adapter). Another row's trunk breaks
    the equality, so the check can fail."""
    lora = ad.attach(make_tiny_llama(layers=3), r=2, seed=0, last_layers=1)  # layers below the top one: a frozen trunk
    _trained(lora)
    seqs = _seqs()
    cfg = SimpleNamespace(fast=True, t=config.Train(micro_batch=3, max_new_tokens=8, temperature=0.8))
    acts, trunks = train.frozen_acts(cfg, lora, seqs)
    assert trunks is not None and len(trunks) == 2
    full = features.pooled_activations(lora, seqs, batch_size=3, frozen=True, fast=True)
    reference = features.pooled_activations(lora, seqs, batch_size=3, frozen=True, fast=False)
    assert all(torch.equal(acts[m], full[m]) for m in full)
    assert max((full[m] - reference[m]).abs().max().item() for m in full) < 1e-5
    zones = ["keep", "absorb", "route"] * 2
    flip = lambda t: tuple(x.flip(0) for x in t) if isinstance(t, tuple) else t.flip(0)  # noqa: E731
    for k, s in enumerate(range(0, len(seqs), 3)):
        mb = seqs.rows(slice(s, s + 3))
        with torch.no_grad(), lora.masked(zones[s:s + 3]):
            scratch, _ = logprob.token_logprobs(lora.model, mb)
            kept, _ = logprob.token_logprobs(lora.model, mb, trunk=trunks[k])
            other, _ = logprob.token_logprobs(lora.model, mb, trunk=flip(trunks[k]))
        assert torch.equal(kept, scratch)
        assert not torch.equal(other, scratch)
    # the frozen space is the init's: resetting the adapter to its init leaves it where it is
    for m in lora.modules.values():
        with torch.no_grad():
            m.A.copy_(m.A0), m.B.copy_(m.B0)
    assert all(torch.equal(features.pooled_activations(lora, seqs, batch_size=3, frozen=True, fast=True)[m], full[m])
               for m in full)


def test_pairs_are_encoded_as_the_rollouts_the_gate_pools():
    """A pair's side is its tokens and EOS, cut at the rollout budget, as a teacher row and a
    student's finished (or cut) rollout are: the gate pools the same view v_act was fitted on."""
    _, tok = load(resolve("tiny-smollm2"))
    text = "def add(a, b):\n    return a + b"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert rollout.as_completion(tok, text, 64) == ids + [tok.eos_token_id]
    assert rollout.as_completion(tok, text, 3) == ids[:3]  # cut: no EOS, like a rollout at the budget
    seqs = rollout.encode(tok, ["Write add."], [text], budget=64)
    assert seqs.input_ids[0, -1].item() == tok.eos_token_id and seqs.completion_mask[0, -1] == 1
    assert int(seqs.completion_mask.sum()) == len(ids) + 1


def test_a_model_the_engine_does_not_run_scores_through_the_reference_forward():
    """fast on, but a layout the fast engine does not run (an output head with a bias): the scorer
    keeps no trunk, and the frozen features come from the model's own forward, as with fast off."""
    import torch.nn as nn
    model = make_tiny_llama(layers=3)
    head = model.lm_head
    model.lm_head = nn.Linear(head.in_features, head.out_features, bias=True)
    lora = ad.attach(model, r=2, seed=0, last_layers=1)
    seqs = _seqs()
    cfg = SimpleNamespace(fast=True, t=config.Train(micro_batch=3, max_new_tokens=8, temperature=0.8))
    got, trunks = train.frozen_acts(cfg, lora, seqs)
    assert trunks is None
    ref = features.pooled_activations(lora, seqs, batch_size=3, frozen=True, fast=False)
    assert all(torch.equal(got[m], ref[m]) for m in ref)


# -- the band's Haar floor (metrics/vact: heldout_band, haar_floor) -----------------------------------------------

def _pair_features(shift: float, n: int = 24, modules: int = 20, r: int = 8, seed: int = 0):
    """Synthetic pair features: hack sides shifted by `shift` along one unit direction u per module, plus noise."""
    g = torch.Generator().manual_seed(seed)
    u = {f"m{i}": torch.nn.functional.normalize(torch.randn(r, generator=g), dim=0) for i in range(modules)}
    clean = {m: torch.randn(n, r, generator=g) for m in u}
    hack = {m: torch.randn(n, r, generator=g) + shift * u[m] for m in u}
    pairs = [SimpleNamespace(id=f"p{i}", mode="exit_code") for i in range(n)]
    return hack, clean, pairs


def test_the_haar_floor_is_the_haar_directions_bands():
    """haar_floor: q50 and q95 over n_haar seeded Haar directions (seeds HAAR_SEED + k) of |band| and of separation,
    each band the pairs' (mean hack − mean clean score) over their pooled interquartile width: a direct computation."""
    from vgrout.routing import directions, extract
    hack, clean, pairs = _pair_features(shift=1.0)
    _, diag = extract.fit(hack, clean, pairs, n_haar=50)
    bands, seps = [], []
    for k in range(50):
        h = directions.haar_direction(directions.mean_difference(hack, clean), extract.HAAR_SEED + k)
        a, b = directions.score(hack, h).double(), directions.score(clean, h).double()
        lo, hi = torch.quantile(torch.cat([a, b]), torch.tensor([0.25, 0.75], dtype=torch.float64))
        bands.append(abs(float((a.mean() - b.mean()) / (hi - lo))))
        seps.append(float((a > b).double().mean()))
    floor = diag["haar_floor"]
    assert floor["n"] == 50 and floor["seeds"] == [extract.HAAR_SEED, extract.HAAR_SEED + 49]
    for name, values in (("abs_band", bands), ("separation", seps)):
        t = torch.tensor(values, dtype=torch.float64)
        assert floor[name] == pytest.approx({"q50": float(torch.quantile(t, 0.5)), "q95": float(torch.quantile(t, 0.95))})
    assert floor["abs_band"]["q50"] < floor["abs_band"]["q95"]
    assert extract.fit(hack, clean, pairs, n_haar=0)[1]["haar_floor"]["abs_band"] == {"q50": None, "q95": None}


def test_the_direction_band_is_held_out():
    """heldout_band scores each pair along the direction refitted without it: on pairs with no hack direction
    (noise) it stays under the Haar q95, though the in-sample band of the fitted direction clears it (a fit
    separates the pairs it was fitted to); on pairs shifted along a direction it clears the Haar q95."""
    from vgrout.routing import directions, extract
    hack, clean, pairs = _pair_features(shift=0.0)
    v, diag = extract.fit(hack, clean, pairs, n_haar=200)
    in_sample = directions.pair_units_band(directions.score(hack, v), directions.score(clean, v))
    q95 = diag["haar_floor"]["abs_band"]["q95"]
    assert in_sample > q95 > diag["heldout_band"]
    hack, clean, pairs = _pair_features(shift=0.5)
    _, diag = extract.fit(hack, clean, pairs, n_haar=200)
    assert diag["heldout_band"] > diag["haar_floor"]["abs_band"]["q95"]
