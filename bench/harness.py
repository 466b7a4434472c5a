"""`python -m bench.harness PRESET OUT [key=value ...]` (from the repository root): time one GRPO step of the lora2r student at a given shape, on the spot.

What it measures, all on the same GPU in one run:
- the two ceilings: device-to-device copy bandwidth (bytes read + written) and bf16 matmul rate;
- rollout generation with the fast path (vgrout.engine.decode): tokens/s, and its ratio to the decode
  floor = Σ over decode steps of (weight bytes + KV-cache bytes read) / copy bandwidth;
- the plain HF `generate` path (what vgrout.engine.rollout.generate runs), timed at two short lengths
  and extrapolated to the full length (its cost per step is flat in the step);
- the frozen scorer's pass, logπ_sample of the rows whose training mask differs from their
  sampling mode, and the train forward+backward under keep/absorb/route masks (train.frozen_acts,
  train.sample_forward and train.train_forward_backward: train's own step), the optimizer step,
  the whole step, and peak GPU memory;
- optionally TRL's GRPOTrainer on the same shape (bench/trl_grpo.py, its own process).

Weights are not needed to time: "qwen3-4b-random" is Qwen3-4B's published shape with random
weights. Completions are forced to full length (no early EOS) so runs compare like for like.
Rewards are random (grading runs on the CPU beside the GPU work and is not timed here).
"""
from __future__ import annotations

import datetime
import gc
import math
import os
import sys
import time
from types import SimpleNamespace

import torch

from vgrout import config
from vgrout.engine import adapter as ad
from vgrout.engine import decode, logprob, rollout
from vgrout.engine.arch import arch
from vgrout.io import InputError, write_json
from vgrout.routing import directions
from vgrout.train import grpo
from vgrout.train import loop as train

# Qwen/Qwen3-4B config.json: 36 layers, hidden 2560, 32 query / 8 KV heads of dim 128, MLP 9728,
# vocab 151936, tied embeddings, RMSNorm eps 1e-6, rope theta 1e6.
QWEN3_4B = dict(vocab_size=151936, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                max_position_embeddings=40960, rms_norm_eps=1e-6, tie_word_embeddings=True,
                rope_parameters={"rope_type": "default", "rope_theta": 1e6})
QWEN3_TINY = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                  max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=True,
                  rope_parameters={"rope_type": "default", "rope_theta": 1e6})
MODELS = {"qwen3-4b-random": QWEN3_4B, "qwen3-tiny-random": QWEN3_TINY}
PAD, EOS = 0, 1  # the synthetic tokenizer's special ids


# -- model, tokenizer, prompts ------------------------------------------------------------------

def synthetic_tokenizer(vocab_size: int, eos_id: int = EOS):
    """A word-level tokenizer whose tokens are "t<id>": exact round trips, any vocab size, offline.
    TRL needs a tokenizer; both sides of the comparison get this one."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(vocab_size)}
    del vocab[f"t{PAD}"]
    vocab["<pad>"] = PAD
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.decoder = decoders.WordPiece(prefix="##")  # joins tokens with spaces
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token=f"t{eos_id}")
    tok.padding_side = "left"
    return tok


def build_model(name: str, device: str | torch.device, dtype: torch.dtype | None = None, seed: int = 0):
    """A random-weight model of a published shape, built directly on the device."""
    from transformers import AutoModelForCausalLM, Qwen3Config
    if name not in MODELS:
        raise InputError(f"bench model '{name}' unknown; valid: {sorted(MODELS)}")
    device = torch.device(device)
    dtype = dtype or (torch.bfloat16 if device.type == "cuda" else torch.float32)
    cfg = Qwen3Config(**MODELS[name], pad_token_id=PAD, eos_token_id=EOS, bos_token_id=None)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model.generation_config.pad_token_id = PAD
    model.generation_config.eos_token_id = EOS
    return model.eval(), synthetic_tokenizer(cfg.vocab_size)


def random_prompts(n_prompts: int, prompt_len: int, vocab: int, seed: int = 0, group: int = 1) -> list[list[int]]:
    """n_prompts random prompts, each repeated group times in a row (a GRPO group per prompt)."""
    g = torch.Generator().manual_seed(seed)
    return [p for p in torch.randint(EOS + 1, vocab, (n_prompts, prompt_len), generator=g).tolist() for _ in range(group)]


# -- ceilings and floor -----------------------------------------------------------------------

def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _median_time(fn, device, reps: int = 10, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def ceilings(device) -> dict:
    """Copy bandwidth (bytes read + written per second) and bf16 matmul rate, measured here."""
    cuda = torch.device(device).type == "cuda"
    n = (1 << 30) if cuda else (1 << 26)
    x = torch.randn(n // 4, device=device)
    y = torch.empty_like(x)
    t = _median_time(lambda: y.copy_(x), device)
    copy_bps = 2 * x.numel() * 4 / t
    del x, y
    k = 8192 if cuda else 1024
    dt = torch.bfloat16 if cuda else torch.float32
    a, b = torch.randn(k, k, device=device, dtype=dt), torch.randn(k, k, device=device, dtype=dt)
    t = _median_time(lambda: a @ b, device)
    return {"copy_TBps": copy_bps / 1e12, "matmul_TFLOPs": 2 * k ** 3 / t / 1e12}


def weight_bytes(model) -> int:
    """Bytes of the base model's weights (a tied embedding counted once: the head reads it)."""
    seen, total = set(), 0
    for n, p in model.named_parameters():
        if id(p) in seen or n.endswith((".A", ".B")):
            continue
        seen.add(id(p))
        total += p.numel() * p.element_size()
    return total


