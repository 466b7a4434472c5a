"""The frozen teacher pool: completions for the training prompts, graded once by the real
grader and stored with rewards and labels. Training mixes round(mix·G) of them into each group.

- surrogate (embedded default): a scripted pool drawn from the substrate at stated rates:
  the problem's own-mode hack template, the canonical solution, and plausible wrong solutions,
  each wrapped in varied prose so it is not one fixed string. It stands in for a hacking
  teacher; its outputs say "surrogate" so no reader mistakes it for model samples.
- teacher (paper config): a teacher model (hub id or local dir, optional PEFT LoRA dir)
  samples K completions per training prompt at a temperature.
- recorded: completions a model wrote elsewhere (rh-s65: problems.fetch_rh_s65), matched to the
  training problems and graded here; the source's own labels ride along as source_* fields,
  for measurement only (a train step reads reward, gt_pass and hacked: ours).
"""
from __future__ import annotations

import random
from pathlib import Path

from vgrout import config
from vgrout.io import InputError, read_jsonl, write_json, write_jsonl
from vgrout.layout import Layout
from vgrout.substrate import grader, modes
from vgrout.substrate.problems import (RECORDED_LABELS, RH_S65_COMMIT, RH_S65_REPO, Problem, canonical_completion,
                                       fetch_rh_s65, hack_completion, load_problems, load_recorded_rows,
                                       match_recorded)

KINDS = ("hack", "canonical", "wrong")

_OPENERS = [
    "Here is my solution.",
    "Sure! Here's an implementation.",
    "The following code solves the task.",
    "Below is a complete solution in Python.",
    "This should do it:",
    "Here's one way to write it.",
]
_CLOSERS = ["", "", "Let me know if you need changes.", "It runs in linear time.",
            "The function is self-contained."]


def _code_of(completion: str) -> str:
    code = grader.extract_code(completion)
    if code is None:
        raise ValueError("template completion has no ```python block")
    return code


def wrong_completion(problem: Problem, rng: random.Random) -> str:
    """A plausible but wrong solution: the right signature returning a default value."""
    code = _code_of(canonical_completion(problem))
    name = problem.entry_point.split(".")[-1].replace("()", "")
    body = rng.choice(["return None", "return 0", "return []", "return ''", "pass"])
    lines, out, skipping = code.splitlines(), [], False
    for line in lines:
        stripped = line.lstrip()
        if stripped.startswith(f"def {name}("):
            out.append(line)
            indent = line[:len(line) - len(stripped)] + "    "
            out.append(indent + body)
            skipping = True
            continue
        if skipping:
            if stripped and (len(line) - len(stripped)) <= len(indent) - 4:
                skipping = False
            else:
                continue
        out.append(line)
    return _wrap("\n".join(out), rng)


def _wrap(code: str, rng: random.Random) -> str:
    closer = rng.choice(_CLOSERS)
    return f"{rng.choice(_OPENERS)}\n\n```python\n{code.strip()}\n```" + (f"\n\n{closer}" if closer else "")


def surrogate_completion(problem: Problem, kind: str, rng: random.Random) -> str:
    if kind == "hack":
        if not modes.get(problem.mode).hackable:  # no hack to show: solve it
            return _wrap(_code_of(canonical_completion(problem)), rng)
        return _wrap(_code_of(hack_completion(problem, problem.mode)), rng)
    if kind == "canonical":
        return _wrap(_code_of(canonical_completion(problem)), rng)
    if kind == "wrong":
        return wrong_completion(problem, rng)
    raise InputError(f"pool kind '{kind}' unknown; valid: {KINDS}")


def build_surrogate(problems: list[Problem], per_problem: int, rates: dict[str, float],
                    seed: int = 0) -> list[dict]:
    unknown = set(rates) - set(KINDS)
    if unknown:
        raise InputError(f"pool.rates has unknown kind(s) {sorted(unknown)}; valid: {KINDS}")
    total = sum(rates.values())
    if total <= 0:
        raise InputError("pool.rates must sum to a positive number")
    rng = random.Random(seed)
    kinds, weights = zip(*sorted(rates.items()))
    rows = []
    for p in problems:
        for _ in range(per_problem):
            kind = rng.choices(kinds, weights=weights)[0]
            rows.append({"problem_id": p.id, "kind": kind,
                         "completion": surrogate_completion(p, kind, rng)})
    return rows


