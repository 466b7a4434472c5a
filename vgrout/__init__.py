"""vgrout: gradient routing of reward-hacking rollouts into a deletable quarantine block (see DESIGN and README)."""
import os

# A GPU step holds the generation's static KV cache (59 GB at the paper shape) and then the train
# forward's changing tensors in turn; with expandable segments the allocator maps pages into one
# growing segment instead of caching fixed ones, so what it reserves stays near what is allocated
# (the paper step's peak: 74.86 GB reserved for 72.87 allocated; docs/performance.md). Read when
# CUDA first allocates; a user's own allocator setting wins.
if not any(k in os.environ for k in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")):
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