def adapter_bytes(lora: ad.Lora2r) -> int:
    return sum(t.numel() * t.element_size() for m in lora.modules.values() for t in (m.A, m.B, m.A0, m.B0))


def decode_floor(w_bytes: int, kv_per_token: int, lengths: list[int], prompt_len: int,
                 copy_bps: float, group: int = 1) -> float:
    """Seconds to read, at each decode step, every weight once plus the KV cache of every row
    still running (its prompt and its tokens so far), at the measured copy bandwidth. Row i writes
    lengths[i] tokens: the prefill gives the first, decode step s (1..) the (s+1)-th, attending
    prompt_len + s positions, and runs while some row needs it. group > 1: the rows [g·k, g·(k+1))
    share one copy of their prompt's K/V, read once per step while any of them runs (the engine's
    layout). Forced lengths are lengths = [n] * batch."""
    n = torch.tensor(lengths)
    steps = int(n.max()) - 1
    if steps < 1:  # the prefill wrote every token
        return 0.0
    s = torch.arange(1, steps + 1)
    live = (n[None, :] > s[:, None])                                     # [steps, rows]
    if len(lengths) % group:  # a last slot of fewer rows
        live = torch.cat([live, live.new_zeros(steps, group - len(lengths) % group)], 1)
    slots = live.view(steps, -1, group).any(2).sum(1)
    own_reads = int((live.sum(1) * s).sum())
    prompt_reads = int(slots.sum()) * prompt_len
    return (steps * w_bytes + (prompt_reads + own_reads) * kv_per_token) / copy_bps


def natural_lengths(n: int, mean: float, cap: int, sigma: float, seed: int) -> list[int]:
    """n completion lengths from a lognormal of the given mean and log-sd sigma (real GRPO lengths
    are skewed: most rows stop early, a few run to the budget), rounded, at least 1 and at most cap."""
    g = torch.Generator().manual_seed(seed)
    mu = math.log(mean) - sigma ** 2 / 2  # E[exp(N(mu, sigma²))] = mean
    x = torch.exp(mu + sigma * torch.randn(n, generator=g, dtype=torch.float64))
    return x.round().clamp(1, cap).long().tolist()


# -- timed pieces -----------------------------------------------------------------------------

def hf_generate_time(model, lora, prompts: list[list[int]], n_new: int, device) -> float:
    """Wall time of the plain HF generate path (as vgrout.engine.rollout.generate calls it) with
    min_new_tokens forcing the full length."""
    ids = torch.tensor(prompts, device=device)
    kw = dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=n_new,
              min_new_tokens=n_new, pad_token_id=PAD, eos_token_id=EOS)
    _sync(device)
    t0 = time.perf_counter()
    with torch.no_grad(), lora.sampling([False] * len(prompts)):
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **kw)
    _sync(device)
    return time.perf_counter() - t0


