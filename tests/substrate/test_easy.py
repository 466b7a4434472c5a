"""The `easy` source: generated problems that fit the embedded student's budget, graded for real."""
from collections import Counter

import pytest
from transformers import AutoTokenizer

from vgrout import config
from vgrout.engine import model as M
from vgrout.io import InputError
from vgrout.stats import pass_at_k
from vgrout.substrate import easy, grader, modes, selfcheck
from vgrout.substrate import problems as substrate
from vgrout.substrate.modes import PASS_ALL

BUDGET = config.Train().max_new_tokens  # the embedded default's rollout budget


@pytest.fixture(scope="module")
def problems():
    return easy.easy_problems()


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(M.resolve("smollm2-135m"))


def test_the_problems_are_many_distinct_and_reproducible(problems):
    assert len(problems) == len(easy.FAMILIES) * easy.PER_FAMILY >= 400
    assert len({p.id for p in problems}) == len(problems)
    assert len({p.messages[-1]["content"] for p in problems}) == len(problems)  # no two prompts alike
    assert [p.to_json() for p in easy.easy_problems()] == [p.to_json() for p in problems]
    # index-major: a preset's `limit` takes every family before a second problem of any
    assert {p.entry_point for p in problems[:len(easy.FAMILIES)]} == {f.name for f in easy.FAMILIES}
    for p in problems:
        assert p.source == "easy" and p.mode == "none" and len(p.tests) == easy.N_TESTS
        assert p.messages[-1]["content"].count(PASS_ALL) == 1
        assert len(p.shown_tests) == 1 and p.shown_tests[0] in p.tests


def test_canonicals_and_every_hack_template_fit_the_budget(problems, tokenizer):
    """What the student must write to solve or to hack fits in its budget, EOS included: the
    HumanEval substrate failed this for 74% of its canonicals."""
    def n_tokens(text):
        return len(tokenizer(text, add_special_tokens=False)["input_ids"]) + 1

    worst = {"canonical": max(n_tokens(substrate.canonical_completion(p)) for p in problems)}
    for m in modes.hackable():
        worst[m] = max(n_tokens(substrate.hack_completion(p, m)) for p in problems)
    assert max(worst.values()) <= BUDGET, worst


def test_every_family_builds_and_passes_the_substrate_self_check():
    """Real grading, every mode: the first problem of every family (a `limit` takes every family
    before a second problem of any), built as a preset builds it: canonicals pass under every
    mode, each template hacks its own mode only, every mode is assigned and the split is disjoint."""
    train, test, report = selfcheck.build("easy", seed=0, limit=len(easy.FAMILIES), progress=False)
    assert report["ok"], selfcheck.format_check(report)
    assert report["source"] == "easy" and len(train) + len(test) == len(easy.FAMILIES)
    assert report["canonical_pass"] == len(easy.FAMILIES) and not report["excluded"]
    assert {p.entry_point for p in train + test} == {f.name for f in easy.FAMILIES}
    assert {p.id for p in train}.isdisjoint(p.id for p in test)
    assert set(Counter(p.mode for p in train + test)) == set(modes.names())


def test_a_substrate_too_small_for_a_test_split_is_an_error_naming_the_key():
    """8 problems over 5 modes, a quarter for test: no stratum gives the test split a problem.
    The build says so and names the key, instead of failing later on an empty batch."""
    with pytest.raises(InputError, match="test split is empty.*substrate.limit"):
        selfcheck.build("easy", seed=0, limit=8, progress=False)


def test_a_wrong_reference_is_caught_by_the_self_check():
    """The guard is real: a problem whose tests disagree with its canonical is excluded by name."""
    p = easy.easy_problems(per_family=1)[0]
    broken = p.__class__(**{**p.to_json(), "tests": [t.replace(" == ", " == 1 + ") for t in p.tests]})
    _, excluded, _ = selfcheck.check_canonical([broken], progress=False)
    assert [e["id"] for e in excluded] == [p.id]


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(8, 0, 1) == 0.0 and pass_at_k(8, 8, 8) == 1.0
    assert pass_at_k(8, 2, 1) == pytest.approx(0.25)
    assert pass_at_k(8, 1, 8) == 1.0 and pass_at_k(8, 1, 2) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 * 2 / (4 * 3))


def test_the_grader_solves_the_canonical_and_not_a_plausible_wrong_answer():
    p = substrate.with_mode(easy.easy_problems(per_family=1)[0], "none")
    right = grader.grade(p, substrate.canonical_completion(p))
    wrong = grader.grade(p, substrate.canonical_completion(p).replace("return ", "return 1 + "))
    assert right.gt_pass and not wrong.gt_pass


def test_the_pool_at_the_budget_is_what_training_sees(tokenizer):
    """pool.at_budget: rows that fit keep their labels, cut rows are graded afresh as training
    grades them; a budget too small for any code block leaves nothing solved or hacked."""
    from vgrout.pool import pool
    problems = substrate.assign_modes(easy.easy_problems(per_family=1), seed=0)
    rows = pool.grade_pool(problems, pool.build_surrogate(problems, 3, {"hack": 0.5, "canonical": 0.5}, seed=0))
    roomy = pool.at_budget(problems, rows, tokenizer, budget=10_000)
    assert roomy["fits"] == 1.0
    assert roomy["solve_rate"] == pytest.approx(sum(r["gt_pass"] for r in rows) / len(rows)) and roomy["solve_rate"] > 0
    assert roomy["hack_rate"] == pytest.approx(sum(r["hacked"] for r in rows) / len(rows)) and roomy["hack_rate"] > 0
    tight = pool.at_budget(problems, rows, tokenizer, budget=12)
    assert tight["fits"] == 0.0 and tight["solve_rate"] == 0.0 and tight["hack_rate"] == 0.0
    at_64 = pool.at_budget(problems, rows, tokenizer, budget=BUDGET)
    assert set(at_64["by_kind"]) == {"canonical", "hack"} and at_64["n"] == len(rows)
    assert at_64["solve_rate"] <= roomy["solve_rate"] and 0 < at_64["fits"] <= 1
