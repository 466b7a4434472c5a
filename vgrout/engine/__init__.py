"""The model and the compute every stage shares: loading, the lora2r adapter, rollouts, the fused sampling engine and log-probs (CPU and GPU kernels)."""
import torch

# No attention through cuDNN's SDPA, in any of our forwards (log-probs, probe gradients, decoding):
# since torch 2.11 it is the default on an H100 / H200, and its backward returns NaN in dQ (the
# forward, dK and dV right) when an explicit mask is passed, the key length is 64 mod 128 and a
# query row's logsumexp is below ln(FLT_MAX) ≈ −88.7 (pytorch/pytorch#196678). Qwen2.5-0.5B has
# such rows in every prompt, so the real-student pilot's mix-0 runs stopped on a NaN gradient at the
# micro-batches whose left-padded prompts were 64 mod 128 tokens long, entering at layer 8's q_proj
# (docs/runs/2026-11-29-real-student-pilot, round 2). Flash, memory-efficient and math remain.
torch.backends.cuda.enable_cudnn_sdp(False)