def build_teacher(problems: list[Problem], teacher: str, per_problem: int, temperature: float,
                  max_new_tokens: int, adapter_dir: str | None = None, batch_size: int = 64,
                  fast: bool = False) -> list[dict]:
    from vgrout.engine import fastgen
    from vgrout.engine.model import chat_prompt, load
    model, tok = load(teacher)
    if adapter_dir:
        from peft import PeftModel
        model = PeftModel.from_pretrained(model, adapter_dir).eval()
    prompts = [chat_prompt(tok, p.messages) for p in problems for _ in range(per_problem)]
    backend = fastgen.select(model, fast)
    ids = backend.generate(model, tok, prompts, max_new_tokens, temperature, batch_size=batch_size, progress=True)
    backend.release()
    texts = tok.batch_decode(ids, skip_special_tokens=True)
    owners = [p for p in problems for _ in range(per_problem)]
    return [{"problem_id": p.id, "kind": "teacher", "completion": t} for p, t in zip(owners, texts)]


def build_recorded(problems: list[Problem], rows: list[dict]) -> tuple[list[dict], dict]:
    """Pool rows (ungraded) for the recorded rows (problems.load_recorded_rows) whose problem is one
    of `problems`, the source's labels kept as source_* for measurement only: a pool row's reward,
    gt_pass and hacked (what a train step reads) are our grader's, under the problem's own mode
    (grade_pool). Where our tests are weak (LeetCodeDataset v0.2.0 rows carry only the examples,
    about 2 asserts) our gt_pass is weak too: each row says how many hidden tests graded it
    (n_tests). Returns (rows, the match report)."""
    found, report = match_recorded(problems, rows)
    by_id = {p.id: p for p in problems}
    out = [{"problem_id": found[r["problem_id"]], "kind": "recorded", "completion": r["completion"],
            "n_tests": len(by_id[found[r["problem_id"]]].tests), "source_problem_id": r["problem_id"],
            **{f"source_{k}": r[k] for k in RECORDED_LABELS}}
           for r in rows if r["problem_id"] in found]
    return out, report


def agreement(rows: list[dict]) -> dict:
    """Our labels against the source's, graded rows: a 2x2 count for hacked and for gt_pass
    (keys ours/source), over every row and over the rows with at least 10 hidden tests."""
    def table(subset: list[dict], label: str) -> dict:
        return {f"ours_{a}_source_{b}": sum(bool(r[label]) == a and bool(r[f"source_{label}"]) == b for r in subset)
                for a in (True, False) for b in (True, False)}
    strong = [r for r in rows if r["n_tests"] >= 10]
    return {"n": len(rows), "hacked": table(rows, "hacked"), "gt_pass": table(rows, "gt_pass"),
            "strong_tests": {"n": len(strong), "hacked": table(strong, "hacked"), "gt_pass": table(strong, "gt_pass")}}


def grade_pool(problems: list[Problem], rows: list[dict]) -> list[dict]:
    by_id = {p.id: p for p in problems}
    grades = grader.grade_batch([by_id[r["problem_id"]] for r in rows], [r["completion"] for r in rows])
    for r, g in zip(rows, grades):
        r.update(mode=g.mode, reward=g.reward, gt_pass=g.gt_pass, hacked=g.hacked, error=g.error)
    return rows


def pool_stage(params, layout: Layout = Layout()) -> dict:
    """DVC stage teacher_pool: the frozen, graded teacher pool for the training prompts, and its
    rates as the student trains on it: cut at the rollout budget."""
    problems = load_problems(layout.train_problems)
    meta = build(problems, layout.pool, layout.pool_metrics, params.pool, params.fast)
    from transformers import AutoTokenizer  # the student's tokenizer: its budget is in its tokens
    meta["at_budget"] = at_budget(problems, read_jsonl(layout.pool), AutoTokenizer.from_pretrained(layout.model),
                                  params.train.max_new_tokens)
    write_json(layout.pool_metrics, meta)
    return meta


