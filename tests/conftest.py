import os

# The suite runs on two pytest-xdist workers (pyproject addopts) on CI's two cores: one torch
# thread per process (and per DVC stage it starts), since two processes each spinning two
# OpenMP threads on two cores run torch's small kernels several times slower, not faster.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM


def make_tiny_llama(seed: int = 0, vocab: int = 97, layers: int = 2) -> LlamaForCausalLM:
    """A few-thousand-parameter Llama: real transformers code, instant on CPU."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      tie_word_embeddings=False)
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture
def tiny_llama():
    return make_tiny_llama()


FIRST = "test_pipeline.py"  # the longest module (a chain of DVC runs on one module fixture): started first


def pytest_collection_modifyitems(items):
    """Under `--dist loadfile` a module runs on one worker (its module fixtures built once), in
    collection order: the longest first, so the other worker takes the rest meanwhile."""
    items.sort(key=lambda item: item.path.name != FIRST)  # stable: the rest keep their order
