"""vgrout: gradient routing of reward-hacking rollouts into a deletable quarantine block (README.md: the method, the pipeline and where each stage lives)."""
import os

# A GPU step holds the generation's static KV cache (59 GB at the paper shape) and then the train
# forward's changing tensors in turn; with expandable segments the allocator maps pages into one
# growing segment instead of caching fixed-size ones, which keeps what it reserves close to what is
# allocated (the paper step at 14cb35a: 74.86 GB reserved for 72.87 allocated; e447574 with the
# default allocator: 78.19 for 74.68; docs/performance.md). PyTorch reads the setting once, at the
# allocator's first use: it holds where vgrout is imported before anything touches CUDA, as in every
# stage and the bench. A user's own allocator setting wins.
if not any(k in os.environ for k in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")):
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