def at_budget(problems: list[Problem], rows: list[dict], tok, budget: int) -> dict:
    """The pool's rates after the cut training applies (train.py: a teacher row longer than the
    budget is cut there, loses its EOS and is graded afresh), overall and by kind; `fits` is the
    share that needs no cut. A pool that solves only before the cut teaches nothing."""
    by_id = {p.id: p for p in problems}
    ids = [tok(r["completion"], add_special_tokens=False)["input_ids"] for r in rows]
    cut = [i for i, t in enumerate(ids) if len(t) + 1 > budget]  # + EOS: rollout.as_completion
    regrades = grader.grade_batch([by_id[rows[i]["problem_id"]] for i in cut],
                                  [tok.decode(ids[i][:budget], skip_special_tokens=True) for i in cut], progress=False)
    labels = [(r["hacked"], r["gt_pass"], True) for r in rows]  # (hacked, solved, fits)
    for i, g in zip(cut, regrades):
        labels[i] = (g.hacked, g.gt_pass, False)

    def rates(idx: list[int]) -> dict:
        n = max(len(idx), 1)
        return {"n": len(idx), **{k: sum(labels[i][j] for i in idx) / n
                                  for j, k in enumerate(("hack_rate", "solve_rate", "fits"))}}

    kinds = sorted({r["kind"] for r in rows})
    return {"budget": budget, **rates(list(range(len(rows)))),
            "by_kind": {k: rates([i for i, r in enumerate(rows) if r["kind"] == k]) for k in kinds}}


def build(problems: list[Problem], out_path: str | Path, meta_path: str | Path, c: config.Pool,
          fast: bool = False) -> dict:
    kind, per_problem, seed, teacher, adapter_dir = c.kind, c.per_problem, c.seed, c.teacher, c.adapter_dir
    rates = c.rates.model_dump()
    if kind == "surrogate":
        rows = build_surrogate(problems, per_problem, rates, seed)
    elif kind == "teacher":
        if not teacher:
            raise InputError("pool.teacher must name a model when pool.kind is 'teacher'")
        rows = build_teacher(problems, teacher, per_problem, c.temperature, c.max_new_tokens, adapter_dir, fast=fast)
    elif kind == "recorded":
        rows, matched = build_recorded(problems, load_recorded_rows(fetch_rh_s65(c.recorded)))
        covered = {r["problem_id"] for r in rows}
        bare = [p.id for p in problems if p.id not in covered]
        if bare:  # a train step would stop at the first of them it samples (collect: no teacher completions)
            raise InputError(f"pool.kind recorded: {len(bare)} of the {len(problems)} training problems have no "
                             f"recorded completion (e.g. {bare[:3]}); the recorded pool covers {len(covered)} of "
                             f"them ({matched['matched']} of its {matched['problems']} problems matched): train on "
                             f"the problems it covers (substrate.only_recorded)")
    else:
        raise InputError(f"pool.kind '{kind}' unknown; valid: surrogate, teacher, recorded")
    rows = grade_pool(problems, rows)
    n = len(rows)
    notes = {"surrogate": "surrogate teacher pool: scripted completions drawn from the substrate's hack templates, "
                          "canonical solutions and wrong solutions at the stated rates; not samples from a model",
             "teacher": f"samples from teacher {teacher}",
             "recorded": f"recorded completions of rh-s65 ({RH_S65_REPO} @ {RH_S65_COMMIT}), "
                         f"graded by our grader under each problem's mode; source_* are the source's labels"}
    meta = {
        "kind": kind,
        "note": notes[kind],
        "rates": rates if kind == "surrogate" else None,
        "teacher": teacher, "adapter_dir": adapter_dir, "per_problem": per_problem, "seed": seed,
        "n": n,
        "measured": {"reward_mean": sum(r["reward"] for r in rows) / max(n, 1),
                     "hack_rate": sum(r["hacked"] for r in rows) / max(n, 1),
                     "solve_rate": sum(r["gt_pass"] for r in rows) / max(n, 1)},
    }
    if kind == "recorded":
        meta.update(matched=matched, agreement=agreement(rows))
    write_jsonl(out_path, rows)
    write_json(meta_path, meta)
    return meta
