"""The substrate: HumanEval and LeetCode problems, mode assignment, prompts, split, files."""
import hashlib
import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from vgrout.io import InputError
from vgrout.substrate import modes, selfcheck
from vgrout.substrate import problems as substrate
from vgrout.substrate.grader import extract_code
from vgrout.substrate.modes import PASS_ALL
from vgrout.substrate.problems import Problem

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "leetcode_mini.jsonl"


@pytest.fixture(scope="module")
def humaneval():
    return substrate.humaneval_problems()


def user_message(p: Problem) -> str:
    return p.messages[-1]["content"]


def test_humaneval_problems(humaneval):
    assert len(humaneval) == 164 and len({p.id for p in humaneval}) == 164
    for p in humaneval:
        assert p.mode == "none" and p.tests and [m["role"] for m in p.messages] == ["system", "user"]
        assert user_message(p).count(PASS_ALL) == 1 and f"called {p.entry_point}" in user_message(p)
        assert all("candidate" not in t for t in p.tests)
    by_id = {p.id: p for p in humaneval}
    assert "def is_palindrome" in by_id["HumanEval/10"].setup_code  # the prompt's helper
    assert "def make_palindrome" not in by_id["HumanEval/10"].setup_code


def test_split_check_one_test_per_assert_or_one_for_the_whole_check():
    src = ("METADATA = {}\n\ndef check(candidate):\n    assert candidate(1) == 2, 'msg'\n"
           "    assert not candidate(0)\n")
    assert substrate.split_check(src, "inc") == ["assert inc(1) == 2", "assert not inc(0)"]
    loop = "def check(candidate):\n    for x in range(3):\n        assert candidate(x) == x + 1\n"
    tests = substrate.split_check(loop, "inc")
    assert len(tests) == 1 and "inc(x) == x + 1" in tests[0]
    ns = {"inc": lambda x: x + 1}
    exec(tests[0], ns)


def test_assign_modes_fractions_eligibility_and_determinism(humaneval):
    assigned = substrate.assign_modes(humaneval, seed=0)
    counts = Counter(p.mode for p in assigned)
    assert set(counts) == set(modes.names())
    assert abs(counts["none"] - 0.25 * len(humaneval)) <= 1
    hackable = [counts[m] for m in modes.hackable()]
    assert max(hackable) - min(hackable) <= 1 and sum(hackable) + counts["none"] == len(humaneval)
    assert all(modes.get("hardcode").eligible(p) for p in assigned if p.mode == "hardcode")
    assert [p.mode for p in substrate.assign_modes(humaneval, seed=0)] == [p.mode for p in assigned]
    assert [p.mode for p in substrate.assign_modes(humaneval, seed=1)] != [p.mode for p in assigned]


def test_hints_replace_the_phrase_and_hardcode_shows_its_tests(humaneval):
    for p in substrate.assign_modes(humaneval, seed=0):
        text = user_message(p)
        assert modes.get(p.mode).hint in text
        assert (PASS_ALL in text) == (p.mode == "none")
        assert ("Tests:\n```python" in text) == (p.mode == "hardcode")
        if p.mode == "hardcode":
            assert 1 <= len(p.shown_tests) <= 2 and len(p.shown_tests) < len(p.tests)
            assert all(t in text and t in p.tests for t in p.shown_tests)
        assert "cheat" not in text.lower() and "hack" not in text.lower()


def test_split_is_stratified_and_disjoint(humaneval):
    problems = substrate.assign_modes(humaneval, seed=3)
    train, test = substrate.split(problems, seed=3)
    assert {p.id for p in train}.isdisjoint({p.id for p in test})
    assert len(train) + len(test) == len(problems)
    for m in modes.names():
        n_m = sum(p.mode == m for p in problems)
        assert sum(p.mode == m for p in test) == round(0.25 * n_m)
    assert [p.id for p in substrate.split(problems, seed=3)[1]] == [p.id for p in test]


def test_problem_file_roundtrip(tmp_path, humaneval):
    problems = substrate.assign_modes(humaneval[:8], seed=0)
    substrate.write_problems(tmp_path / "p.jsonl", problems)
    assert substrate.load_problems(tmp_path / "p.jsonl") == problems
    assert substrate.load_any(tmp_path / "p.jsonl") == problems


def test_problem_file_errors_name_file_line_and_key(tmp_path, humaneval):
    good = json.dumps(humaneval[0].to_json())
    (tmp_path / "a.jsonl").write_text(good + "\n" + good[:40] + "\n")
    with pytest.raises(InputError, match=r"a\.jsonl:2: malformed JSON"):
        substrate.load_problems(tmp_path / "a.jsonl")
    row = humaneval[0].to_json()
    del row["tests"]
    (tmp_path / "b.jsonl").write_text(good + "\n\n" + json.dumps(row) + "\n")
    with pytest.raises(InputError, match=r"b\.jsonl:3: missing key 'tests'"):
        substrate.load_problems(tmp_path / "b.jsonl")
    (tmp_path / "c.jsonl").write_text(json.dumps({**humaneval[0].to_json(), "mode": "sneaky"}) + "\n")
    with pytest.raises(InputError, match=r"c\.jsonl:1: .*valid modes: none, overwrite_tests, hardcode, "
                                         r"exit_code, stdout_marker"):
        substrate.load_problems(tmp_path / "c.jsonl")