def step_config(new_tokens: int, micro_batch: int, keep_layers: int = 0, old_micro_batch: int | None = None):
    """The parts of a TrainRun that train's step functions read, at a bench shape."""
    return SimpleNamespace(fast=True, t=config.Train(keep_layers=keep_layers, micro_batch=micro_batch,
                                                     old_micro_batch=old_micro_batch or 0, clip_eps=0.2,
                                                     max_new_tokens=new_tokens, temperature=1.0))


def grpo_step(lora, opt, prompts: list[list[int]], group: int, new_tokens: int, micro_batch: int,
              gen_batch: int, device, seed: int, keep_layers: int = 0,
              peaks: dict | None = None, old_micro_batch: int | None = None,
              lengths: list[int] | None = None) -> tuple[dict, torch.Tensor]:
    """One Dr.GRPO step of the fast path in train()'s order, through train's own step functions:
    generate (synthetic rollouts: random prompts, completions forced to full length, or row i to
    lengths[i] tokens), (grade: random rewards), train.frozen_acts (the gate's scores), random
    zones, then train.update as train() calls it: logπ_sample of the rows whose mask differs from
    their sampling mode (here the keep rows), the masked forward and backward, per-block clip,
    AdamW. peaks: filled with each phase's peak GPU memory (GB)."""
    model, n = lora.model, len(prompts)
    cuda = torch.device(device).type == "cuda"
    cfg = step_config(new_tokens, micro_batch, keep_layers, old_micro_batch)

    def peak(phase):
        if cuda and peaks is not None:
            got = (torch.cuda.max_memory_allocated(device) / 1e9, torch.cuda.max_memory_reserved(device) / 1e9)
            peaks[phase] = tuple(map(max, zip(peaks.get(phase, (0.0, 0.0)), got)))
            torch.cuda.reset_peak_memory_stats(device)

    peak("before")
    t, t0, chunks = {}, time.perf_counter(), []
    comp = decode.generate_ids(model, prompts, new_tokens, temperature=cfg.t.temperature, batch_size=gen_batch,
                               lora=lora, deploy_rows=[False] * n, eos_id=EOS, pad=PAD,
                               ignore_eos=True, timings=chunks, lengths=lengths)
    decode.release()  # as train.py does: the train forward gets the cache's memory
    _sync(device)
    t["generate"] = time.perf_counter() - t0
    t["generate_capture"] = sum(c["capture_s"] for c in chunks)  # host seconds, mostly behind queued decode steps
    peak("generate")

    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(n, generator=g)
    adv = grpo.advantages(rewards, group)
    lengths = lengths or [new_tokens] * n
    seqs = rollout.pack(prompts, [row[:k] for row, k in zip(comp.tolist(), lengths)], PAD)
    zones = [ad.ZONES[i % 3] for i in torch.randperm(n, generator=g).tolist()]
    rollouts = [SimpleNamespace(deploy=False, source="student")] * n  # every row sampled with the quarantine on
    direction = directions.haar_direction({name: torch.empty(m.r) for name, m in lora.modules.items()}, seed)

    t0 = time.perf_counter()  # the frozen scorer's pass (gate.scorer frozen, the default); it keeps the trunks
    acts, trunks = train.frozen_acts(cfg, lora, seqs)
    directions.score(acts, direction)
    _sync(device)
    t["frozen_score"] = time.perf_counter() - t0
    peak("frozen_score")

    last = [time.perf_counter()]

    def mark(phase):  # train.update's phase ends: the device synced, so each phase's time is its own
        _sync(device)
        t[phase] = time.perf_counter() - last[0]
        peak(phase)
        last[0] = time.perf_counter()

    train.update(cfg, lora, opt, seqs, trunks, adv, zones, rollouts, {}, mark)
    t["step"] = sum(v for k, v in t.items() if k != "generate_capture")
    return t, comp


# -- correctness on the device ------------------------------------------------------------------

