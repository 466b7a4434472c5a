"""The fast path computes what the plain path computes: greedy tokens equal to HF generate (per-row
deploy sampling included), EOS cuts alike, chunked log-probs and their gradients equal to
logprob.reference_token_logprobs, and the GPU sampler draws from softmax(logits / T) within the top-p nucleus."""
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

from tests.conftest import make_tiny_llama
from bench.harness import synthetic_tokenizer
from vgrout.engine import adapter as ad
from vgrout.engine import arch, decode, fastgen, flashdecode, logprob, rollout
from vgrout.io import InputError

V = 97


def tiny_qwen3(seed: int = 0) -> Qwen3ForCausalLM:
    torch.manual_seed(seed)
    cfg = Qwen3Config(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                      max_position_embeddings=256, tie_word_embeddings=True, pad_token_id=0)
    return Qwen3ForCausalLM(cfg).eval()


def tiny_qwen2(seed: int = 0, **config) -> Qwen2ForCausalLM:
    """Qwen2.5-Coder's layout, small: biased q, k and v projections (drawn nonzero: transformers
    initialises biases to zero, which would leave them untested), an untied output head, rope_theta
    1e6, 7 query heads per KV head (14 / 2), and a sliding window configured but off, as in its
    config (use_sliding_window false: every layer attends in full)."""
    torch.manual_seed(seed)
    cfg = {"vocab_size": V, "hidden_size": 112, "intermediate_size": 96, "num_hidden_layers": 2,
           "num_attention_heads": 14, "num_key_value_heads": 2, "max_position_embeddings": 256,
           "tie_word_embeddings": False, "rope_theta": 1e6, "use_sliding_window": False, "sliding_window": 16,
           "pad_token_id": 0}
    model = Qwen2ForCausalLM(Qwen2Config(**{**cfg, **config})).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear) and m.bias is not None:
                m.bias.normal_(0, 0.5)
    return model


TINY = {"qwen3": tiny_qwen3, "qwen2": tiny_qwen2, "llama": lambda: make_tiny_llama(vocab=V)}


def spread(model):
    """Wider weights than the default init: well-separated logits, so a greedy tie is not luck."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)
    return model


def prompts(n: int, seed: int = 1, lo: int = 2, hi: int = 14) -> list[str]:
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(lo, hi, (n,), generator=g).tolist()  # ragged: left padding is exercised
    return [" ".join(f"t{int(i)}" for i in torch.randint(2, V, (k,), generator=g)) for k in lens]


def perturbed_lora(model, r: int = 2, **attach):
    lora = ad.attach(model, r=r, seed=0, **attach)
    with torch.no_grad():  # both blocks away from init, so quarantine on/off changes the output
        for m in lora.modules.values():
            m.B.add_(0.5 * torch.randn_like(m.B))
    return lora


@pytest.mark.parametrize("family", ["qwen3", "llama", "qwen2"])
def test_greedy_tokens_equal_hf_generate(family):
    model = spread(TINY[family]())
    tok = synthetic_tokenizer(V)
    ps = prompts(7)
    # batch 3 over 7 prompts: a short last chunk is padded with filler rows
    ref = rollout.generate(model, tok, ps, 24, 0.0, batch_size=3)
    fast = decode.generate(model, tok, ps, 24, 0.0, batch_size=3)
    assert fast == ref
    assert len({tuple(r) for r in ref}) > 1


@pytest.mark.parametrize("targets", [("q_proj", "v_proj", "down_proj"), ("k_proj",)])
def test_a_partly_adapted_qkv_group_equals_hf_generate(targets):
    """q, k and v run as one projection: a block-diagonal adapter over the adapted ones only,
    with zero rows for the plain ones, in both modes."""
    model = spread(tiny_qwen3())
    tok = synthetic_tokenizer(V)
    lora = ad.attach(model, r=2, seed=0, targets=list(targets))
    with torch.no_grad():
        for m in lora.modules.values():
            m.B.add_(0.5 * torch.randn_like(m.B))
    ps = [p for p in prompts(4) for _ in range(2)]
    deploy = [i % 3 == 0 for i in range(8)]
    ref = rollout.generate(model, tok, ps, 16, 0.0, batch_size=8, lora=lora, deploy_rows=deploy)
    fast = decode.generate(model, tok, ps, 16, 0.0, batch_size=8, lora=lora, deploy_rows=deploy)
    assert fast == ref
    eng = next(iter(decode._ENGINE.values()))
    qkv = [g for g in eng.proj.delta if len(g) == 3]
    assert len(qkv) == len(eng.a.layers) and not eng.proj.one_mode
    A, B, parts = eng.proj.delta[qkv[0]]
    assert len(parts) == sum(t in targets for t in ("q_proj", "k_proj", "v_proj"))
    assert B.shape[0] == sum(arch.base_linear(m).out_features for m in qkv[0])  # plain ones: zero rows


@pytest.mark.parametrize("family", ["qwen3", "qwen2"])
def test_greedy_tokens_equal_hf_generate_with_deploy_rows(family, monkeypatch):
    """qwen2: the adapter wraps biased projections, whose biases the engine's fused q, k, v
    projection concatenates."""
    monkeypatch.setattr(decode, "SPAN", 8)  # several attended spans within one generation
    model = spread(TINY[family]())
    tok = synthetic_tokenizer(V)
    lora = perturbed_lora(model)
    ps = prompts(8)
    deploy = [i % 2 == 0 for i in range(8)]
    ref = rollout.generate(model, tok, ps, 16, 0.0, batch_size=4, lora=lora, deploy_rows=deploy)
    fast = decode.generate(model, tok, ps, 16, 0.0, batch_size=4, lora=lora, deploy_rows=deploy)
    assert fast == ref
    assert len(decode._ENGINE) == 1 and len(next(iter(decode._ENGINE.values())).spans) > 2
    # the per-row mode matters: flipping it changes the completions
    flipped = decode.generate(model, tok, ps, 16, 0.0, batch_size=4, lora=lora,
                              deploy_rows=[not d for d in deploy])
    assert sum(a != b for a, b in zip(fast, flipped)) >= 6
    # one mode for every row: the engine folds m into its copy of A instead of scaling rows
    for mode in (True, False):
        ref = rollout.generate(model, tok, ps, 16, 0.0, batch_size=4, lora=lora, deploy_rows=[mode] * 8)
        fast = decode.generate(model, tok, ps, 16, 0.0, batch_size=4, lora=lora, deploy_rows=[mode] * 8)
        assert fast == ref and next(iter(decode._ENGINE.values())).proj.one_mode


def test_group_prompts_prefilled_once_give_hf_generate_tokens(monkeypatch):
    """Rows sharing a prompt and a sampling mode share one prefill (its K/V copied to each): the
    greedy tokens still equal HF generate's, with deploy and full rows mixed inside a group and
    more distinct prompts than one prefill chunk holds."""
    monkeypatch.setattr(decode, "PREFILL_TOKENS", 20)  # about one distinct prompt per chunk
    model = spread(tiny_qwen3())
    tok = synthetic_tokenizer(V)
    lora = perturbed_lora(model)
    ps = [p for p in prompts(3) for _ in range(4)]
    deploy = [i % 4 == 0 for i in range(12)]
    ref = rollout.generate(model, tok, ps, 12, 0.0, batch_size=12, lora=lora, deploy_rows=deploy)
    fast = decode.generate(model, tok, ps, 12, 0.0, batch_size=12, lora=lora, deploy_rows=deploy)
    assert fast == ref
    assert ref[0] != ref[1]  # the deploy row of a group differs from its full rows


def test_interleaved_groups_share_prompt_slots_and_keep_row_order():
    """Rows arrive interleaved (prompt A, B, A, B ...) with modes mixed: the engine regroups them
    into prompt slots of R rows (R = gcd of the run sizes), reads each slot's prompt K/V for its R
    rows, and hands the completions back in the caller's order, equal to HF greedy."""
    model = spread(tiny_qwen3())
    tok = synthetic_tokenizer(V)
    lora = perturbed_lora(model)
    a, b = prompts(2, seed=5)
    ps, deploy = [a, b] * 6, [False] * 8 + [True] * 4  # (A, full) x4, (B, full) x4, (A, deploy) x2, (B, deploy) x2
    ref = rollout.generate(model, tok, ps, 14, 0.0, batch_size=12, lora=lora, deploy_rows=deploy)
    fast = decode.generate(model, tok, ps, 14, 0.0, batch_size=12, lora=lora, deploy_rows=deploy)
    assert fast == ref
    eng = next(iter(decode._ENGINE.values()))
    assert (eng.R, eng.U) == (2, 6) and eng.kp.shape[1] == 6  # half as many prompt slots as rows
    assert ref[0] != ref[8]  # same prompt, other mode: another completion

    order, R = decode.prompt_slots([[1], [2], [1], [1]], [False] * 4)
    assert (order, R) == ([0, 2, 3, 1], 1)  # runs of 3 and 1: one row per slot
    order, R = decode.prompt_slots([[1]] * 4 + [[2]] * 4, [False] * 8)
    assert (order, R) == (list(range(8)), 4)  # grouped rows keep their order


