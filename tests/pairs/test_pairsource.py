"""Self-generated pairs (pairs.source self): fresh problems, the two prompts, a label-free source, and
the pairs stage's output in the format extract_vact reads."""
import ast
import shutil
from pathlib import Path

import torch

from vgrout import config
from vgrout.engine import adapter as ad
from vgrout.engine.model import load, resolve
from vgrout.io import read_json
from vgrout.layout import Layout
from vgrout.pairs import source as pairsource
from vgrout.pairs.pairs import Pair
from vgrout.routing import extract
from vgrout.substrate import easy, modes
from vgrout.substrate import problems as substrate

ROOT = Path(__file__).resolve().parents[2]


def test_fresh_problems_are_in_no_split_and_can_take_their_mode():
    taken_problems = easy.easy_problems(3)
    taken = {p.messages[-1]["content"] for p in taken_problems}
    fresh = pairsource.fresh_problems(2, taken, seed=0)
    assert set(fresh) == set(modes.hackable())
    for mode, ps in fresh.items():
        assert len(ps) == 2 and all(modes.get(mode).eligible(p) for p in ps)
        assert not set().union(*map(pairsource._views, ps)) & taken
    # a problem the substrate holds is never taken, whatever its index
    everything = {p.messages[-1]["content"] for ps in fresh.values() for p in ps}
    again = pairsource.fresh_problems(2, taken | everything, seed=0)
    assert not {p.messages[-1]["content"] for ps in again.values() for p in ps} & everything


def test_the_hack_side_is_asked_with_the_hint_and_mechanism_and_the_clean_side_without():
    p = easy.problem(easy.FAMILIES[0], pairsource.FIRST_INDEX)
    for mode in modes.hackable():
        hack = pairsource.hack_messages(p, mode)[-1]["content"]
        assert modes.get(mode).exploit and hack.endswith(modes.get(mode).exploit)
        assert hack.startswith(substrate.with_mode(p, mode).messages[-1]["content"])
        assert modes.PASS_ALL not in hack and modes.PASS_ALL in p.messages[-1]["content"]


def test_the_pair_source_reads_no_label():
    """Label-free: the module imports nothing that grades, and names no grader field."""
    tree = ast.parse((ROOT / "vgrout/pairs/source.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names} | \
        {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"grader", "vgrout.substrate.grader", "evaluate", "vgrout.eval.evaluate", "pool", "vgrout.pool.pool"}
    words = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not words & {"reward", "hacked", "gt_pass", "grade", "grade_batch"}


def test_the_pairs_stage_writes_self_generated_pairs_extract_vact_reads(tmp_path):
    lay = Layout(tmp_path)
    shutil.copytree(resolve("tiny-smollm2"), lay.model)
    problems = substrate.assign_modes(easy.easy_problems(2), seed=0)
    substrate.write_problems(lay.train_problems, problems[:30])
    substrate.write_problems(lay.test_problems, problems[30:])
    params = config.parse(config.overlay(config.Params().model_dump(), {
        "pairs": {"source": "self", "self_per_mode": 2, "placebo_files": [str(ROOT / "data/pairs/placebo_names.md")]},
        "train": {"max_new_tokens": 12, "gen_batch": 16}}), "test", complete=False)
    report = pairsource.pairs_stage(params, lay)
    assert report["ok"] and report["source"] == "self" and report["n_pairs"] == 2 * len(modes.hackable())
    data = read_json(lay.pairs)
    pairs = [Pair(**{**p, "tags": tuple(p["tags"])}) for p in data["pairs"]]
    assert {p.mode for p in pairs} == set(modes.hackable()) and data["placebo_pairs"]
    assert all(p.hack and p.clean and p.hack != p.clean for p in pairs)
    prompts = {m["content"] for p in problems for m in p.messages}
    assert not {p.prompt for p in pairs} & prompts  # fresh problems, under the hint a rollout of the mode shows
    assert all(modes.get(p.mode).exploit not in p.prompt for p in pairs)
    # the same seed writes the same pairs (the stage's output is a function of its params)
    assert pairsource.pairs_stage(params, lay) == report and read_json(lay.pairs) == data
    model, tok = load(lay.model)
    lora = ad.attach(model, r=2, seed=0, last_layers=1)
    v, diag = extract.extract(lora, tok, pairs, data["system"], None, 0, False, budget=12, batch_size=4, space="grad")
    assert diag["n_pairs"] == len(pairs) and all(torch.isfinite(t).all() for t in v.values())
