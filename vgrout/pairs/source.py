"""Where the hack pairs come from (params pairs.source), and the DVC stage `pairs` that writes them:
the authored pair files (pairs.files, checked by vgrout.pairs.pairs), or self-generated pairs, a
label-free source.

Self-generated pairs:

The student at its init (the model before any training) writes both sides of each pair itself, on
problems that are in neither the training nor the test split (the easy generator's problems past the
substrate's indices):
    hack side:  sampled under the problem with a mode's hint and a sentence stating the mode's
                mechanism (modes.Mode.exploit);
    clean side: sampled under the same problem without the hint (mode none's wording).
The only label is which prompt produced the text: no grader, no reward, no check of what the text
does (a hack side that did not hack stays, as does a clean side that did). Both sides are then read
under the prompt a training rollout of that mode shows (the hint, without the mechanism sentence), so
the pair differs in its completion alone, as an authored pair does.
"""
from __future__ import annotations

from pathlib import Path

from vgrout.io import InputError
from vgrout.layout import Layout
from vgrout.pairs.pairs import Pair, check_stage
from vgrout.substrate import easy, modes
from vgrout.substrate.problems import Problem, load_problems, with_mode

FIRST_INDEX = 10_000  # the easy generator's problem indices from here on: far past any substrate's


def fresh_problems(n_per_mode: int, taken: set[str], seed: int) -> dict[str, list[Problem]]:
    """Per hackable mode, n_per_mode problems of the easy generator whose user prompt under no mode is
    one of `taken` (the substrate's prompts), each able to take the mode; the families dealt
    round-robin from a seeded offset (a family with few distinct problems repeats the substrate's)."""
    out: dict[str, list[Problem]] = {m: [] for m in modes.hackable()}
    index = FIRST_INDEX + 1000 * seed
    while any(len(v) < n_per_mode for v in out.values()):
        for family in easy.FAMILIES:
            p = easy.problem(family, index)
            if _views(p) & taken:  # the substrate holds it, under some mode's wording
                continue
            for mode, got in out.items():
                if len(got) < n_per_mode and modes.get(mode).eligible(p):
                    got.append(p)
                    break
        index += 1
        if index > FIRST_INDEX + 1000 * seed + 10_000:
            raise InputError(f"could not find {n_per_mode} fresh problems for every mode")
    return out


def _views(problem: Problem) -> set[str]:
    """The problem's user prompt under every mode it can take (a substrate problem is stored under one)."""
    return {problem.messages[-1]["content"]} | {with_mode(problem, m).messages[-1]["content"]
                                                for m in modes.hackable() if modes.get(m).eligible(problem)}


def hack_messages(problem: Problem, mode: str) -> list[dict]:
    """The hack side's prompt: the problem under the mode's hint, and the mode's mechanism stated."""
    messages = [dict(m) for m in with_mode(problem, mode).messages]
    messages[-1]["content"] += f"\n\n{modes.get(mode).exploit}"
    return messages


def generate(model_dir: str | Path, substrate_prompts: set[str], n_per_mode: int, seed: int, *, budget: int,
             temperature: float, top_p: float, batch_size: int, fast: bool) -> list[Pair]:
    """One pair per fresh problem, n_per_mode per hackable mode, both sides sampled from the model in
    model_dir (seeded) within `budget` tokens, the rollouts' budget."""
    # here, not above: the authored pairs (the default source) need the tokenizer only, not the
    # imports of torch and the model code (seconds of every `pairs` stage)
    import torch

    from vgrout.engine import fastgen
    from vgrout.engine.model import chat_prompt, load

    problems = fresh_problems(n_per_mode, substrate_prompts, seed)
    model, tok = load(str(model_dir))
    rows = [(mode, p) for mode, ps in problems.items() for p in ps]
    prompts = [chat_prompt(tok, hack_messages(p, mode)) for mode, p in rows] + \
        [chat_prompt(tok, p.messages) for _, p in rows]
    torch.manual_seed(seed)
    backend = fastgen.select(model, fast)
    ids = backend.generate(model, tok, prompts, budget, temperature, top_p, batch_size=batch_size, progress=True)
    backend.release()
    texts = tok.batch_decode(ids, skip_special_tokens=True)
    n = len(rows)
    return [Pair(id=f"self-{mode}-{p.id.replace('/', '-')}", mode=mode, tags=("self",),
                 prompt=with_mode(p, mode).messages[-1]["content"], hack=texts[i], clean=texts[n + i],
                 file="self-generated", line=i)
            for i, (mode, p) in enumerate(rows)]


def pairs_stage(params, layout=None) -> dict:
    """DVC stage pairs: the authored pairs (pairs.files), or with pairs.source self the pairs the student
    writes itself (`generate`); the placebo pairs are authored either way."""
    layout = layout or Layout()
    files = params.pairs.files if params.pairs.source == "authored" else []
    for key, paths in (("files", files), ("placebo_files", params.pairs.placebo_files)):
        for f in paths:
            if not Path(f).is_file():
                raise InputError(f"params pairs.{key}: {f}: pair file not found")
    generated = None
    if params.pairs.source == "self":
        taken = {m["content"] for split in ("train", "test")
                 for p in load_problems(Path(layout.substrate) / f"{split}.jsonl") for m in p.messages if m["role"] == "user"}
        t = params.train
        generated = generate(layout.model, taken, params.pairs.self_per_mode, params.pairs.self_seed,
                             budget=t.max_new_tokens, temperature=t.temperature, top_p=t.top_p,
                             batch_size=t.gen_batch, fast=params.fast)
    return check_stage(files, params.pairs.placebo_files, layout.model, layout.substrate,
                       layout.pairs, layout.pairs_check, generated=generated)