def test_eos_cut_equals_hf_generate():
    model = spread(tiny_qwen3())
    ps = prompts(6)
    # make the EOS a token the greedy completions hit part-way through
    free = rollout.generate(model, synthetic_tokenizer(V, eos_id=V - 1), ps, 20, 0.0, batch_size=6)
    eos = max({t for row in free for t in row[3:12]}, key=lambda t: sum(t in r[3:12] for r in free))
    tok = synthetic_tokenizer(V, eos_id=eos)
    ref = rollout.generate(model, tok, ps, 20, 0.0, batch_size=6)
    fast = decode.generate(model, tok, ps, 20, 0.0, batch_size=6)
    assert fast == ref
    assert any(len(r) < 20 and r[-1] == eos for r in ref)


@pytest.mark.parametrize("fused_adapter,checkpointed,keep_layers,temperature,family",
                         [(True, True, 0, 1.0, "qwen3"), (True, True, 1, 1.0, "qwen3"), (True, False, 0, 1.0, "qwen3"),
                          (False, True, 0, 1.0, "qwen3"), (True, True, 0, 0.7, "qwen3"), (False, False, 0, 1.6, "qwen3"),
                          (True, True, 0, 0.7, "qwen2"), (False, False, 0, 1.0, "qwen2")])
def test_chunked_logprobs_and_grads_equal_token_logprobs(fused_adapter, checkpointed, keep_layers, temperature,
                                                         family, monkeypatch):
    """At the sampling temperature too: both paths compute log softmax(logits / T). qwen2: biased
    q, k, v projections under the adapter (FusedDelta's product takes the bias), an untied head."""
    monkeypatch.setattr(logprob, "CHECKPOINT_ABOVE_TOKENS", 0 if checkpointed else 10 ** 9)
    monkeypatch.setattr(logprob, "KEEP_LAYERS", keep_layers)  # 1: the top layer keeps its activations
    model = spread(TINY[family]())
    tok = synthetic_tokenizer(V)
    lora = perturbed_lora(model)
    ps = prompts(6)
    comps = rollout.generate(model, tok, ps, 16, temperature, batch_size=6, lora=lora)
    seqs = rollout.pack([tok(p, add_special_tokens=False)["input_ids"] for p in ps], comps, 0)
    zones = ["keep", "absorb", "route", "route", "absorb", "keep"]

    def run(fn):
        for p in lora.parameters():
            p.grad = None
        with lora.masked(zones):
            logp, mask = fn(model, seqs)
        # backward outside the masked block: the checkpointed recompute must restore the masks
        (logp * torch.linspace(-1, 1, logp.numel()).view_as(logp)).sum().backward()
        return logp.detach(), mask, [p.grad.clone() for p in lora.parameters()]

    ref, ref_mask, ref_g = run(lambda m, s: logprob.reference_token_logprobs(m, s, temperature=temperature))
    fast, mask, g = run(lambda m, s: logprob.token_logprobs(m, s, chunk_tokens=18, fused_adapter=fused_adapter,
                                                            temperature=temperature))
    assert torch.equal(mask, ref_mask)
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)
    for a, b in zip(g, ref_g):
        assert (a - b).norm() <= 1e-4 * b.norm()
    # the reference is log softmax(logits / T) of the model's own forward, row by row unpadded
    for i, (p, c) in enumerate(zip(ps, comps)):
        ids = torch.tensor([tok(p, add_special_tokens=False)["input_ids"] + c])
        with torch.no_grad(), lora.masked([zones[i]]):
            logits = model(ids).logits[0, -len(c) - 1:-1].float()
        own = torch.log_softmax(logits / temperature, -1).gather(1, ids[0, -len(c):, None])[:, 0]
        torch.testing.assert_close(ref[i][ref_mask[i] > 0], own, atol=1e-5, rtol=1e-5)
        if temperature != 1.0:  # the temperature is applied: T = 1 gives other values
            plain = torch.log_softmax(logits, -1).gather(1, ids[0, -len(c):, None])[:, 0]
            assert (plain - own).abs().max() > 1e-2
    # route rows train the quarantine only: a route-only batch leaves the deployed grads at zero
    for p in lora.parameters():
        p.grad = None
    with lora.masked(["route"] * len(zones)):
        logp, _ = logprob.token_logprobs(model, seqs, chunk_tokens=18, fused_adapter=fused_adapter)
    logp.sum().backward()
    for m in lora.modules.values():
        assert m.A.grad[:m.r].abs().max() == 0 and m.A.grad[m.r:].abs().max() > 0
        assert m.B.grad[:, :m.r].abs().max() == 0 and m.B.grad[:, m.r:].abs().max() > 0
    # a no-grad forward in the sampling modes (logπ_sample; the live scorer pools the gate's activations) alike
    deploy = [True, False, True, False, False, True]
    with torch.no_grad():
        with lora.sampling(deploy), lora.capture(seqs.pool_weights()) as ref_pooled:
            ref_old, _ = fastgen.REFERENCE.token_logprobs(model, seqs, temperature=temperature)
        with lora.sampling(deploy), lora.capture(seqs.pool_weights()) as pooled:
            old, _ = logprob.token_logprobs(model, seqs, fused_adapter=fused_adapter, temperature=temperature)
    torch.testing.assert_close(old, ref_old, atol=1e-5, rtol=1e-5)
    assert set(pooled) == set(ref_pooled) == set(lora.modules)
    for k in pooled:
        torch.testing.assert_close(pooled[k], ref_pooled[k], atol=1e-5, rtol=1e-4)


def test_sampler_draws_softmax_within_top_p():
    torch.manual_seed(0)
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0])
    n = 40000
    draws = decode.sample_next(logits.expand(n, -1), temperature=0.7)
    freq = torch.bincount(draws, minlength=6).float() / n
    torch.testing.assert_close(freq, torch.softmax(logits / 0.7, -1), atol=0.01, rtol=0)
    p = torch.softmax(logits, -1)  # cumulative 0.56, 0.77, 0.89, ...: top_p 0.8 keeps three tokens
    draws = decode.sample_next(logits.expand(n, -1), temperature=1.0, top_p=0.8)
    freq = torch.bincount(draws, minlength=6).float() / n
    assert freq[3:].sum() == 0
    torch.testing.assert_close(freq[:3], p[:3] / p[:3].sum(), atol=0.01, rtol=0)
    assert torch.equal(decode.sample_next(logits.expand(3, -1), temperature=0.0), torch.zeros(3, dtype=torch.long))


def test_decode_floor_counts_weights_and_growing_cache():
    from bench.harness import decode_floor
    # 3 new tokens -> 2 decode steps attending 10+1 and 10+2 positions
    assert decode_floor(100, 4, [3, 3], prompt_len=10, copy_bps=1.0) == 2 * 100 + 2 * 4 * (11 + 12)
    # a group of 2 shares its prompt's K/V: the 10 prompt positions are read once per step, not twice
    assert decode_floor(100, 4, [3, 3], prompt_len=10, copy_bps=1.0, group=2) == \
        2 * 100 + 4 * (2 * 10 + 2 * (1 + 2))
    # a row of one token is done at the prefill: the steps read only the other row's cache
    assert decode_floor(100, 4, [3, 1], prompt_len=10, copy_bps=1.0) == 2 * 100 + 4 * (11 + 12)
    assert decode_floor(100, 4, [3, 1], prompt_len=10, copy_bps=1.0, group=2) == 2 * 100 + 4 * (2 * 10 + 1 + 2)
    # the prompt is read once per slot with a running row, not once per running row
    assert decode_floor(100, 4, [3, 3, 1, 1], prompt_len=10, copy_bps=1.0, group=2) == \
        2 * 100 + 4 * (2 * 10 + 2 * (1 + 2))
    # no decode step, and a last slot of fewer rows
    assert decode_floor(100, 4, [1, 1], prompt_len=10, copy_bps=1.0, group=2) == 0.0
    assert decode_floor(100, 4, [3, 3, 3], prompt_len=10, copy_bps=1.0, group=2) == \
        2 * 100 + 4 * (2 * 2 * 10 + 3 * (1 + 2))


