"""routeV's feature: the per-rollout probe gradient in the deployed bottleneck.

The probe leaves the forward unchanged; a row's gradient is the gradient of that row alone (a
batch never mixes rows); v_grad from pairs equals a direct per-pair computation through hooks on
the plain frozen model (no probe at all)."""
import pytest
import torch
import torch.nn.functional as F

from tests.conftest import make_tiny_llama
from vgrout.engine import adapter as ad
from vgrout.engine.logprob import position_ids
from vgrout.engine.model import chat_prompt, load, resolve
from vgrout.engine.rollout import encode, pack
from vgrout.pairs.pairs import Pair
from vgrout.routing import extract, features


def _seqs(n: int = 5, vocab: int = 97, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(1, vocab, (int(torch.randint(3, 7, (1,), generator=g)),), generator=g).tolist()
               for _ in range(n)]
    comps = [torch.randint(1, vocab, (int(torch.randint(2, 6, (1,), generator=g)),), generator=g).tolist()
             for _ in range(n)]
    prompts[1] = prompts[0]  # two rows of one prompt, as a GRPO group has
    return pack(prompts, comps, pad_id=0)


@pytest.fixture()
def lora():
    torch.manual_seed(0)
    lora = ad.attach(make_tiny_llama(), r=2, seed=0, last_layers=1)  # a frozen trunk below the adapted layer
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # as if trained: the live probe reads another model than the frozen one
        for p in lora.parameters():
            p.add_(0.3 * p.std() * torch.randn(p.shape, generator=g))
    return lora


def _logits(lora, seqs):
    return lora.model(input_ids=seqs.input_ids, attention_mask=seqs.attention_mask,
                      position_ids=position_ids(seqs.attention_mask)).logits


def test_the_probe_leaves_the_forward_unchanged(lora):
    seqs = _seqs()
    ones = {m: torch.ones(len(seqs), lora.r) for m in lora.modules}
    with torch.no_grad():
        with lora.frozen():
            frozen = _logits(lora, seqs)
        with lora.probed(ones):
            probed = _logits(lora, seqs)
        assert torch.equal(frozen, probed)  # c − 1 = 0 adds an exact zero: the frozen scorer's model
        with lora.masked(["keep"] * len(seqs)):
            deployed = _logits(lora, seqs)
        with lora.probed(ones, live=True):
            live = _logits(lora, seqs)
        assert torch.allclose(deployed, live, atol=1e-5)  # the deployed model, quarantine ablated
        assert not torch.allclose(frozen, deployed, atol=1e-3)  # the two models do differ here
        # and c away from 1 does change the output: the gates are in the forward
        with lora.probed({m: torch.full((len(seqs), lora.r), 1.5) for m in lora.modules}):
            assert not torch.allclose(_logits(lora, seqs), frozen, atol=1e-4)


@pytest.mark.parametrize("fast,frozen", [(True, True), (False, True), (True, False)])
def test_a_rows_probe_gradient_is_the_gradient_of_that_row_alone(lora, fast, frozen):
    seqs = _seqs()
    batched = features.probe_gradients(lora, seqs, batch_size=len(seqs), fast=fast, frozen=frozen)
    for i in range(len(seqs)):
        alone = features.probe_gradients(lora, seqs.rows([i]), batch_size=1, fast=fast, frozen=frozen)
        for m in lora.modules:
            assert torch.allclose(batched[m][i], alone[m][0], atol=1e-6, rtol=1e-4), (m, i)
    assert all(batched[m].abs().sum() > 0 for m in lora.modules)
    # rows differ (each reads its own text), and the same text scores the same in any batch
    m = next(iter(lora.modules))
    assert not torch.allclose(batched[m][0], batched[m][1])
    other = features.probe_gradients(lora, seqs.rows([3, 0, 2]), batch_size=2, fast=fast, frozen=frozen)
    assert torch.allclose(other[m][1], batched[m][0], atol=1e-6, rtol=1e-4)


def _direct_gradient(lora, seqs) -> dict[str, torch.Tensor]:
    """∂ mean-NLL / ∂c at c = 1 for one sequence, without any probe: hooks keep each adapted module's
    input x_t and the gradient g_t at its output in the plain frozen model, and the probe's gradient
    is Σ_t (B0_dᵀ·g_t) ⊙ (A0_d·x_t)."""
    xs, outs = {}, {}

    def keep(name):
        def hook(mod, args, out):
            xs[name] = args[0].detach()
            out.retain_grad()
            outs[name] = out
        return hook
    handles = [mod.register_forward_hook(keep(name)) for name, mod in lora.modules.items()]
    try:
        with lora.frozen():
            emb = lora.model.get_input_embeddings()(seqs.input_ids).requires_grad_()  # grad reaches every layer
            logits = lora.model(inputs_embeds=emb, attention_mask=seqs.attention_mask,
                                position_ids=position_ids(seqs.attention_mask)).logits
    finally:
        for h in handles:
            h.remove()
    mask = seqs.completion_mask[:, 1:].float()
    logp = F.log_softmax(logits[:, :-1].float(), -1).gather(-1, seqs.input_ids[:, 1:, None])[..., 0]
    (-(logp * mask).sum() / mask.sum()).backward()
    r = lora.r
    return {name: ((outs[name].grad @ mod.B0[:, :r]) * (xs[name] @ mod.A0[:r].T)).sum((0, 1))
            for name, mod in lora.modules.items()}


def test_v_grad_matches_a_direct_per_pair_computation():
    model, tok = load(resolve("tiny-smollm2"))
    lora = ad.attach(model, r=2, seed=0, last_layers=2)
    pairs = [Pair(id=f"p{i}", mode="exit_code", tags=(), prompt=f"Write f{i}(x) returning x plus {i}.",
                  hack=f"```python\nimport sys\nsys.exit(0)  # {i}\n```", clean=f"```python\ndef f{i}(x):\n    return x + {i}\n```",
                  file="t.md", line=i) for i in range(3)]
    v_grad, diag = extract.extract(lora, tok, pairs, "You write Python.", None, 0, False, budget=64, batch_size=4,
                                space="grad", fast=True)
    assert diag["kind"] == "v_grad"
    diffs = {m: [] for m in lora.modules}
    for p in pairs:
        prompt = chat_prompt(tok, [{"role": "system", "content": "You write Python."}, {"role": "user", "content": p.prompt}])
        hack, clean = (_direct_gradient(lora, encode(tok, [prompt], [text], 64)) for text in (p.hack, p.clean))
        for m in diffs:
            diffs[m].append(hack[m] - clean[m])
    for m, d in diffs.items():
        direct = torch.stack(d).mean(0)
        assert torch.allclose(v_grad[m], direct / direct.norm(), atol=1e-4), m
        assert abs(float(v_grad[m].norm()) - 1) < 1e-5
