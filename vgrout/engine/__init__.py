"""The model and the compute every stage shares: loading, the lora2r adapter, rollouts, the fused sampling engine and log-probs (CPU and GPU kernels)."""