def test_the_ratio_range_pairs_the_steps_after_the_first_on_each_side():
    from bench.harness import ratio_range
    # the first steps (compiles, warm-up) are left out; the extremes pair our slowest with their fastest
    assert ratio_range([16.0, 5.0, 4.0, 6.0], [50.0, 30.0, 40.0, 32.0]) == [4.0 / 40.0, 6.0 / 30.0]
    # one step a side: that step
    assert ratio_range([5.0], [25.0]) == [0.2, 0.2]


def test_natural_lengths_are_seeded_capped_and_have_their_mean():
    from bench.harness import natural_lengths
    n = natural_lengths(20000, mean=500, cap=100000, sigma=0.7, seed=0)
    assert n == natural_lengths(20000, mean=500, cap=100000, sigma=0.7, seed=0) != natural_lengths(20000, 500, 100000, 0.7, 1)
    assert abs(sum(n) / len(n) - 500) < 10
    capped = natural_lengths(256, mean=500, cap=1536, sigma=0.7, seed=0)
    assert max(capped) <= 1536 and min(capped) >= 1


@pytest.mark.parametrize("share", [True, False])
def test_frozen_trunk_reused_by_the_train_forward_gives_the_same_logprobs_and_grads(share, monkeypatch):
    """With the adapter on the top layer only, the layer below is a frozen trunk: the train forward
    that starts from the trunk kept by a no-grad forward (the scorer's pass) computes the same log-probs and
    gradients as a forward from the embeddings."""
    monkeypatch.setattr(logprob, "shares_prompts", lambda seqs: share)  # both forwards
    model = spread(tiny_qwen3())  # two layers: layer 0 is the trunk
    tok = synthetic_tokenizer(V)
    lora = perturbed_lora(model, last_layers=1)
    assert logprob.trunk_depth(model) == len(arch.arch(model).layers) - 1 >= 1
    ps = prompts(2) * 2 + prompts(1, seed=3)  # two prompts shared by two rows each
    comps = rollout.generate(model, tok, ps, 12, 1.0, batch_size=5, lora=lora)
    seqs = rollout.pack([tok(p, add_special_tokens=False)["input_ids"] for p in ps], comps, 0)
    with torch.no_grad(), lora.sampling([False, True, False, True, False]):
        _, _, trunk = logprob.token_logprobs(model, seqs, return_trunk=True)
    assert not any(t.requires_grad for t in (trunk if share else [trunk]))

    def run(**kw):
        for p in lora.parameters():
            p.grad = None
        with lora.masked(["keep", "absorb", "route", "keep", "route"]):
            logp, _ = logprob.token_logprobs(model, seqs, **kw)
        (logp * torch.linspace(-1, 1, logp.numel()).view_as(logp)).sum().backward()
        return logp.detach(), [p.grad.clone() for p in lora.parameters()]

    ref, ref_g = run()
    got, g = run(trunk=trunk)
    assert torch.equal(got, ref)
    for a, b in zip(g, ref_g):
        assert torch.equal(a, b)


@pytest.mark.parametrize("share", [True, False])
def test_the_trunk_of_some_rows_is_cut_from_the_batchs_trunk(share, monkeypatch):
    """train.sample_forward runs a few rows of a micro-batch from the scorer's trunk: the
    trunk cut to those rows (logprob.trunk_rows) gives the log-probs of a forward of those rows
    from the embeddings. The rows leave out the longest prompt (the cut prompts lose padding
    columns), a whole group and part of another (the cut keeps each row's prompt and tokens)."""
    monkeypatch.setattr(logprob, "shares_prompts", lambda seqs: share)
    model = spread(tiny_qwen3())
    tok = synthetic_tokenizer(V)
    lora = perturbed_lora(model, last_layers=1)
    ps = [p for p in prompts(3, lo=3, hi=14) for _ in range(3)]  # 3 groups of 3 rows, ragged prompts
    comps = rollout.generate(model, tok, ps, 10, 1.0, batch_size=9, lora=lora)
    comps[4] = comps[4][:2]
    seqs = rollout.pack([tok(p, add_special_tokens=False)["input_ids"] for p in ps], comps, 0)
    longest = max(range(3), key=lambda u: len(tok(ps[3 * u], add_special_tokens=False)["input_ids"]))
    rows = [i for i in range(9) if i // 3 != longest][1:]  # a partial group, then a whole one
    with torch.no_grad(), lora.sampling([False] * 9):
        _, _, trunk = logprob.token_logprobs(model, seqs, return_trunk=True)
    sub = seqs.rows(rows)
    cut = logprob.trunk_rows(seqs, trunk, rows)
    if share:
        assert cut[0].shape[1] < trunk[0].shape[1]  # the longest prompt's padding columns are gone
    zones = ["keep", "route", "absorb", "route", "keep"][:len(rows)]
    with torch.no_grad(), lora.masked(zones):
        ref, ref_mask = logprob.token_logprobs(model, sub)
        got, mask = logprob.token_logprobs(model, sub, trunk=cut)
    assert torch.equal(mask, ref_mask)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="ascend"):
        logprob.trunk_rows(seqs, trunk, rows[::-1])


@pytest.mark.parametrize("fused_adapter,share,ragged,varlen,family", [
    (True, True, True, "never", "llama"), (False, True, True, "never", "llama"), (True, False, True, "never", "llama"),
    (True, True, False, "never", "llama"), (False, True, False, "never", "llama"), (True, True, True, "always", "llama"),
    (False, True, False, "always", "llama"), (True, True, True, "always", "qwen2"), (True, False, True, "never", "qwen2")])
def test_rows_sharing_a_prompt_compute_it_once_and_match_the_plain_forward(fused_adapter, share, ragged, varlen,
                                                                          family, monkeypatch):
    """Groups of rollouts share their prompt: the two-pass forward (each distinct prompt once per
    routing mask, completions packed and attending to its K/V) gives the plain forward's log-probs,
    gradients and pooled gate activations, with keep / absorb / route rows mixed inside a group and
    completions of several lengths. ragged False: prompts of one length, so no key is padding and
    attention is causal from the lower right without a mask. (share False: the one-pass forward a
    GPU uses for small micro-batches, on the same rows.) varlen "always": the completion pass in
    the variable-length layout a GPU uses (each row's real prompt keys, then its own tokens),
    attended here row by row; "never": in groups of rows of like length."""
    monkeypatch.setattr(logprob, "shares_prompts", lambda seqs: share)
    monkeypatch.setattr(logprob, "VARLEN", varlen)
    model = spread(TINY[family]())
    tok = synthetic_tokenizer(V)
    lora = perturbed_lora(model)
    even = [" ".join(f"t{20 + (7 * i + j) % 70}" for j in range(9)) for i in range(3)]  # 9 tokens each
    ps = [p for p in (prompts(3) if ragged else even) for _ in range(4)]  # 3 groups of G = 4
    comps = rollout.generate(model, tok, ps, 10, 1.0, batch_size=12, lora=lora)
    comps[1], comps[6] = comps[1][:3], comps[6][:1]  # ragged completions inside a group
    seqs = rollout.pack([tok(p, add_special_tokens=False)["input_ids"] for p in ps], comps, 0)
    sp = logprob.split(seqs)
    assert sp.prompt_ids.shape[0] == 3 and sp.owner.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert bool(sp.prompt_mask.all()) != ragged
    zones = ["keep", "route", "absorb", "route", "keep", "keep", "keep", "keep", "route", "absorb", "absorb", "keep"]

    def run(fn):
        for p in lora.parameters():
            p.grad = None
        with lora.masked(zones):
            logp, mask = fn(model, seqs)
        (logp * torch.linspace(-1, 1, logp.numel()).view_as(logp)).sum().backward()
        return logp.detach(), mask, [p.grad.clone() for p in lora.parameters()]

    ref, ref_mask, ref_g = run(logprob.reference_token_logprobs)
    got, mask, g = run(lambda m, s: logprob.token_logprobs(m, s, fused_adapter=fused_adapter))
    assert torch.equal(mask, ref_mask)
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
    for a, b in zip(g, ref_g):
        assert (a - b).norm() <= 1e-4 * b.norm()
    deploy = [i % 2 == 0 for i in range(12)]
    with torch.no_grad():
        with lora.sampling(deploy), lora.capture(seqs.pool_weights()) as ref_pooled:
            ref_old, _ = logprob.reference_token_logprobs(model, seqs)
        with lora.sampling(deploy), lora.capture(seqs.pool_weights()) as pooled:
            old, _ = logprob.token_logprobs(model, seqs, fused_adapter=fused_adapter)
    torch.testing.assert_close(old, ref_old, atol=1e-5, rtol=1e-5)
    for k in ref_pooled:
        torch.testing.assert_close(pooled[k], ref_pooled[k], atol=1e-5, rtol=1e-4)


