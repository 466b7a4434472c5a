"""lora2r: zero delta at init, per-row keep/absorb/route gradients, ablation, persistence, export."""
import copy
import re

import pytest
import torch

from tests.conftest import make_tiny_llama
from vgrout.engine import adapter as ad


def _batch(n=3, t=7, vocab=97, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (n, t), generator=g)


def _train_a_bit(lora, ids, steps=3):
    """Move both blocks away from init so masks and ablation have something to act on."""
    opt = torch.optim.SGD(lora.parameters(), lr=0.5)
    for _ in range(steps):
        opt.zero_grad()
        lora.model(ids).logits.pow(2).mean().backward()
        opt.step()


def test_logits_equal_base_at_init():
    base = make_tiny_llama()
    wrapped = copy.deepcopy(base)
    lora = ad.attach(wrapped, r=4, init_scale=1.0, seed=0)
    ids = _batch()
    assert len(lora.modules) == 2 * 7
    diff = (wrapped(ids).logits - base(ids).logits).abs().max().item()
    assert diff <= 1e-6
    # the init is not trivially zero: the adapter matrices themselves are non-zero
    m = next(iter(lora.modules.values()))
    assert m.A.abs().sum() > 0 and m.B.abs().sum() > 0


def _per_row_grads(lora, ids, zones, row):
    """Gradient of row `row`'s loss alone, under the batch's mixed masks."""
    for p in lora.parameters():
        p.grad = None
    with lora.masked(zones):
        logits = lora.model(ids).logits
    logits[row].pow(2).mean().backward()
    g = {"deployed": 0.0, "quarantine": 0.0}
    for mod in lora.modules.values():
        for t, is_A in ((mod.A, True), (mod.B, False)):
            for block in g:
                g[block] += ad._block_slice(t.grad, mod, is_A, block).abs().sum().item()
    return g


def test_mixed_batch_masks_route_gradients_per_row():
    model = make_tiny_llama()
    lora = ad.attach(model, r=4, seed=0)
    ids = _batch(n=3)
    _train_a_bit(lora, ids)
    zones = ["keep", "absorb", "route"]
    keep, absorb, route = (_per_row_grads(lora, ids, zones, i) for i in range(3))
    assert keep["quarantine"] == 0.0 and keep["deployed"] > 0
    assert route["deployed"] == 0.0 and route["quarantine"] > 0
    assert absorb["deployed"] > 0 and absorb["quarantine"] > 0

    with torch.no_grad():
        with lora.masked(zones):
            mixed = model(ids).logits
        with lora.masked(["absorb"] * 3):
            full = model(ids).logits
        snapshot = lora.state_dict()
        lora.ablate_quarantine()
        deployed_only = model(ids).logits
        lora.load_state_dict(snapshot)
    # keep row: the quarantine does not change its forward (equals the ablated model)
    assert torch.allclose(mixed[0], deployed_only[0], atol=1e-6)
    assert not torch.allclose(mixed[0], full[0], atol=1e-4)
    # route row: the deployed output is still in its forward (same values as absorb)
    assert torch.allclose(mixed[2], full[2], atol=1e-6)
    assert torch.allclose(mixed[1], full[1], atol=1e-6)


def test_ablation_resets_quarantine_exactly():
    model = make_tiny_llama()
    lora = ad.attach(model, r=4, seed=0)
    ids = _batch()
    _train_a_bit(lora, ids)
    x = torch.randn(2, 5, 32)
    mod = next(iter(lora.modules.values()))
    assert mod.deltas(x)[1].abs().max() > 0
    lora.ablate_quarantine()
    for mod in lora.modules.values():
        xin = torch.randn(2, 5, mod.A.shape[1])
        assert torch.equal(mod.deltas(xin)[1], torch.zeros_like(mod.deltas(xin)[1]))
        assert torch.equal(mod.A[mod.r:], mod.A0[mod.r:])
    # ablated model == the keep-masked forward of the trained model (what deploy eval sees)
    with torch.no_grad():
        abl = model(ids).logits
        with lora.masked(["keep"] * ids.shape[0]):
            keep = model(ids).logits
    assert torch.allclose(abl, keep, atol=1e-6)


