"""The variable-length completion attention on a GPU against an fp32 reference: log-probs and the
adapter's gradients of `logprob.token_logprobs` in bf16 and fp16, through the grouped path
(VARLEN "never") and flash's variable-length kernel ("cuda"), with every adapted layer
checkpointed or none, and from a kept frozen trunk; the reference is the grouped path of the same
model in fp32 on the GPU. Also the kernel alone against the CPU's per-row loop.

    python -m bench.check_varlen

A 3-layer Qwen3 (hidden 512, 8 query and 2 KV heads of dim 128), a lora2r adapter (r=4) on the top 2
layers with B moved off its init, 12 rows in 3 groups of prompts of 40, 23 and 57 tokens,
completions of 0 to 90 tokens (two rows with none), keep / route / absorb rows mixed.
"""
from __future__ import annotations

import copy

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from vgrout.engine import adapter as ad
from vgrout.engine import logprob, rollout

V = 97
ZONES = ["keep", "route", "absorb", "route", "keep", "keep", "keep", "keep", "route", "absorb", "absorb", "keep"]


def kernel_against_loop() -> float:
    """Largest difference of the flash kernel (bf16) from the CPU's per-row loop (fp32), random q/k/v."""
    torch.manual_seed(0)
    keys, tp, heads, kv_heads, dim = 3, 40, 8, 2, 128
    prompt_len = torch.tensor([40, 17, 29])
    key_of_row, n = torch.tensor([0, 0, 1, 2, 2, 1, 0]), torch.tensor([5, 0, 33, 1, 12, 7, 60])
    vl = logprob._varlen(key_of_row, keys, tp, prompt_len[key_of_row], n)
    q = torch.randn(int(n.sum()), heads, dim)
    k, v = (torch.randn(keys * tp + int(n.sum()), kv_heads, dim) for _ in range(2))
    ref = logprob._attend_varlen(q, k, v, vl, 0.37)
    vl_gpu = logprob.Varlen(vl.idx.cuda(), vl.cu_q.cuda(), vl.cu_k.cuda(), vl.max_q, vl.max_k)
    got = logprob._attend_varlen(*(t.cuda().bfloat16() for t in (q, k, v)), vl_gpu, 0.37)
    return (got.float().cpu() - ref).abs().max().item()


def main() -> None:
    print(f"kernel (bf16) against the per-row loop (fp32): max difference {kernel_against_loop():.4f}")
    logprob.shares_prompts = lambda seqs: True  # the two-pass forward at every size
    cfg = Qwen3Config(vocab_size=V, hidden_size=512, intermediate_size=1024, num_hidden_layers=3,
                      num_attention_heads=8, num_key_value_heads=2, head_dim=128, max_position_embeddings=512,
                      tie_word_embeddings=True, pad_token_id=0)
    torch.manual_seed(0)
    base = Qwen3ForCausalLM(cfg).eval()
    g = torch.Generator().manual_seed(3)
    ps = [p for n in (40, 23, 57) for p in [torch.randint(2, V, (n,), generator=g).tolist()] * 4]
    comps = [torch.randint(2, V, (n,), generator=g).tolist() for n in (30, 0, 61, 1, 44, 44, 0, 90, 2, 33, 70, 9)]
    seqs = rollout.pack(ps, comps, 0).to("cuda")

    def adapted(dtype):
        model = copy.deepcopy(base).to("cuda", dtype)
        lora = ad.attach(model, r=4, seed=0, last_layers=2)
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for m in lora.modules.values():
                m.B.add_(0.5 * torch.randn(m.B.shape, generator=gen).to(m.B))
        return model, lora

    def run(model, lora, varlen, checkpoint_above=8192, from_trunk=False):
        logprob.VARLEN, logprob.CHECKPOINT_ABOVE_TOKENS = varlen, checkpoint_above
        for p in lora.parameters():
            p.grad = None
        kw = {}
        if from_trunk:
            with torch.no_grad(), lora.masked(ZONES):
                kw["trunk"] = logprob.token_logprobs(model, seqs, return_trunk=True)[2]
        with lora.masked(ZONES):
            logp, _ = logprob.token_logprobs(model, seqs, **kw)
        (logp.float() * torch.linspace(-1, 1, logp.numel(), device="cuda").view_as(logp)).sum().backward()
        return logp.detach().float(), [p.grad.float().clone() for p in lora.parameters()]

    ref, ref_g = run(*adapted(torch.float32), "never")
    print("dtype, (VARLEN, CHECKPOINT_ABOVE_TOKENS, from a kept trunk): largest log-prob difference, "
          "largest relative gradient difference, against fp32")
    for dtype in (torch.bfloat16, torch.float16):
        model, lora = adapted(dtype)
        for args in (("never", 8192, False), ("cuda", 8192, False), ("cuda", 0, False), ("cuda", 8192, True),
                     ("cuda", 0, True)):
            logp, grads = run(model, lora, *args)
            gdiff = max(((a - b).norm() / b.norm()).item() for a, b in zip(grads, ref_g))
            print(f"{str(dtype)[6:]} {args}: {(logp - ref).abs().max().item():.4f} {gdiff:.4f}")


if __name__ == "__main__":
    main()