def test_bench_command_runs_a_preset_with_overrides_on_the_cpu(tmp_path):
    """`python -m bench.harness PRESET OUT key=value`: the paper preset shrunk to the tiny model
    runs a whole step (one generation chunk in prompt slots of 4 rows), the json records the
    overrides, and an unknown key is refused by name."""
    import json

    from bench import harness as bench
    out = tmp_path / "paper_tiny.json"
    bench.main(["paper", str(out), "model='qwen3-tiny-random'", "batch=8", "group=4", "prompt_len=20",
                "new_tokens=12", "micro_batch=4", "r=2", "keep_layers=1", "steps=1"])
    res = json.loads(out.read_text())
    assert res["shape"]["keep_layers"] == 1 and res["shape"]["gen_batch"] == 8
    assert res["generation"]["decode_floor_shared_prompt_s"] < res["generation"]["decode_floor_s"]
    assert res["step"]["steps_run"] == 1 and res["step"]["step"] > 0
    with pytest.raises(SystemExit, match="keep_layerz"):
        bench.main(["paper", str(out), "keep_layerz=3"])


def test_bench_natural_lengths_end_rows_at_their_length_and_shrink_the_batch(tmp_path):
    """paper_natural shrunk to the tiny model: rows end at their drawn lengths, the engine
    decodes in smaller shapes as they finish, and the floor counts only the running rows."""
    import json

    from bench import harness as bench
    out = tmp_path / "natural.json"
    common = ["model='qwen3-tiny-random'", "batch=16", "group=4", "prompt_len=20", "new_tokens=200",
              "micro_batch=4", "r=2", "keep_layers=1"]
    bench.main(["paper_natural", str(out), *common, "length_mean=60", "steps=1"])
    res = json.loads(out.read_text())
    lengths = bench.natural_lengths(16, 60, 200, 0.7, 0)
    assert res["lengths"]["tokens"] == sum(lengths) and res["lengths"]["max"] == max(lengths) > 128
    assert len(res["generation"]["shapes"][0]) > 1  # compacted at least once
    bench.main(["paper", str(tmp_path / "forced.json"), *common, "steps=0"])
    forced = json.loads((tmp_path / "forced.json").read_text())
    assert res["generation"]["decode_floor_s"] < forced["generation"]["decode_floor_s"]
    with pytest.raises(InputError, match="length_mean"):
        bench.bench(model="qwen3-tiny-random", batch=4, group=2, new_tokens=8, length_mean=4, trl=True,
                    hf_tokens=None, out_json=None)


def test_rows_of_a_prompt_slot_sample_their_own_tokens():
    """At temperature 1 the R rows of a prompt slot share the prompt's K/V but not their draws:
    each row samples its own first token and its own continuation (one draw per slot, repeated,
    would make every row of a group the same rollout)."""
    model = tiny_qwen3()  # default init: nearly flat logits over 97 tokens
    tok = synthetic_tokenizer(V)
    ps = [p for p in prompts(2, seed=7) for _ in range(8)]
    torch.manual_seed(0)
    out = decode.generate(model, tok, ps, 6, 1.0, batch_size=16)
    assert next(iter(decode._ENGINE.values())).R == 8
    for g in (out[:8], out[8:]):
        assert len({row[0] for row in g}) > 1
        assert len({tuple(row) for row in g}) == 8


@pytest.mark.parametrize("share", [True, False])
def test_keep_layers_checkpoints_all_but_the_top_layers(share, monkeypatch):
    """In a checkpointed micro-batch, keep_layers = k leaves the top k adapted layers out of the
    checkpoint (their activations kept) and checkpoints the others, on both forwards."""
    monkeypatch.setattr(logprob, "shares_prompts", lambda seqs: share)
    monkeypatch.setattr(logprob, "CHECKPOINT_ABOVE_TOKENS", 0)
    calls = []
    real = logprob.checkpoint

    def counting(fn, *args, **kw):
        if fn in (logprob._layer_forward, logprob._two_pass_layer):
            calls.append(args[0])  # the decoder layer
        return real(fn, *args, **kw)

    monkeypatch.setattr(logprob, "checkpoint", counting)
    model = spread(make_tiny_llama(vocab=V))
    tok = synthetic_tokenizer(V)
    lora = perturbed_lora(model)
    layers = list(arch.arch(model).layers)
    ps = prompts(3)
    comps = rollout.generate(model, tok, ps, 6, 1.0, batch_size=3, lora=lora)
    seqs = rollout.pack([tok(p, add_special_tokens=False)["input_ids"] for p in ps], comps, 0)
    for keep in range(len(layers) + 1):
        calls.clear()
        with lora.masked(["keep", "absorb", "route"]):
            logprob.token_logprobs(model, seqs, keep_layers=keep)
        assert calls == layers[:len(layers) - keep]


def test_the_fused_forward_is_selected_by_the_routing_state_not_by_patched_forwards(monkeypatch):
    """During the fused forward and its checkpointed recompute every lora2r Linear computes with
    FusedDelta, the variant the routing state names, and no module's forward is replaced; the
    state's variant is back to ExactDelta once the forward returns."""
    monkeypatch.setattr(logprob, "CHECKPOINT_ABOVE_TOKENS", 0)
    model = spread(tiny_qwen3())
    lora = perturbed_lora(model)
    seen = []

    def hook(mod, args):
        assert not any("forward" in vars(m) for m in model.modules())
        seen.append(mod.state.variant)

    for m in lora.modules.values():
        m.register_forward_pre_hook(hook)
    ps = prompts(3)
    seqs = rollout.pack([synthetic_tokenizer(V)(p, add_special_tokens=False)["input_ids"] for p in ps],
                        [[5, 6, 7], [8, 9], [10]], 0)
    with lora.masked(["keep", "absorb", "route"]):
        logp, _ = logprob.token_logprobs(model, seqs)
    n_forward = len(seen)
    assert lora.state.variant is ad.ExactDelta
    logp.sum().backward()
    assert len(seen) > n_forward  # the recompute ran, under the forward's variant
    assert set(seen) == {ad.FusedDelta}


def test_select_takes_the_fast_path_where_the_engine_runs_the_model_and_says_once_why_not(capsys):
    from peft import LoraConfig, inject_adapter_in_model

    model = tiny_qwen3()
    ad.attach(model, r=2, seed=0)
    assert fastgen.supports(model) is None and fastgen.supports(make_tiny_llama()) is None
    assert fastgen.select(model, True) is fastgen.FAST and fastgen.select(model, False) is fastgen.REFERENCE
    assert capsys.readouterr().err == ""
    peft = inject_adapter_in_model(LoraConfig(r=2, target_modules=["v_proj"]), make_tiny_llama(vocab=V))
    reason = fastgen.supports(peft)
    assert "layer 0 self_attn.v_proj" in reason and "peft" in reason
    assert all(fastgen.select(peft, True) is fastgen.REFERENCE for _ in range(3))
    err = capsys.readouterr().err
    assert err.count("fast path off") == 1 and reason in err  # once, naming the part
    cfg = Qwen3Config(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=8, use_sliding_window=True,
                      sliding_window=8, max_window_layers=0)
    assert "sliding_attention" in fastgen.supports(Qwen3ForCausalLM(cfg))
    # Qwen2: biased q, k, v and an untied head run; a window on the upper layers (max_window_layers)
    # and a rotation whose tables follow the call's length do not
    assert fastgen.supports(tiny_qwen2()) is None
    assert fastgen.supports(tiny_qwen2(use_sliding_window=True, max_window_layers=2)) is None  # a window on no layer
    assert "sliding_attention" in fastgen.supports(tiny_qwen2(use_sliding_window=True, max_window_layers=1))
    dynamic = tiny_qwen2(rope_parameters={"rope_type": "dynamic", "rope_theta": 1e6, "factor": 2.0})
    assert "'dynamic'" in fastgen.supports(dynamic)


