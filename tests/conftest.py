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
