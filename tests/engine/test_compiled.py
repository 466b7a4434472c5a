"""vgrout.engine.compiled: the log-prob forwards' element-wise chains, compiled on a GPU. Traced by
torch.compile they give the eager chains' log-probs and gradients, and micro-batches of other
token counts reuse one graph per grad mode (no compile per shape in a training run)."""
import copy

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from tests.engine.test_fastgen import V, perturbed_lora
from vgrout.engine import adapter as ad
from vgrout.engine import compiled, logprob, rollout

CHAINS = ("norm_rotate", "silu_mul", "logp_chunk")


def model_and_batches(device="cpu", dtype=torch.float32):
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      max_position_embeddings=512, tie_word_embeddings=True, pad_token_id=0)
    model = Qwen3ForCausalLM(cfg).eval().to(device, dtype)
    lora = perturbed_lora(model, r=4)
    g = torch.Generator().manual_seed(3)
    batches = []
    for lens in ((30, 5, 61, 1, 44, 12), (9, 17, 3, 28)):  # micro-batches of other token counts
        ps = [torch.randint(2, V, (n,), generator=g).tolist() for n in (23, 40)]
        ps = [p for p in ps for _ in range(len(lens) // 2)]
        comps = [torch.randint(2, V, (n,), generator=g).tolist() for n in lens]
        zones = [("keep", "absorb", "route")[i % 3] for i in range(len(lens))]
        batches.append((rollout.pack(ps, comps, 0).to(device), zones))
    return model, lora, batches


def logprobs_and_grads(model, lora, seqs, zones, grad: bool, temperature: float = 1.0):
    for p in lora.parameters():
        p.grad = None
    with torch.set_grad_enabled(grad), lora.masked(zones):
        logp, _ = logprob.token_logprobs(model, seqs, keep_layers=1, temperature=temperature)
    if not grad:
        return logp, []
    (logp * torch.linspace(-1, 1, logp.numel(), device=logp.device).view_as(logp)).sum().backward()
    return logp.detach(), [p.grad.clone() for p in lora.parameters()]


def test_traced_chains_give_the_eager_logprobs_and_grads_and_one_graph_per_grad_mode(monkeypatch):
    """Each chain through torch.compile (graphs captured by dynamo, run by a counting backend, so
    no C compiler is needed) over two micro-batches of other token counts, without and with grad,
    at two temperatures: the eager chains' log-probs and gradients, and one graph per chain and
    grad mode. Without the tokens dimension marked dynamic the second micro-batch recompiles
    (`test_unmarked_token_counts_recompile`)."""
    # Dynamo keeps its cache entries and its automatic-dynamic record per code object, shared by
    # every torch.compile of a chain. On a GPU the GPU tests of test_fastgen.py, run earlier in the
    # same process (-o addopts=""), compile these chains for another model (bf16, other widths):
    # from that record the feature dims come out dynamic here, the packed completion pass's views
    # ([N, 1, ·]) then fail the 0/1 guard on their base's dim 1, and each chain compiles twice
    # per grad mode. The count is of this run's compiles, from a clean state.
    torch._dynamo.reset()
    graphs = {name: [] for name in CHAINS}
    for name in CHAINS:
        def backend(gm, example_inputs, name=name):
            graphs[name].append(gm)
            return gm.forward
        chain = getattr(compiled, name)
        monkeypatch.setattr(chain, "compiled", torch.compile(chain.eager, backend=backend))
    model, lora, batches = model_and_batches()
    monkeypatch.setattr(logprob, "shares_prompts", lambda seqs: True)  # the two-pass forward of large batches
    monkeypatch.setattr(logprob, "CHECKPOINT_ABOVE_TOKENS", 0)  # and their checkpointed layers' recompute
    for grad in (False, True):
        for temperature in (1.0, 0.7):
            for seqs, zones in batches:
                monkeypatch.setattr(compiled, "COMPILE", "never")
                ref, ref_g = logprobs_and_grads(model, lora, seqs, zones, grad, temperature)
                monkeypatch.setattr(compiled, "COMPILE", "always")
                got, got_g = logprobs_and_grads(model, lora, seqs, zones, grad, temperature)
                torch.testing.assert_close(got, ref, atol=1e-6, rtol=1e-6)
                for a, b in zip(got_g, ref_g):
                    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    # two temperatures: logp_chunk's constant; norm_rotate and silu_mul: one graph per grad mode
    assert {name: len(g) for name, g in graphs.items()} == {"norm_rotate": 2, "silu_mul": 2, "logp_chunk": 4}


def test_unmarked_token_counts_recompile(monkeypatch):
    """The guard of the test above: with the tokens dimension left unmarked, a micro-batch of
    another token count compiles the chain again."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    monkeypatch.setattr(compiled.silu_mul, "compiled", torch.compile(compiled.silu_mul.eager, backend=backend))
    monkeypatch.setattr(compiled, "COMPILE", "always")
    monkeypatch.setattr(torch._dynamo, "maybe_mark_dynamic", lambda t, dim: None)
    torch._dynamo.reset()
    for m in (7, 12):
        compiled.silu_mul(torch.randn(m, 5), torch.randn(m, 5))
    assert len(graphs) == 2


def test_an_unknown_compile_setting_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(compiled, "COMPILE", "sometimes")
    with pytest.raises(ValueError, match="COMPILE = 'sometimes'"):
        compiled.silu_mul(torch.randn(3, 4), torch.randn(3, 4))


def inductor_against_eager(device, monkeypatch):
    """Per micro-batch: (eager, compiled) log-probs and gradients in fp32; in bf16, each path's
    mean |log-prob error| against the same bf16 weights computed in fp32. Through the forward
    monkeypatch leaves in force (one pass, or two with checkpointed layers)."""
    model, lora, batches = model_and_batches(device, torch.float32)
    model16, lora16, _ = model_and_batches(device, torch.bfloat16)
    ref32 = copy.deepcopy(model16).float()  # the bf16 model's own weights, every op in fp32
    lora32 = ad.Lora2r(ref32, {m.name: m for m in ref32.modules() if isinstance(m, ad.Lora2rLinear)},
                       ad.routing_state(ref32), lora16.config)
    out = []
    for seqs, zones in batches:
        got = {}
        for mode in ("never", "always"):
            monkeypatch.setattr(compiled, "COMPILE", mode)
            got[mode] = logprobs_and_grads(model, lora, seqs, zones, True)
        monkeypatch.setattr(compiled, "COMPILE", "never")
        exact, _ = logprobs_and_grads(ref32, lora32, seqs, zones, False)
        err = {}
        for mode in ("never", "always"):
            monkeypatch.setattr(compiled, "COMPILE", mode)
            lp, _ = logprobs_and_grads(model16, lora16, seqs, zones, False)
            err[mode] = (lp.float() - exact).abs().mean().item()
        out.append((got, err))
    return out


@pytest.mark.skipif(not torch.cuda.is_available(), reason="Inductor's GPU kernels run on a GPU")
@pytest.mark.parametrize("training_path", [False, True])
def test_inductor_chains_give_the_eager_logprobs_and_grads_on_a_gpu(training_path, monkeypatch):
    """On a GPU the chains run as Inductor's kernels. In fp32 they give the eager chains'
    log-probs and adapter gradients; in bf16 their log-probs are as close to the same weights
    computed in fp32 as the eager chains' (they round once where eager rounds at each op).
    training_path: the forward of a training micro-batch (prompts shared, flash's varlen
    attention in bf16, checkpointed layers recomputed in the backward), else the one-pass one."""
    if training_path:
        monkeypatch.setattr(logprob, "shares_prompts", lambda seqs: True)
        monkeypatch.setattr(logprob, "CHECKPOINT_ABOVE_TOKENS", 0)
    for got, err in inductor_against_eager("cuda", monkeypatch):
        (ref, ref_g), (lp, g) = got["never"], got["always"]
        torch.testing.assert_close(lp, ref, atol=1e-4, rtol=1e-4)
        for a, b in zip(g, ref_g):
            assert (a - b).norm() <= 1e-3 * b.norm()
        assert err["always"] <= 1.25 * err["never"], err