def test_the_reference_backend_takes_the_fast_paths_keywords():
    """train's forwards pass keep_layers, return_trunk and trunk whichever backend runs them: the
    reference one computes reference_token_logprobs and hands out no trunk."""
    model = spread(make_tiny_llama(vocab=V))
    lora = perturbed_lora(model)
    tok = synthetic_tokenizer(V)
    ps = prompts(3)
    seqs = rollout.pack([tok(p, add_special_tokens=False)["input_ids"] for p in ps], [[5, 6, 7], [8, 9], [10]], 0)
    be = fastgen.REFERENCE
    with torch.no_grad(), lora.masked(["keep", "absorb", "route"]):
        ref, ref_mask = logprob.reference_token_logprobs(model, seqs)
        logp, mask = be.token_logprobs(model, seqs, keep_layers=1)
        old, _, trunk = be.token_logprobs(model, seqs, return_trunk=True)
        again, _ = be.token_logprobs(model, seqs, trunk=trunk)
    assert trunk is None
    for t in (logp, old, again):
        assert torch.equal(t, ref)
    assert torch.equal(mask, ref_mask)
    assert be.generate is rollout.generate and fastgen.FAST.generate is decode.generate


def test_bench_step_times_trains_own_step_functions(monkeypatch):
    """The bench's GRPO step runs train.frozen_acts, then train.update, the function train() calls
    for the rest of its step (train.sample_forward, train.train_forward_backward, clip, AdamW), so a
    change to train's step is what it times, on its synthetic rollouts; the optimizer moves the
    adapter, and each of update's phases has its time."""
    from bench import harness as bench
    from vgrout.train import loop as train

    calls = []
    for name in ("frozen_acts", "update", "sample_forward", "train_forward_backward"):
        real = getattr(train, name)
        monkeypatch.setattr(train, name, lambda *a, _real=real, _name=name, **kw: calls.append(_name) or _real(*a, **kw))
    model, _ = bench.build_model("qwen3-tiny-random", "cpu", seed=0)
    lora = ad.attach(model, r=2, seed=0)
    opt = torch.optim.AdamW(lora.parameters(), lr=1e-2)
    before = [p.detach().clone() for p in lora.parameters()]
    ps = bench.random_prompts(2, 10, 512, group=4)
    t, comp = bench.grpo_step(lora, opt, ps, group=4, new_tokens=6, micro_batch=4, gen_batch=8, device="cpu", seed=0)
    assert calls == ["frozen_acts", "update", "sample_forward", "train_forward_backward"]
    assert comp.shape == (8, 6) and t["step"] > 0
    assert all(t[phase] > 0 for phase in ("sample_forward", "train_fwd_bwd", "optimizer")), t
    assert any(not torch.equal(a, b) for a, b in zip(before, lora.parameters()))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_compaction_samples_the_tokens_of_the_uncompacted_engine(temperature):
    """Finished rows leave the decode batch (prompt slots and lanes shrink in turn, the lanes
    packed densely: fewer than the slots' query rows) and each row keeps its own noise, so the
    tokens equal the engine's that never compacts, at temperature 0 and at 1; rows end at their
    own length, or at an EOS."""
    model, tok = spread(tiny_qwen3()), synthetic_tokenizer(V)
    lora = perturbed_lora(model)
    ps = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts(6) for _ in range(4)]
    deploy = [i % 8 < 4 for i in range(24)]
    lengths = torch.randint(1, 150, (24,), generator=torch.Generator().manual_seed(3)).tolist()
    kw = dict(batch_size=24, lora=lora, deploy_rows=deploy, pad=0)

    def run(compact_every, **more):
        torch.manual_seed(0)
        shapes = []
        ids = decode.generate_ids(model, ps, 150, temperature, compact_every=compact_every, timings=shapes, **kw, **more)
        return ids, [s for t in shapes for s in t["shapes"]]

    full, shapes = run(None, eos_id=1, ignore_eos=True, lengths=lengths)
    assert shapes == [(6, 4, 24)]
    packed, shapes = run(16, eos_id=1, ignore_eos=True, lengths=lengths)
    assert len(shapes) > 3 and shapes[-1][0] < 6 and shapes[-1][1] < 4  # slots and rows both shrank
    assert any(n < U * R for U, R, n in shapes)  # some steps ran on packed lanes
    assert torch.equal(packed, full)
    # row i holds exactly lengths[i] tokens: the first lengths[i] of the row run to the budget, then pad
    uncut, _ = run(None, eos_id=1, ignore_eos=True)
    for i, n in enumerate(lengths):
        assert torch.equal(full[i, :n], uncut[i, :n]) and (full[i, n:] == 0).all()
    # an EOS ends a row: take the commonest token of the first half as the EOS
    eos = int(full[:, :70][full[:, :70] > 1].mode().values)
    full, _ = run(None, eos_id=eos)
    packed, shapes = run(16, eos_id=eos)
    assert torch.equal(packed, full) and len(shapes) > 1


def test_shape_sizes_waste_at_most_a_third():
    for n in (1, 2, 7, 16, 64):
        sizes = decode.shape_sizes(n)
        assert sizes[0] == 1 and sizes[-1] == n
        assert all(decode._at_least(k, n) <= 1.5 * k for k in range(1, n + 1))


def test_the_completion_pass_projects_the_real_tokens_only():
    """Packed completions: the projections of the two-pass forward see the distinct prompts and
    then exactly the completions' real tokens, however long the longest row is."""
    model = spread(make_tiny_llama(vocab=V))
    tok = synthetic_tokenizer(V)
    ps = [p for p in prompts(2) for _ in range(3)]
    comps = [list(range(2, 2 + n)) for n in (9, 1, 4, 2, 7, 3)]
    seqs = rollout.pack([tok(p, add_special_tokens=False)["input_ids"] for p in ps], comps, 0)
    seen = []
    hook = model.model.layers[0].mlp.down_proj.register_forward_hook(lambda m, i, o: seen.append(i[0].shape[:-1].numel()))
    logprob.token_logprobs(model, seqs)
    hook.remove()
    sp = logprob.split(seqs)
    assert seen == [sp.prompt_ids.numel(), sum(map(len, comps))]


def test_attention_buckets_partition_the_rows_by_length():
    """The completion pass attends in groups of rows of like length: every token in exactly one
    group, each group padded to its own longest row; rows of one length make one group."""
    lengths = [9, 1, 4, 2, 7, 3, 0, 5]
    row = torch.tensor([i for i, n in enumerate(lengths) for _ in range(n)])
    col = torch.tensor([j for n in lengths for j in range(n)])
    groups = logprob.Packing(row, col, len(lengths), 9).buckets(4)
    assert len(groups) == 4
    assert sorted(torch.cat([tok for _, tok, _ in groups]).tolist()) == list(range(len(row)))
    for rows, tok, pk in groups:
        assert pk.width == max(lengths[r] for r in rows.tolist()) and torch.equal(rows[pk.row], row[tok])
    assert [pk.width for _, _, pk in groups] == [1, 3, 5, 9]
    same = logprob.Packing(torch.arange(6).repeat_interleave(4), torch.arange(4).repeat(6), 6, 4).buckets(4)
    assert len(same) == 1 and same[0][2].rows == 6