def self_check(device) -> dict:
    """Greedy tokens of the fast path (CUDA graph on a GPU) vs the plain HF path, fp32, tiny
    Qwen3 with a perturbed lora2r adapter and mixed deploy rows: must be equal."""
    model, tok = build_model("qwen3-tiny-random", device, torch.float32, seed=1)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)  # well-separated logits: greedy ties would be luck, not bugs
    lora = ad.attach(model, r=2, seed=0)
    with torch.no_grad():
        for m in lora.modules.values():
            m.B.add_(0.5 * torch.randn_like(m.B))
    g = torch.Generator().manual_seed(2)
    lens = torch.randint(3, 40, (12,), generator=g).tolist()
    texts = [" ".join(f"t{int(i)}" for i in torch.randint(2, 512, (n,), generator=g)) for n in lens]
    texts = [t for t in texts[:6] for _ in range(2)]  # groups of two: a shared prefill
    deploy = [i % 3 == 0 for i in range(len(texts))]
    n_new = 2 * decode.SPAN - 64  # two decode graphs (spans 128 and 192)
    ref = rollout.generate(model, tok, texts, n_new, 0.0, batch_size=8, lora=lora, deploy_rows=deploy)
    fast = decode.generate(model, tok, texts, n_new, 0.0, batch_size=8, lora=lora, deploy_rows=deploy)
    decode.release()
    out = {"greedy_rows_equal": sum(a == b for a, b in zip(ref, fast)), "rows": len(ref)}
    # finished rows leave the batch: the same tokens as the engine that never compacts. Prompt
    # slots of four rows, one mode each, so the running lanes are packed (fewer lanes than the
    # slots' query rows) as well as shrunk
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts[::2] for _ in range(4)]
    slot_deploy = [i // 4 % 3 == 0 for i in range(len(ids))]
    lengths = natural_lengths(len(ids), 120, 300, 0.8, seed=5)
    kw = dict(batch_size=len(ids), lora=lora, deploy_rows=slot_deploy, eos_id=EOS, pad=PAD, ignore_eos=True,
              lengths=lengths)
    shapes: list = []
    full = decode.generate_ids(model, ids, 300, 0.0, compact_every=None, **kw)
    decode.release()
    packed = decode.generate_ids(model, ids, 300, 0.0, timings=shapes, **kw)
    decode.release()
    out["compacted_rows_equal"] = int((full == packed).all(1).sum())
    out["compacted_rows"] = len(ids)
    out["compacted_shapes"] = [list(s) for s in shapes[0]["shapes"]]  # (slots, rows, lanes)
    if torch.device(device).type == "cuda":
        out["fused_adapter_bf16"] = fused_adapter_check(device)
        out["packed_logprobs_bf16"] = {k: packed_logprob_check(device, k) for k in ("one_prompt_length", "ragged_prompts")}
    return out


def _bf16_tiny_lora(device):
    """The tiny Qwen3 in bf16 with a lora2r adapter moved off its init (both blocks)."""
    model, _ = build_model("qwen3-tiny-random", device, torch.bfloat16, seed=3)
    lora = ad.attach(model, r=4, seed=0)
    with torch.no_grad():
        for m in lora.modules.values():
            m.B.add_(0.05 * torch.randn_like(m.B))
    return model, lora


def _forward_pair(model, lora, seqs, zones, ref: dict, other: dict) -> dict:
    """Log-probs and adapter gradients of logprob.token_logprobs with keywords `other` against
    `ref`, same rows under the same masks: their largest log-prob difference and the gradient's
    relative error."""
    res = []
    for kw in (ref, other):
        for p in lora.parameters():
            p.grad = None
        with lora.masked(zones):
            logp, _ = logprob.token_logprobs(model, seqs, **kw)
        logp.sum().backward()
        res.append((logp.detach().float(), torch.cat([p.grad.flatten() for p in lora.parameters()])))
    (l0, g0), (l1, g1) = res
    return {"logp_max_abs_diff": float((l1 - l0).abs().max()),
            "grad_rel_err": float((g1 - g0).norm() / g0.norm())}


def fused_adapter_check(device) -> dict:
    """bf16 log-probs and adapter gradients of logprob.token_logprobs (Lora2rDelta) against the
    Lora2rLinear forward, same bf16 model, mixed keep/absorb/route rows."""
    model, lora = _bf16_tiny_lora(device)
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(2, 512, (6, 96), generator=g)
    comp = torch.cat([torch.zeros(6, 32), torch.ones(6, 64)], 1).long()
    seqs = rollout.Seqs(ids, torch.ones_like(ids), comp).to(device)
    return _forward_pair(model, lora, seqs, ["keep", "absorb", "route"] * 2,
                         dict(fused_adapter=False), dict(fused_adapter=True))


def packed_logprob_check(device, prompts: str) -> dict:
    """bf16 log-probs and adapter gradients of the two-pass forward (completions packed by their
    real lengths; with prompts of one length, attention causal from the lower right, the flash
    kernel) against the one-pass forward, same rows: groups of 4 sharing a prompt, ragged
    completions, keep/absorb/route rows. Above SHARE_ABOVE_TOKENS, as a GPU takes it."""
    model, lora = _bf16_tiny_lora(device)
    g = torch.Generator().manual_seed(6)
    plens = [600] * 4 if prompts == "one_prompt_length" else [600, 420, 517, 333]
    ps = [torch.randint(2, 512, (n,), generator=g).tolist() for n in plens for _ in range(4)]
    ps = [ps[i - i % 4] for i in range(16)]
    comps = [torch.randint(2, 512, (int(n),), generator=g).tolist() for n in torch.randint(20, 600, (16,), generator=g)]
    seqs = rollout.pack(ps, comps, PAD).to(device)
    assert seqs.input_ids.numel() > logprob.SHARE_ABOVE_TOKENS
    return _forward_pair(model, lora, seqs, [ad.ZONES[i % 3] for i in range(16)],
                         dict(one_pass=True), dict(one_pass=False))


def bf16_agreement(model, lora, prompts, n_new, device) -> dict:
    """bf16 greedy on the big model: fast path vs HF. Different kernels round differently, so
    rows may part after near-ties; reported, not asserted."""
    ids = torch.tensor(prompts, device=device)
    with torch.no_grad(), lora.sampling([False] * len(prompts)):
        ref = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=n_new, min_new_tokens=n_new, pad_token_id=PAD,
                             eos_token_id=EOS)[:, ids.shape[1]:].cpu()
    fast = decode.generate_ids(model, prompts, n_new, 0.0, batch_size=len(prompts), lora=lora,
                               eos_id=EOS, pad=PAD, ignore_eos=True)
    decode.release()
    same = (ref == fast)
    prefix = (same.cumprod(1).sum(1)).float()
    return {"rows_equal": int(same.all(1).sum()), "rows": len(prompts),
            "mean_common_prefix": float(prefix.mean()), "tokens": n_new}