def test_save_load_round_trip(tmp_path):
    model = make_tiny_llama()
    lora = ad.attach(model, r=4, seed=0)
    ids = _batch()
    _train_a_bit(lora, ids)
    lora.save(tmp_path / "adapter.safetensors")
    assert ad.config_of(tmp_path / "adapter.safetensors")["r"] == 4

    other = ad.attach(make_tiny_llama(), r=4, seed=123)  # different init
    with torch.no_grad():
        before = other.model(ids).logits
    other.load(tmp_path / "adapter.safetensors")
    with torch.no_grad():
        a, b = model(ids).logits, other.model(ids).logits
    assert torch.equal(a, b)
    assert not torch.allclose(before, b)

    wrong = ad.attach(make_tiny_llama(), r=2, seed=0)
    with pytest.raises(Exception, match="shape"):
        wrong.load(tmp_path / "adapter.safetensors")


def test_export_merged_and_peft_match_ablated(tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = make_tiny_llama()
    lora = ad.attach(model, r=4, seed=0)
    ids = _batch()
    _train_a_bit(lora, ids)
    with torch.no_grad():
        with lora.masked(["keep"] * ids.shape[0]):  # quarantine off = deployed model
            deployed = model(ids).logits
    lora.export_merged(tmp_path / "merged")
    lora.export_peft(tmp_path / "peft")

    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval()
    with torch.no_grad():
        assert (merged(ids).logits - deployed).abs().max().item() <= 1e-5

    base = make_tiny_llama()  # same seed => same base weights
    peft_model = PeftModel.from_pretrained(base, tmp_path / "peft").eval()
    with torch.no_grad():
        assert (peft_model(ids).logits - deployed).abs().max().item() <= 1e-5
    # the wrapped model is intact after export
    with torch.no_grad():
        with lora.masked(["keep"] * ids.shape[0]):
            again = model(ids).logits
    assert torch.equal(again, deployed)


def test_unknown_zone_is_an_error():
    lora = ad.attach(make_tiny_llama(), r=2)
    with pytest.raises(ValueError, match="unknown zone"):
        with lora.masked(["keep", "bogus"]):
            pass


def test_capture_pools_deployed_bottleneck_over_completion_tokens():
    model = make_tiny_llama()
    lora = ad.attach(model, r=4, seed=0)
    ids = _batch(n=2, t=6)
    w = torch.zeros(2, 6)
    w[:, 3:] = 1 / 3  # mean over the last three (completion) tokens
    captured_x = {}
    name = next(iter(lora.modules))
    hook = lora.modules[name].register_forward_pre_hook(lambda m, a: captured_x.update(x=a[0]))
    with torch.no_grad(), lora.capture(w) as pooled:
        model(ids)
    hook.remove()
    mod = lora.modules[name]
    expected = (captured_x["x"][:, 3:] @ mod.A[:mod.r].T).mean(1)
    assert set(pooled) == set(lora.modules)
    assert torch.allclose(pooled[name], expected, atol=1e-6)


@pytest.mark.parametrize("bias", [False, True])
def test_fused_variant_computes_and_routes_like_the_exact_one(bias):
    """The routing state names the variant every wrapped Linear computes with: under
    `Lora2r.fused` the delta comes from Lora2rDelta in the input's dtype, with the same outputs
    (fp32 here) and the same keep / absorb / route gradient routing per row; restored after.
    bias: the base projections have biases, which Lora2rDelta adds itself."""
    model = make_tiny_llama(bias=bias)
    lora = ad.attach(model, r=4, seed=0)
    ids = _batch(n=3)
    _train_a_bit(lora, ids)
    zones = ["keep", "absorb", "route"]
    assert lora.state.variant is ad.ExactDelta
    exact = [_per_row_grads(lora, ids, zones, i) for i in range(3)]
    with torch.no_grad(), lora.masked(zones):
        ref = model(ids).logits
    with lora.fused():
        assert lora.state.variant is ad.FusedDelta
        fused = [_per_row_grads(lora, ids, zones, i) for i in range(3)]
        with torch.no_grad(), lora.masked(zones):
            got = model(ids).logits
    assert lora.state.variant is ad.ExactDelta
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
    for e, f in zip(exact, fused):
        for block in ("deployed", "quarantine"):
            assert (e[block] == 0) == (f[block] == 0)
            assert abs(e[block] - f[block]) <= 1e-4 * e[block]
    assert not any("forward" in vars(m) for m in model.modules())  # no module's forward replaced


@pytest.mark.parametrize("param", ["weight", "bias"])
def test_the_fused_variant_refuses_a_trainable_base_weight(param):
    """Lora2rDelta computes the base product itself and returns no gradient for W or its bias: a
    base parameter that requires grad would silently not train, so the fused forward names the module."""
    model = make_tiny_llama(bias=True)
    lora = ad.attach(model, r=4, seed=0)
    name, mod = next(iter(lora.modules.items()))
    getattr(mod.base, param).requires_grad_(True)
    with lora.fused(), pytest.raises(ValueError, match=re.escape(name)):
        model(_batch(n=1)).logits.sum().backward()
    with torch.no_grad(), lora.fused():  # no graph, no gradient to lose
        model(_batch(n=1))


def test_the_fused_variant_refuses_a_base_with_its_own_forward():
    """Lora2rDelta stands in for an nn.Linear's product; a subclass's forward (a quantised or
    hooked Linear) would be skipped, so the fused forward refuses it and names the module."""
    class Scaled(torch.nn.Linear):
        def forward(self, x):
            return 2 * super().forward(x)

    model = make_tiny_llama()
    lora = ad.attach(model, r=4, seed=0)
    name, mod = next(iter(lora.modules.items()))
    mod.base.__class__ = Scaled
    model(_batch(n=1))  # the exact variant calls the base's forward: served
    with torch.no_grad(), lora.fused(), pytest.raises(ValueError, match=re.escape(name)):
        model(_batch(n=1))


def _grads(lora):
    return [p.grad.clone() for p in lora.parameters()]


def test_each_block_is_clipped_on_its_own():
    """A huge deployed gradient (keep rows with a 1e4 loss scale) is clipped to max_norm and leaves
    the quarantine's gradient (route rows) untouched, bit for bit; one global clip would have
    shrunk it. A block above max_norm is scaled to it, by its own norm alone."""
    model = make_tiny_llama()
    lora = ad.attach(model, r=4, seed=0)
    ids = _batch(n=4)
    _train_a_bit(lora, ids)

    def backward(keep_scale):
        for p in lora.parameters():
            p.grad = None
        with lora.masked(["keep", "keep", "route", "route"]):
            logits = lora.model(ids).logits
        (keep_scale * logits[:2].pow(2).mean() + logits[2:].pow(2).mean()).backward()

    backward(1e4)
    before, norms = _grads(lora), lora.block_norms(grads=True)
    assert norms["deployed"] > 1e3 * norms["quarantine"] > 0
    max_norm = 2 * norms["quarantine"]
    assert lora.clip_grad_norms(max_norm) == norms  # the norms before the clip
    after = lora.block_norms(grads=True)
    assert after["deployed"] == pytest.approx(max_norm, rel=1e-4)
    for mod, (gA, gB) in zip(lora.modules.values(), zip(before[::2], before[1::2])):
        assert torch.equal(mod.A.grad[mod.r:], gA[mod.r:]) and torch.equal(mod.B.grad[:, mod.r:], gB[:, mod.r:])
        scale = max_norm / (norms["deployed"] + 1e-6)
        torch.testing.assert_close(mod.A.grad[:mod.r], gA[:mod.r] * scale)
        torch.testing.assert_close(mod.B.grad[:, :mod.r], gB[:, :mod.r] * scale)
    # the global clip this replaces: the quarantine's update scaled down with the deployed norm
    for p, g in zip(lora.parameters(), before):
        p.grad = g.clone()
    torch.nn.utils.clip_grad_norm_(lora.parameters(), max_norm)
    assert lora.block_norms(grads=True)["quarantine"] < 1e-3 * norms["quarantine"]
    # both blocks above max_norm: each ends at max_norm
    backward(1.0)
    norms = lora.block_norms(grads=True)
    lora.clip_grad_norms(0.1 * min(norms.values()))
    after = lora.block_norms(grads=True)
    assert after["deployed"] == pytest.approx(after["quarantine"], rel=1e-4)
    assert after["deployed"] == pytest.approx(0.1 * min(norms.values()), rel=1e-4)
    # a non-finite gradient is an error, not a silent NaN update
    next(iter(lora.modules.values())).B.grad[0, -1] = float("nan")
    with pytest.raises(FloatingPointError, match="quarantine"):
        lora.clip_grad_norms(1.0)


@pytest.mark.parametrize("how", ["adamw", "adamw_fused", "load", "ablate"])
def test_the_fused_deltas_stacked_weights_follow_every_change_of_the_adapter(how, tmp_path):
    """Lora2rDelta's stacked copies of A and B are kept between calls; an optimizer step, a load
    or an ablation must show in the next forward (a stale copy would train against old weights).
    The fused AdamW writes the parameters without bumping their version."""
    model = make_tiny_llama()
    lora = ad.attach(model, r=2, seed=0)
    x = torch.randint(0, 64, (2, 7))
    with lora.fused():
        model(x)  # stacks every module's weights
    mod = next(iter(lora.modules.values()))
    if how.startswith("adamw"):
        opt = torch.optim.AdamW(lora.parameters(), lr=0.1, fused=how == "adamw_fused")
        for p in lora.parameters():
            p.grad = torch.ones_like(p)
        opt.step()
    elif how == "load":  # a saved state unlike the init, loaded over another
        with torch.no_grad():
            mod.B.add_(1.0)
        lora.save(tmp_path / "a.safetensors")
        with torch.no_grad():
            mod.B.sub_(3.0)
        mod.stacked(torch.float32)
        lora.load(tmp_path / "a.safetensors")
    else:  # both blocks moved, then the quarantine reset: unlike the init and unlike the moved state
        with torch.no_grad():
            mod.B.add_(1.0)
        mod.stacked(torch.float32)
        lora.ablate_quarantine()
    Ac, Bc = mod.stacked(torch.float32)
    r, A, B, A0, B0 = mod.r, mod.A, mod.B, mod.A0, mod.B0
    torch.testing.assert_close(Ac, torch.cat([A[:r], (A - A0)[:r], A[r:], (A - A0)[r:]]).detach(), rtol=0, atol=0)
    torch.testing.assert_close(Bc, torch.cat([(B - B0)[:, :r], B0[:, :r], (B - B0)[:, r:], B0[:, r:]], 1).detach(), rtol=0, atol=0)


def test_fused_row_scales_follow_the_masks_in_force():
    """FusedDelta's per-row factors are built once per masks and kept for every wrapped Linear;
    other masks, a mask tensor changed in place, or masks of other rows rebuild them, so each
    forward computes under the masks in force (the exact variant's outputs)."""
    model = make_tiny_llama()
    lora = ad.attach(model, r=4, seed=0)
    ids = _batch(n=3)
    _train_a_bit(lora, ids)
    m = torch.tensor([0.0, 1.0, 1.0])
    d = torch.tensor([False, False, True])

    def logits(fused):
        with torch.no_grad(), lora.fused(fused), lora.state.scope(m=m, d=d):
            return model(ids).logits
    torch.testing.assert_close(logits(True), logits(False), atol=1e-5, rtol=1e-5)
    m[0] = 1.0  # in place: the kept factors are stale unless rebuilt
    torch.testing.assert_close(logits(True), logits(False), atol=1e-5, rtol=1e-5)
    with torch.no_grad(), lora.fused(), lora.masked(["keep", "keep", "keep"]):
        keep_all = model(ids).logits
    with torch.no_grad(), lora.masked(["keep", "keep", "keep"]):
        torch.testing.assert_close(keep_all, model(ids).logits, atol=1e-5, rtol=1e-5)
    with torch.no_grad(), lora.fused(), lora.masked(["keep"]):
        one = model(ids[:1]).logits
    torch.testing.assert_close(one, keep_all[:1], atol=1e-5, rtol=1e-5)