def test_flash_is_chosen_only_where_it_runs_and_an_unknown_varlen_setting_is_refused(monkeypatch):
    """logprob.flash_runs: a GPU, bf16 / fp16, a head size flash takes; a VARLEN outside its three
    settings fails naming itself instead of falling back silently."""
    cpu = torch.device("cpu")
    assert not logprob.flash_runs(cpu, torch.bfloat16, 128)
    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8:
        gpu = torch.device("cuda")
        assert logprob.flash_runs(gpu, torch.bfloat16, 128) and logprob.flash_runs(gpu, torch.float16, 64)
        assert not logprob.flash_runs(gpu, torch.float32, 128)
        assert not logprob.flash_runs(gpu, torch.bfloat16, 320) and not logprob.flash_runs(gpu, torch.bfloat16, 100)
    monkeypatch.setattr(logprob, "shares_prompts", lambda seqs: True)
    monkeypatch.setattr(logprob, "VARLEN", "sometimes")
    model = spread(tiny_qwen3())
    seqs = rollout.pack([[5, 6, 7]] * 2, [[8, 9], [10]], 0)
    with pytest.raises(ValueError, match="logprob.VARLEN = 'sometimes'"):
        logprob.token_logprobs(model, seqs)


def test_varlen_layout_under_a_frozen_trunk_with_empty_rows_and_recompute_matches_the_plain_forward(monkeypatch):
    """The variable-length layout where a run meets it: the frozen trunk's layer (rows mapped to
    their prompt, not to a key of prompt and mask), a row with no completion token (no queries,
    left out of the layout), every adapted layer checkpointed and recomputed in the backward, the
    train forward from the trunk that the no-grad forward kept, and that trunk cut to a few rows:
    each gives the plain forward's log-probs and gradients."""
    monkeypatch.setattr(logprob, "shares_prompts", lambda seqs: True)
    monkeypatch.setattr(logprob, "VARLEN", "always")
    monkeypatch.setattr(logprob, "CHECKPOINT_ABOVE_TOKENS", 0)
    model = spread(tiny_qwen3())  # two layers: layer 0 is the trunk
    tok = synthetic_tokenizer(V)
    lora = perturbed_lora(model, last_layers=1)
    ps = [p for p in prompts(3, lo=3, hi=14) for _ in range(3)]  # 3 groups of 3 rows, ragged prompts
    comps = rollout.generate(model, tok, ps, 10, 1.0, batch_size=9, lora=lora)
    comps[4], comps[7] = [], comps[7][:1]
    seqs = rollout.pack([tok(p, add_special_tokens=False)["input_ids"] for p in ps], comps, 0)
    zones = ["keep", "route", "absorb", "route", "keep", "keep", "absorb", "route", "keep"]
    with torch.no_grad(), lora.sampling([i % 2 == 0 for i in range(9)]):
        _, _, trunk = logprob.token_logprobs(model, seqs, return_trunk=True)

    def run(fn, **kw):
        for p in lora.parameters():
            p.grad = None
        with lora.masked(zones):
            logp, mask = fn(model, seqs, **kw)
        (logp * torch.linspace(-1, 1, logp.numel()).view_as(logp)).sum().backward()
        return logp.detach(), mask, [p.grad.clone() for p in lora.parameters()]

    ref, ref_mask, ref_g = run(logprob.reference_token_logprobs)
    for kw in ({}, {"trunk": trunk}):
        got, mask, g = run(logprob.token_logprobs, **kw)
        assert torch.equal(mask, ref_mask) and not mask[4].any()
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
        for a, b in zip(g, ref_g):
            assert (a - b).norm() <= 1e-4 * b.norm()
    rows = [1, 3, 4, 7]
    with torch.no_grad(), lora.masked([zones[i] for i in rows]):
        ref_sub, _ = logprob.reference_token_logprobs(model, seqs.rows(rows))
        got_sub, _ = logprob.token_logprobs(model, seqs.rows(rows), trunk=logprob.trunk_rows(seqs, trunk, rows))
    torch.testing.assert_close(got_sub, ref_sub, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="flash's variable-length kernel runs on a GPU")
def test_varlen_flash_gives_the_bucketed_logprobs_and_grads_on_a_gpu(monkeypatch):
    """On a GPU in bf16 the completion pass attends through flash's variable-length kernel; it gives
    the log-probs of the pass in groups of like length (the same model, bf16 rounding apart), and adapter
    gradients as close to the fp32 model's as that pass's are, with ragged prompts and completions and
    keep / absorb / route rows mixed."""
    monkeypatch.setattr(logprob, "shares_prompts", lambda seqs: True)
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=V, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                      max_position_embeddings=512, tie_word_embeddings=True, pad_token_id=0)
    model = Qwen3ForCausalLM(cfg).eval().to("cuda", torch.bfloat16)
    lora = perturbed_lora(model, r=4)
    g = torch.Generator().manual_seed(3)
    ps = [torch.randint(2, V, (n,), generator=g).tolist() for n in (40, 23, 57)]
    ps = [p for p in ps for _ in range(4)]  # 3 groups of G = 4, prompts of three lengths
    comps = [torch.randint(2, V, (n,), generator=g).tolist() for n in (30, 5, 61, 1, 44, 44, 12, 90, 2, 33, 70, 9)]
    seqs = rollout.pack(ps, comps, 0).to("cuda")
    zones = ["keep", "route", "absorb", "route", "keep", "keep", "keep", "keep", "route", "absorb", "absorb", "keep"]

    def run(varlen):
        monkeypatch.setattr(logprob, "VARLEN", varlen)
        for p in lora.parameters():
            p.grad = None
        with lora.masked(zones):
            logp, mask = logprob.token_logprobs(model, seqs)
        (logp.float() * torch.linspace(-1, 1, logp.numel(), device="cuda").view_as(logp)).sum().backward()
        return logp.detach().float(), mask, [p.grad.float().clone() for p in lora.parameters()]

    ref, ref_mask, ref_g = run("never")
    got, mask, grads = run("cuda")
    assert torch.equal(mask, ref_mask)
    torch.testing.assert_close(got, ref, atol=3e-2, rtol=0)
    # the truth: the same model and adapter in fp32 through the bucketed path (flash's kernel is bf16
    # only). Each bf16 path's gradient error is its own attention backend's rounding: since cuDNN's
    # SDPA is off (vgrout.engine), the bucketed path's backward runs on another kernel, and the two
    # bf16 paths differed by 2.07% on the H200 against the former fixed 2% bound. varlen must be as
    # exact as the bucketed path is (a masking or packing error is tens of percent).
    model.float()
    _, _, exact_g = run("never")
    for a, b, t in zip(grads, ref_g, exact_g):
        err_varlen, err_bucketed = ((a - t).norm() / t.norm()).item(), ((b - t).norm() / t.norm()).item()
        assert err_varlen <= max(2 * err_bucketed, 1e-2), (err_varlen, err_bucketed)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs run on a GPU")
def test_a_capture_behind_queued_steps_leaves_their_noise_alone():
    """`decode.capture_graph` captures while steps are still queued (no host sync). Each step draws
    its noise from the generator's graph state; the capture resets that state on its own stream, so
    unless the streams are ordered a queued step draws the first step's noise again. A replayed
    step's draws with a capture in the middle of the queue equal those with no capture; the same
    capture with the streams left unordered (the control) changes some step's draws."""
    dev, n, K = "cuda", 1 << 16, 16
    a = torch.randn(2048, 2048, device=dev) / 45
    noise = torch.zeros(K, n, device=dev)
    k = torch.zeros(1, dtype=torch.long, device=dev)

    def step():
        y = a
        for _ in range(24):  # device work that keeps the queue long while the host captures
            y = y @ a
        noise.index_copy_(0, k, (torch.empty(1, n, device=dev).exponential_() + 0 * y[0, :1]))
        k.add_(1)

    pool, side = torch.cuda.graph_pool_handle(), torch.cuda.Stream()
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        step()
    torch.cuda.current_stream().wait_stream(warm)
    g = decode.capture_graph(step, pool, side)

    def unordered(fn, pool, stream):
        h = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream):
            h.capture_begin(pool=pool)
            fn()
            h.capture_end()
        return h

    def draws(capture):
        torch.cuda.synchronize()
        torch.cuda.manual_seed(1)
        k.zero_()
        for i in range(K):
            g.replay()
            if i == 1:  # the queue restarts at step 2: a step whose own offset is not the first's
                torch.cuda.synchronize()
            if i == K // 2 and capture is not None:
                capture(step, pool, side)
        torch.cuda.synchronize()
        return noise.clone()

    ref = draws(None)
    assert torch.equal(draws(decode.capture_graph), ref)
    assert not torch.equal(draws(unordered), ref)