# -- the command --------------------------------------------------------------------------------

def bench(model: str = "qwen3-4b-random", batch: int = 64, prompt_len: int = 300,
          new_tokens: int = 256, group: int = 8, micro_batch: int = 8, r: int = 16,
          gen_batch: int | None = None, keep_layers: int = 0, old_micro_batch: int | None = None,
          steps: int = 2, hf_tokens: tuple[int, int] | None = (8, 40),
          trl: bool = False, check: bool = True, out_json: str | os.PathLike | None = "bench.json",
          device: str | None = None, seed: int = 0, length_mean: float | None = None,
          length_sigma: float = 0.7, compact_every: int | None = decode.COMPACT_EVERY) -> dict:
    """Time the fast path's rollouts and GRPO step at this shape; print a table, write json.
    batch = prompts × group rollouts; r = lora2r block rank (adapter rank 2r); gen_batch rows per
    generation chunk (default: all); keep_layers: the top decoder layers whose activations a
    checkpointed train micro-batch keeps (train.keep_layers); old_micro_batch rows per no-grad
    forward (the scorer's, logπ_sample's; default: micro_batch; train.old_micro_batch); steps GRPO steps (the first warms up when steps > 1);
    hf_tokens: the two lengths the HF generate baseline is timed at (None: skip). length_mean:
    row i ends after lengths[i] tokens, drawn once per run (`natural_lengths`: lognormal of this
    mean and log-sd length_sigma, capped at new_tokens, seeded by seed); None: every row runs to
    new_tokens. compact_every: decode steps between compactions of the running rows (None: the
    engine never compacts; for comparison)."""
    if batch % group:
        raise InputError(f"bench: batch {batch} is not a multiple of group {group}")
    if length_mean is not None and (trl or hf_tokens):
        raise InputError("bench: length_mean times our engine alone (TRL and HF generate cannot end "
                         "rows at given lengths); pass trl=False hf_tokens=None")
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = device.type == "cuda"
    gen_batch = gen_batch or batch
    res: dict = {"date": datetime.date.today().isoformat(),
                 "device": torch.cuda.get_device_name(device) if cuda else "cpu",
                 "torch": torch.__version__, "transformers": _version("transformers"),
                 "shape": dict(model=model, batch=batch, prompts=batch // group, group=group,
                               prompt_len=prompt_len, new_tokens=new_tokens, micro_batch=micro_batch,
                               lora2r_r=r, adapter_rank=2 * r, gen_batch=gen_batch,
                               keep_layers=keep_layers, old_micro_batch=old_micro_batch or micro_batch,
                               length_mean=length_mean, length_sigma=length_sigma if length_mean else None,
                               compact_every=compact_every)}
    lengths = natural_lengths(batch, length_mean, new_tokens, length_sigma, seed) if length_mean else None
    if lengths:
        n = torch.tensor(lengths, dtype=torch.float64)
        res["lengths"] = {"mean": float(n.mean()), "median": float(n.median()), "p90": float(n.quantile(0.9)),
                          "max": int(n.max()), "at_cap": int((n == new_tokens).sum()), "tokens": int(n.sum())}
    if check:
        res["check"] = self_check(device)
    res["ceilings"] = ceilings(device)

    mdl, _ = build_model(model, device, seed=seed)
    lora = ad.attach(mdl, r=r, seed=seed)
    a = arch(mdl)
    prompts = random_prompts(batch // group, prompt_len, mdl.config.vocab_size, seed, group)
    if check:
        res["check"]["bf16_greedy_vs_hf"] = bf16_agreement(mdl, lora, prompts[::group][:8], 32, device)

    # rollouts: fast path (a short warm-up run captures the graphs at the full cache length)
    kw = dict(temperature=1.0, batch_size=gen_batch, lora=lora, eos_id=EOS, pad=PAD, ignore_eos=True,
              compact_every=compact_every)
    warm: list[dict] = []
    decode.generate_ids(mdl, prompts, 4, cache_new_tokens=new_tokens, timings=warm, **kw)
    eng = next(iter(decode._ENGINE.values()))
    kv_gb = (eng.kp.numel() + eng.vp.numel() + eng.kc.numel() + eng.vc.numel()) * eng.kp.element_size() / 1e9
    del eng
    _sync(device)
    t0 = time.perf_counter()
    chunks: list[dict] = []
    decode.generate_ids(mdl, prompts, new_tokens, cache_new_tokens=new_tokens, timings=chunks,
                        lengths=lengths, **kw)
    _sync(device)
    # the warm-up's graphs, and those of later spans and layouts in this run (captured while the
    # device runs queued steps, so they are inside gen_s as far as they are not hidden)
    capture_s = sum(c["capture_s"] for c in warm + chunks)
    gen_s = time.perf_counter() - t0
    prefill_s = sum(c["prefill_s"] for c in chunks)
    decode_s = sum(c["decode_s"] for c in chunks)
    kv = a.kv_bytes_per_token
    w = weight_bytes(mdl)
    bps = res["ceilings"]["copy_TBps"] * 1e12
    lens = lengths or [new_tokens] * batch
    parts = [lens[s:s + gen_batch] for s in range(0, batch, gen_batch)]
    floor = sum(decode_floor(w, kv, p, prompt_len, bps) for p in parts)
    floor_shared = sum(decode_floor(w, kv, p, prompt_len, bps, group) for p in parts)
    steps_run = sum(max(p) - 1 for p in parts)
    gen = {"fastgen_s": gen_s, "prefill_s": prefill_s, "decode_s": decode_s,
           "capture_s": capture_s,  # host seconds
           "shapes": [list(map(list, c["shapes"])) for c in chunks],
           "tokens_per_s": sum(lens) / gen_s,
           "decode_ms_per_step": 1e3 * decode_s / steps_run,
           "decode_floor_s": floor, "decode_vs_floor": decode_s / floor, "total_vs_floor": gen_s / floor,
           "decode_floor_shared_prompt_s": floor_shared, "total_vs_shared_floor": gen_s / floor_shared,
           "weight_GB": w / 1e9, "adapter_GB": adapter_bytes(lora) / 1e9, "kv_cache_GB": kv_gb}
    if hf_tokens:
        decode.release()  # the HF path gets the memory to itself
        n1, n2 = hf_tokens
        hf_generate_time(mdl, lora, prompts[:gen_batch], 2, device)  # warm-up
        t1 = hf_generate_time(mdl, lora, prompts[:gen_batch], n1, device)
        t2 = hf_generate_time(mdl, lora, prompts[:gen_batch], n2, device)
        per_step = (t2 - t1) / (n2 - n1)
        hf_s = (t1 + per_step * (new_tokens - n1)) * (batch / min(gen_batch, batch))
        gen.update(hf_ms_per_step=1e3 * per_step, hf_s_extrapolated=hf_s, speedup_vs_hf=hf_s / gen_s)
    res["generation"] = gen

    if steps > 0:
        res["step"] = _steps(lora, prompts, group, new_tokens, micro_batch, gen_batch, steps,
                             device, seed, keep_layers, old_micro_batch, lengths)
    del a, lora, mdl
    decode.release()
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()

    if trl:  # TRL with its default gradient checkpointing, and without (faster, more memory)
        for name, ckpt in (("trl", True), ("trl_no_checkpointing", False)):
            # as many steps as ours (at least two: the first is dropped), so each side's figure is the
            # same statistic of its later steps
            res[name] = run_trl(model=model, batch=batch, prompt_len=prompt_len, new_tokens=new_tokens,
                                group=group, micro_batch=micro_batch, rank=2 * r, seed=seed, checkpointing=ckpt,
                                steps=max(steps, 2))
        done = [res[k] for k in ("trl", "trl_no_checkpointing") if "step_s" in res[k]]
        if done and "step" in res:
            faster = min(done, key=lambda t: t["step_s"])  # the ratio is against TRL's faster setting
            res["ratio_vs_trl"] = res["step"]["step"] / faster["step_s"]
            res["ratio_vs_trl_range"] = ratio_range(res["step"]["step_times_s"], faster["step_times_s"])
    _print(res)
    if out_json:
        write_json(out_json, res)
    return res


def ratio_range(ours: list[float], theirs: list[float]) -> list[float]:
    """The spread of our step / TRL's within one run: the least and the largest ratio of a step of
    ours to a step of theirs, over every pairing of the steps after the first on each side (both
    figures are medians of those steps; their own spread is wider than some goals' margins)."""
    ours, theirs = ours[1:] or ours, theirs[1:] or theirs
    return [min(ours) / max(theirs), max(ours) / min(theirs)]


def _steps(lora, prompts, group, new_tokens, micro_batch, gen_batch, steps, device, seed,
           keep_layers, old_micro_batch=None, lengths=None) -> dict:
    """Whole GRPO steps; per phase, the median over the steps after the first (which warms up;
    a single step is reported as it is). As in train.py, each generation builds its engine
    (cache and CUDA graphs) and frees it before the logπ forwards."""
    cuda = torch.device(device).type == "cuda"
    opt = torch.optim.AdamW(lora.parameters(), lr=1e-4)
    peaks: dict = {}
    decode.release()  # each step builds its engine and captures its graphs, as in training
    times = [grpo_step(lora, opt, prompts, group, new_tokens, micro_batch, gen_batch, device,
                       seed + i, keep_layers, peaks, old_micro_batch, lengths)[0] for i in range(steps)]
    later = times[1:] or times
    out = {k: sorted(t[k] for t in later)[len(later) // 2] for k in times[0]}  # medians
    out["steps_run"] = steps
    out["step_times_s"] = [t["step"] for t in times]
    if cuda:
        peaks.pop("before")
        out["peak_allocated_GB"] = max(a for a, _ in peaks.values())
        out["peak_reserved_GB"] = max(r for _, r in peaks.values())
        out["peak_allocated_GB_by_phase"] = {k: a for k, (a, _) in peaks.items()}
    return out


def run_trl(**shape) -> dict:
    """TRL's GRPOTrainer on the same shape, through its runner beside this file (bench/trl_grpo.py)."""
    from bench import trl_grpo
    return trl_grpo.run_trl(**shape)


def _version(pkg: str) -> str:
    from importlib.metadata import version
    return version(pkg)


def _print(res: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"bench.harness · {res['device']} · {res['date']}")
    table.add_column("section")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for section in ("shape", "lengths", "check", "ceilings", "generation", "step", "trl", "trl_no_checkpointing"):
        for k, v in res.get(section, {}).items():
            table.add_row(section, k, _fmt(v))
    if "ratio_vs_trl" in res:
        table.add_row("", "our step / TRL's faster step", _fmt(res["ratio_vs_trl"]))
        table.add_row("", "its range over the later steps' pairings", _fmt(res["ratio_vs_trl_range"]))
    Console().print(table)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_fmt(x)}" for k, x in v.items())
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


# The shapes docs/performance.md reports: the side-by-side shape (8 prompts x G=8, ~300-token
# prompts, 256 new tokens, train micro-batch 8 as TRL's, the no-grad forwards over all 64
# rollouts at once, adapter rank 32 = TRL's LoRA r), generation at batch 256,
# and the paper preset (16 prompts x 16 rollouts, 1,536 new tokens, r=32). issue runs four steps, and
# `bench` gives TRL's runner as many: each side's figure is the median of the three after the first (with
# two later steps, our median was the slower of the two against TRL's median of three)
PRESETS = {
    "issue": dict(batch=64, prompt_len=300, new_tokens=256, group=8, micro_batch=8, old_micro_batch=64, r=16,
                  steps=4, trl=True),
    "gen256": dict(batch=256, prompt_len=512, new_tokens=256, group=8, r=16, steps=0, check=False),
    # two steps: the first compiles the log-prob chains (vgrout.engine.compiled), as a run's first step
    # does, and only the second is reported
    # old_micro_batch 32 and keep_layers 16: presets/paper.yaml's train.old_micro_batch (the scorer's
    # and logπ_sample's forwards two groups at a time) and train.keep_layers
    "paper": dict(batch=256, prompt_len=512, new_tokens=1536, group=16, micro_batch=16, old_micro_batch=32,
                  r=32, keep_layers=16, steps=2, hf_tokens=None, check=False),
    # the paper preset with rows ending at their own lengths: lognormal, mean 500, capped at 1,536;
    # micro-batches of two groups (about the token count of one forced-length group: 16 rows of
    # ~470 tokens are bound by kernel launches, not arithmetic), and so 10 kept layers, not paper's 16
    "paper_natural": dict(batch=256, prompt_len=512, new_tokens=1536, group=16, micro_batch=32,
                          old_micro_batch=32, r=32, keep_layers=10, steps=2, hf_tokens=None, check=False,
                          length_mean=500),
}
STEP_PRESETS = sorted(k for k, v in PRESETS.items() if "micro_batch" in v)  # the presets that run a train step


def main(argv: list[str] | None = None) -> None:
    """python -m bench.harness PRESET [OUT_JSON] [KEY=VALUE ...] (overrides of the preset's arguments)"""
    import ast
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in PRESETS:
        raise SystemExit(f"usage: python -m bench.harness {{{','.join(PRESETS)}}} [out.json] [key=value ...]")
    kw = dict(PRESETS[argv[0]])
    rest = argv[1:]
    out = rest.pop(0) if rest and "=" not in rest[0] else f"bench_{argv[0]}.json"
    for item in rest:
        key, _, value = item.partition("=")
        if key not in bench.__code__.co_varnames[:bench.__code__.co_argcount]:
            raise SystemExit(f"bench: unknown argument '{key}'")
        try:
            kw[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            kw[key] = value  # a bare word: model=qwen3-tiny-random
    bench(**kw, out_json=out)


if __name__ == "__main__":
    main()