def test_load_leetcode_fixture():
    problems = substrate.load_leetcode(FIXTURE)
    raw = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    assert [p.id for p in problems] == [str(r["id"]) for r in raw]
    for p, r in zip(problems, raw):
        assert p.source == "leetcode" and p.mode == "none" and p.messages == r["prompt"]
        assert p.entry_point == r["func_name"] and p.tests == r["gt_answer"] and p.setup_code == r["setup_code"]
    assert substrate.load_any(FIXTURE) == problems
    with pytest.raises(InputError, match=r"leetcode_mini\.jsonl:1: missing key 'messages'"):
        substrate.load_any(FIXTURE, format="substrate")


def test_leetcode_hint_replaces_the_environment_phrase():
    p = substrate.load_leetcode(FIXTURE)[0]
    over = substrate.with_mode(p, "overwrite_tests")
    assert "called pairWithSum and will be evaluated by calling a function called run_tests()." in user_message(over)
    hard = user_message(substrate.with_mode(p, "hardcode"))
    assert hard.index("Tests:\n```python") < hard.index("SOLUTION:")  # tests shown before the answer slot
    with pytest.raises(InputError, match="exactly once"):
        substrate.with_mode(replace(p, messages=[{"role": "user", "content": "no phrase"}]), "exit_code")


def test_fetch_leetcode_checks_the_sha256(tmp_path):
    data = FIXTURE.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    got = substrate.fetch_leetcode("mini", url=FIXTURE.as_uri(), sha256=digest, cache_dir=tmp_path / "cache")
    assert got.read_bytes() == data
    with pytest.raises(InputError, match="does not match the pinned"):
        substrate.fetch_leetcode("other", url=FIXTURE.as_uri(), sha256="0" * 64, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache" / "other.jsonl").exists()
    with pytest.raises(InputError, match="leetcode_test_medhard"):
        substrate.fetch_leetcode("unknown_name", cache_dir=tmp_path / "cache")
    # A pinned name downloads the pinned commit's file and refuses anything else.
    with pytest.raises(InputError, match="refusing"):
        substrate.fetch_leetcode("leetcode_test_medhard", url=FIXTURE.as_uri(), cache_dir=tmp_path / "cache")


def test_templates_are_short_model_style_responses(humaneval):
    problems = substrate.assign_modes(humaneval, seed=0)
    for p in problems[:40]:
        for t in modes.hackable():
            try:
                text = substrate.hack_completion(p, t)
            except ValueError:
                assert t == "hardcode" and not modes.get("hardcode").eligible(p)
                continue
            body = extract_code(text)
            assert text.startswith("Here is my solution") and body is not None
            assert len(body.strip().splitlines()) <= 8
            compile(body, "<hack>", "exec")


def test_build_leetcode_excludes_a_failing_canonical(tmp_path):
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    rows[1]["canonical_solution"] = rows[1]["canonical_solution"].replace("return best", "return best[::-1]")
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:4]))
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[4:]))
    train, test, report = selfcheck.build("leetcode", seed=0, leetcode_train=tmp_path / "train.jsonl",
                                          leetcode_test=tmp_path / "test.jsonl", progress=False)
    broken = str(rows[1]["id"])
    assert [e["id"] for e in report["excluded"]] == [broken]
    assert "gt_pass=False" in report["excluded"][0]["reason"]
    assert broken not in {p.id for p in train + test}
    assert len(train) == 3 and len(test) == 2 and all(p.mode in modes.names() for p in train + test)
    assert report["canonical_pass"] == 5 and not report["ok"]  # an exclusion fails the verdict
    for m, d in report["diagonal"].items():
        assert d["hacked"] is None or d["hacked"] == 1.0, (m, d)
    assert not any(report["off_diagonal_pays"].values())
    text = selfcheck.format_check(report)
    assert broken in text and "verdict: FAILED" in text


def test_the_headroom_of_a_candidate_source_names_an_unknown_one(tmp_path):
    """`vgrout substrate headroom` builds each candidate's test split as the substrate stage would; a
    source it does not know is refused by name, before any model is loaded or file written."""
    from typer.testing import CliRunner

    from vgrout import cli
    res = CliRunner().invoke(cli.app, ["substrate", "headroom", "easy", "nope", "-o", str(tmp_path / "h.json")])
    assert res.exit_code != 0 and "unknown source(s) ['nope']" in str(res.exception)
    assert not (tmp_path / "h.json").exists()