def kernel_layout(lane_slot: list[int], U: int, dev) -> tuple[torch.Tensor, torch.Tensor]:
    """flashdecode.attend's layout of lanes in prompt slots, in lane order within a slot: slot_lane
    [U, R] (−1: no lane) and lane_qrow [B], a lane given slot −1 being in none (a spare lane)."""
    R = max(Counter(u for u in lane_slot if u >= 0).values())
    slot_lane, lane_qrow, fill = torch.full((U, R), -1), [], [0] * U
    for b, u in enumerate(lane_slot):
        lane_qrow.append(-1 if u < 0 else u * R + fill[u])
        if u >= 0:
            slot_lane[u, fill[u]] = b
            fill[u] += 1
    return slot_lane.to(dev), torch.tensor(lane_qrow, device=dev)


@pytest.mark.skipif(not torch.cuda.is_available() or flashdecode.triton is None,
                    reason="Triton's kernels run on a GPU")
@pytest.mark.parametrize("rows,programs,G", [(64, 1024, 4), (16, 1, 3)])
def test_the_decode_kernel_attends_as_the_matmul_path_on_a_gpu(rows, programs, G, monkeypatch):
    """vgrout.engine.flashdecode's kernels against the engine's batched matmuls, in fp32 (the kernel's
    fp32 products) and bf16: lanes in slots of unequal size and out of order (a packed layout
    after a compaction), a spare lane in no slot (it attends its own keys only), left-padded
    prompts, the written slot at a block's first and last key and mid-block, and scores large
    enough that an unshifted merge would overflow, and a spare slot (no lane: a compaction's
    padding). With the defaults (G = 4) the prompt's and the own keys are split over programs and a
    slot's 24 rows fit one tile; with 16-row tiles and one program's worth (G = 3, not a power of
    two), a slot's 18 rows take two tiles, the second starting mid-lane, and the prompt and the own
    keys one split each (the own kernel writes the output itself). The control: lanes read against
    the wrong slots' prompts."""
    monkeypatch.setattr(flashdecode, "ROWS", rows)
    monkeypatch.setattr(flashdecode, "PROGRAMS", programs)
    monkeypatch.setattr(flashdecode, "PROMPT_PROGRAMS", programs)
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    U, Hkv, Tp, Tc, Dh = 4, 2, 128, 320, 64
    lane_slot = [0, 0, 0, 2, 1, 1, 2, 0, -1, 0, 0]  # slot 1's lanes after slot 2's; slot 0's six; a spare; slot 3 none
    B = len(lane_slot)
    slot_lane, lane_qrow = kernel_layout(lane_slot, U, dev)
    of = torch.tensor(lane_slot, device=dev).clamp(min=0)
    pad = torch.tensor([0, 37, 100, 5], device=dev)
    prompt_ok = torch.arange(Tp, device=dev)[None] >= pad[of][:, None]
    in_slot = torch.tensor([u >= 0 for u in lane_slot], device=dev)
    span = 256
    for dt, tol in ((torch.float32, 3e-5), (torch.bfloat16, 1e-2)):  # fp32: two summation orders, scores up to ~40
        q = (torch.randn(B, Hkv * G, Dh, generator=g, device=dev) * 12 * Dh ** -0.5).to(dt)
        kp, vp = (torch.randn(U, Hkv, Tp, Dh, generator=g, device=dev).to(dt) for _ in range(2))
        kc, vc = (torch.randn(B, Hkv, Tc, Dh, generator=g, device=dev).to(dt) for _ in range(2))
        for written in (0, 63, 64, 127, 171, span - 1):
            slot = torch.tensor([written], device=dev)
            # the matmul path's grid layout: each lane with its own copy of its slot's prompt
            own = (torch.arange(span, device=dev) <= written)[None].expand(B, -1)
            blocked = ~torch.cat([prompt_ok & in_slot[:, None], own], 1)[:, None, None, :]
            ref = decode._decode_attention(q.float(), kp[of].float(), vp[of].float(), kc.float(),
                                           vc.float(), blocked, span)
            got = flashdecode.attend(q, kp, vp, kc, vc, prompt_ok, slot_lane, lane_qrow, slot, span)
            assert got.dtype == dt
            torch.testing.assert_close(got.float(), ref, atol=tol, rtol=0, msg=lambda m: f"written {written}: {m}")
            if written == 0:  # one own key: the prompt carries most of the weight, for every lane in a slot
                wrong = flashdecode.attend(q, kp.roll(1, 0), vp.roll(1, 0), kc, vc, prompt_ok, slot_lane, lane_qrow,
                                           slot, span)
                assert (wrong.float() - ref)[in_slot].abs().amax((1, 2)).min() > 10 * tol


@pytest.mark.skipif(not torch.cuda.is_available() or flashdecode.triton is None,
                    reason="Triton's kernels run on a GPU")
def test_the_fused_silu_product_is_the_eager_one_on_a_gpu():
    """flashdecode.silu_mul against the gated MLP's eager act_fn(g) · u (silu rounded to the
    model's dtype, then the product), with a tail past the last full block. The control: the
    operands swapped."""
    from transformers.activations import SiLUActivation
    g = torch.Generator(device="cuda").manual_seed(0)
    act = SiLUActivation()
    for dt in (torch.float32, torch.bfloat16):
        a, b = (torch.randn(5, 1, 3000, generator=g, device="cuda") * 4).to(dt), torch.randn(5, 1, 3000, device="cuda").to(dt)
        assert flashdecode.fuses_silu(act, a)
        ref, got = act(a) * b, flashdecode.silu_mul(a, b)
        ulp = 2 ** -23 if dt == torch.float32 else 2 ** -7
        torch.testing.assert_close(got, ref, rtol=4 * ulp, atol=1e-6)  # exp's last bits may differ
        if dt == torch.bfloat16:  # those rarely survive the rounding to bf16
            assert (got == ref).float().mean() > 0.99
        assert not torch.allclose(flashdecode.silu_mul(b, a), ref, rtol=0.1)


def _engine_tokens(model, lora, ids, deploy, lengths, attention, monkeypatch):
    monkeypatch.setattr(decode, "ATTENTION", attention)
    monkeypatch.setattr(decode, "FUSED_MLP", attention == "kernel")  # the reference path: no Triton at all
    out = decode.generate_ids(model, ids, 150, 0.0, batch_size=len(ids), lora=lora, deploy_rows=deploy,
                              eos_id=1, pad=0, ignore_eos=True, lengths=lengths)
    decode.release()
    return out


@pytest.mark.skipif(not torch.cuda.is_available() or flashdecode.triton is None,
                    reason="Triton's kernels run on a GPU")
@pytest.mark.parametrize("arch_kind", ["qwen3", "qwen3_eager_norm", "llama", "qwen2"])
def test_the_engine_samples_the_same_tokens_through_the_kernels_on_a_gpu(arch_kind, monkeypatch):
    """The engine's greedy tokens through flashdecode's kernels (the attention and the fused gated
    MLP) equal its matmul path's with the eager MLP, in fp32,
    with a perturbed lora2r adapter, deploy rows mixed, ragged prompts and rows ending at their own
    lengths, so the lanes are compacted and packed (Engine.slot_lane and lane_qrow rewritten at each layout):
    a Qwen3 (its q/k norms in the rotation kernel; with arch.FAST_NORM off, the eager norms), a
    Llama (no q/k norms) and a Qwen2 as Qwen2.5-Coder lays it out (biased q, k, v, 14 query heads on
    2 KV heads, an untied head, rope_theta 1e6), head dim 64, which the kernels serve."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from bench.harness import natural_lengths
    torch.manual_seed(0)
    common = dict(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=512)
    if arch_kind == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common, tie_word_embeddings=False))
    elif arch_kind == "qwen2":
        model = tiny_qwen2(**{**common, "num_attention_heads": 14})
    else:
        model = Qwen3ForCausalLM(Qwen3Config(**common, tie_word_embeddings=True, pad_token_id=0))
    monkeypatch.setattr(arch, "FAST_NORM", arch_kind != "qwen3_eager_norm")
    model = model.eval().to("cuda")
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)  # well-separated logits: greedy ties would be luck
    lora = ad.attach(model, r=2, seed=0)
    with torch.no_grad():
        for m in lora.modules.values():
            m.B.add_(0.5 * torch.randn_like(m.B))
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(2, 256, (int(n),), generator=g).tolist() for n in (5, 70, 33, 130, 9, 64)]
    ids = [p for p in prompts for _ in range(4)]  # slots of four rows
    deploy = [i // 4 % 3 == 0 for i in range(len(ids))]
    assert flashdecode.usable(next(model.parameters()), 192, 2, 64)
    lengths = natural_lengths(len(ids), 60, 150, 0.8, seed=5)
    kernel = _engine_tokens(model, lora, ids, deploy, lengths, "kernel", monkeypatch)
    matmul = _engine_tokens(model, lora, ids, deploy, lengths, "matmul", monkeypatch)
    assert torch.equal(kernel, matmul)


@pytest.mark.skipif(not torch.cuda.is_available() or flashdecode.triton is None,
                    reason="CUDA graphs and Triton's kernels run on a GPU")
def test_the_engine_on_the_qwen2_0_5b_shape_samples_the_models_argmax_and_gives_its_logprobs_on_a_gpu():
    """The student's layout at its size: Qwen2.5-Coder-0.5B-Instruct's config (24 layers, hidden
    896, 14 / 2 heads, biased q, k, v, an untied head, rope_theta 1e6, vocab 151936) with random
    weights (nothing is downloaded on the GPU machine), in fp32, a perturbed adapter on every
    projection, deploy and full rows mixed, rows ending at their own lengths. The engine's greedy
    tokens (prefill, decode steps replayed as CUDA graphs through flashdecode's kernels, rows
    compacted as they end) are the model's argmax under HF's own forward, teacher-forced on the
    engine's sequences, up to a rounding tolerance: over 24 layers an exact comparison with HF
    generate would hinge on near-ties and, after one, on a different continuation. The control:
    random tokens are outside that tolerance. The fast log-probs and adapter gradients on those
    sequences equal the reference forward's."""
    from bench.harness import natural_lengths
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                      num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768, rope_theta=1e6,
                      rms_norm_eps=1e-6, tie_word_embeddings=False, use_sliding_window=False, sliding_window=32768,
                      max_window_layers=24, pad_token_id=0)
    with torch.device("cuda"):
        model = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Linear) and m.bias is not None:
                m.bias.normal_(0, 0.02)  # transformers' init leaves them at zero
    assert fastgen.supports(model) is None
    lora = perturbed_lora(model)
    g = torch.Generator().manual_seed(3)
    ids = [torch.randint(2, cfg.vocab_size, (n,), generator=g).tolist() for n in (5, 70, 33, 130) for _ in range(2)]
    deploy = [i // 2 % 2 == 0 for i in range(8)]
    lengths = natural_lengths(8, 40, 100, 0.8, seed=5)
    out = decode.generate_ids(model, ids, 100, 0.0, batch_size=8, lora=lora, deploy_rows=deploy, eos_id=1, pad=0,
                              ignore_eos=True, lengths=lengths)
    decode.release()
    seqs = rollout.pack(ids, [out[i, :n].tolist() for i, n in enumerate(lengths)], 0).to("cuda")
    Lc = max(lengths)
    with torch.no_grad(), lora.sampling(deploy):
        logits = model(input_ids=seqs.input_ids, attention_mask=seqs.attention_mask,
                       position_ids=logprob.position_ids(seqs.attention_mask), logits_to_keep=Lc + 1).logits[:, :-1]
    mask = seqs.completion_mask[:, -Lc:].bool()
    tokens = seqs.input_ids[:, -Lc:]
    gap = logits.amax(-1) - logits.gather(-1, tokens[..., None])[..., 0]  # 0 where the token is the argmax
    assert gap[mask].max() <= 1e-3, gap[mask].max().item()
    other = torch.randint(2, cfg.vocab_size, tokens.shape, device="cuda")  # the control: any token would not pass
    assert ((logits.amax(-1) - logits.gather(-1, other[..., None])[..., 0])[mask] > 1e-3).float().mean() > 0.99

    zones = ["keep", "absorb", "route", "keep", "route", "absorb", "keep", "route"]

    def run(fn):
        for p in lora.parameters():
            p.grad = None
        with lora.masked(zones):
            logp, _ = fn(model, seqs)
        (logp * torch.linspace(-1, 1, logp.numel(), device="cuda").view_as(logp)).sum().backward()
        return logp.detach(), [p.grad.clone() for p in lora.parameters()]

    ref, ref_g = run(logprob.reference_token_logprobs)
    got, grads = run(logprob.token_logprobs)
    torch.testing.assert_close(got, ref, atol=1e-4, rtol=1e-4)
    for a, b in zip(grads, ref_g):
        assert (a - b).norm() <= 1e-3 * b.norm(), ((a - b).norm() / b.norm()).item()


@pytest.mark.skipif(not torch.cuda.is_available() or flashdecode.triton is None,
                    reason="Triton's kernels run on a GPU")
def test_the_rotation_kernel_norms_rotates_and_writes_the_cache_as_the_eager_chain_on_a_gpu():
    """flashdecode.rotate_into_cache against the engine's eager chain, written out here as
    `decode._qkv` runs it (the per-head norm and its weights, `_rotation`'s tables; q's scaling, the
    cache writes at the step's slot), in
    fp32 and bf16, with and without Qwen3's norm; the cache's other slots untouched. The control:
    the kernel without the norm is far from the chain with it."""
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    B, H, Hkv, Dh, Tc, eps = 5, 8, 2, 64, 40, 1e-6
    scaling = Dh ** -0.5
    pos = torch.tensor([[3], [17], [0], [250], [9]], device=dev)
    inv = 1.0 / (10000 ** (torch.arange(0, Dh, 2, device=dev).float() / Dh))
    ang = torch.cat([pos[..., None] * inv, pos[..., None] * inv], -1)  # [B, 1, Dh]
    cos, sin = decode._rotation(ang.cos(), ang.sin())
    for dt, atol, rtol in ((torch.float32, 1e-5, 1e-5), (torch.bfloat16, 2e-3, 8e-3)):  # bf16: one rounding
        y = 3 * torch.randn(B, 1, (H + 2 * Hkv) * Dh, generator=g, device=dev)
        y[:, :, :Dh] *= 1e-4  # q's first head near zero: its norm is set by the epsilon
        y = y.to(dt)
        w = (1 + 0.3 * torch.randn(H + Hkv, Dh, generator=g, device=dev)).to(dt)
        slot = torch.tensor([11], device=dev)
        for qk_w in (w, None):
            heads = y.view(B, 1, H + 2 * Hkv, Dh).float()
            qk = heads[:, :, :H + Hkv]
            if qk_w is not None:
                qk = F.rms_norm(qk, (Dh,), eps=eps) * qk_w.float()
            qk = torch.addcmul(qk * cos.float(), qk.roll(Dh // 2, -1), sin.float())
            kc, vc = (torch.randn(B, Hkv, Tc, Dh, generator=g, device=dev).to(dt) for _ in range(2))
            kc0, vc0 = kc.clone(), vc.clone()
            q = flashdecode.rotate_into_cache(y, qk_w, eps, cos, sin, scaling, kc, vc, slot, H)
            torch.testing.assert_close(q.float(), qk[:, 0, :H] * scaling, atol=atol, rtol=rtol)
            torch.testing.assert_close(kc[:, :, 11].float(), qk[:, 0, H:], atol=atol, rtol=rtol)
            assert torch.equal(vc[:, :, 11], y.view(B, H + 2 * Hkv, Dh)[:, H + Hkv:])
            others = torch.arange(Tc, device=dev) != 11
            assert torch.equal(kc[:, :, others], kc0[:, :, others]) and torch.equal(vc[:, :, others], vc0[:, :, others])
            if qk_w is not None:  # the control
                unnormed = flashdecode.rotate_into_cache(y, None, eps, cos, sin, scaling, kc, vc, slot, H)
                assert (unnormed.float() - qk[:, 0, :H] * scaling).abs().max() > 0.1
