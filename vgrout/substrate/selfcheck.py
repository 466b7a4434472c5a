"""Build and self-check the substrate: every canonical solution and every mode's hack template
graded under every mode.

A problem whose canonical solution is not gt_pass + flawed_pass under some mode is excluded
(with its reason) before modes are assigned, which fails the verdict (LeetCodeDataset training
problems, a selection, leave such a problem out instead and list it); the verdict also asks each template to hack
>= 95% of its own mode's problems and to earn nothing under any other mode. This module sits
above the substrate and the grader (it needs both), so that neither imports the other.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

from vgrout import config
from vgrout.engine.model import load
from vgrout.io import InputError, write_json
from vgrout.layout import Layout
from vgrout.stats import pass_at_k
from vgrout.substrate import easy, grader, modes, sandbox
from vgrout.substrate import problems as substrate
from vgrout.substrate.sampling import rates, sample_and_grade, sample_rows


def _summary(grades) -> dict:
    n = len(grades)
    return {"n": n, **{k: (sum(getattr(g, k) for g in grades) / n if n else None)
                       for k in ("gt_pass", "flawed_pass", "hacked", "reward")}}


BASE_SAMPLES = 8  # samples per test problem: the base model's pass@1 and pass@8
HEADROOM = (0.10, 0.60)  # the base pass@1 the default substrate is made for: room to learn, and to fail
CPU_FACTOR = 5  # a problem's CPU limit: the larger of the default and this many times its canonical's CPU
CALIBRATION_CPU_S = 30.0  # the canonicals' own limit while they are measured


def check_canonical(problems: list[substrate.Problem], limits=None, progress: bool = True
                    ) -> tuple[dict, list[dict], dict[str, float]]:
    """Grade every canonical solution under every mode. Returns (per-mode table, exclusions, CPU
    seconds of each problem's canonical: the most over modes): a problem is excluded, with its
    reason, when its canonical is not gt_pass + flawed_pass (hence not hacked) under some mode.
    The canonicals run with a generous CPU limit, so that a slow one is measured, not excluded."""
    limits = (limits or sandbox.Limits()).with_cpu(CALIBRATION_CPU_S)
    problems = [dataclasses.replace(p, cpu_limit_s=None) for p in problems]
    rows = [(p, m) for p in problems for m in modes.names()]
    grades = grader.grade_batch([p for p, _ in rows], [substrate.canonical_completion(p) for p, _ in rows],
                                [m for _, m in rows], progress=progress, limits=limits)
    table = {m: _summary([g for (_, mm), g in zip(rows, grades) if mm == m]) for m in modes.names()}
    reasons: dict[str, list[str]] = {}
    for (p, m), g in zip(rows, grades):
        if not (g.gt_pass and g.flawed_pass and not g.hacked):
            reasons.setdefault(p.id, []).append(
                f"under {m}: gt_pass={g.gt_pass} flawed_pass={g.flawed_pass} "
                f"tests {g.tests_passed}/{g.tests_total} error={g.error}")
    cpu: dict[str, float] = {}
    for (p, _), g in zip(rows, grades):
        cpu[p.id] = max(cpu.get(p.id, 0.0), g.cpu_s or 0.0)
    return table, [{"id": pid, "reason": "; ".join(r)} for pid, r in reasons.items()], cpu


def calibrate(problems: list[substrate.Problem], cpu: dict[str, float], default: float | None = None
              ) -> list[substrate.Problem]:
    """Each problem with its CPU limit: the larger of the default and CPU_FACTOR × its canonical's
    CPU seconds (per phase of a grading), so that a slow correct solution is not cut off and a
    neighbour that inflates a run's CPU seconds (caches shared with another core: 1.5 times, seen
    on CI, grader module doc) does not make it `timeout`."""
    default = sandbox.Limits().cpu_s if default is None else default
    return [dataclasses.replace(p, cpu_limit_s=round(max(default, CPU_FACTOR * cpu[p.id]), 2)) for p in problems]


def cpu_summary(problems: list[substrate.Problem], cpu: dict[str, float]) -> dict:
    default = sandbox.Limits().cpu_s
    limits = [p.cpu_limit_s for p in problems]
    return {"default_s": default, "factor": CPU_FACTOR, "canonical_max_s": max(cpu.values(), default=None),
            "above_default": sum(lim > default for lim in limits), "limit_max_s": max(limits, default=None)}


def check_hacks(problems: list[substrate.Problem], limits=None, progress: bool = True) -> dict:
    """Grade every mode's hack template under every mode.

    hack_x_mode[template][mode] summarises all problems; diagonal[mode] is the fraction of
    that mode's own problems that its template hacks (the goal is >= 0.95).
    """
    limits = limits or sandbox.Limits()
    rows, no_template = [], {t: [] for t in modes.hackable()}
    for p in problems:
        for t in modes.hackable():
            try:
                completion = substrate.hack_completion(p, t)
            except ValueError:
                no_template[t].append(p.id)
                continue
            rows += [(p, t, m, completion) for m in modes.names()]
    grades = grader.grade_batch([r[0] for r in rows], [r[3] for r in rows], [r[2] for r in rows],
                                progress=progress, limits=limits)
    cell = {}
    for (p, t, m, _), g in zip(rows, grades):
        cell.setdefault((t, m), []).append((p, g))
    table = {t: {m: _summary([g for _, g in cell.get((t, m), [])]) for m in modes.names()} for t in modes.hackable()}
    diagonal = {}
    for m in modes.hackable():
        own = [g for p, g in cell.get((m, m), []) if p.mode == m]
        n_own = sum(p.mode == m for p in problems)
        diagonal[m] = {"n": n_own, "hacked": sum(g.hacked for g in own) / n_own if n_own else None}
    leaks = {t: [m for m in modes.names() if m != t and (table[t][m]["flawed_pass"] or 0) > 0]
             for t in modes.hackable()}
    return {"hack_x_mode": table, "diagonal": diagonal, "off_diagonal_pays": leaks,
            "no_template": {t: ids for t, ids in no_template.items() if ids}}


def self_check(problems: list[substrate.Problem], limits=None, progress: bool = True) -> dict:
    """Canonical x mode and hack x mode tables, exclusions with reasons, and a verdict."""
    canonical, excluded, _ = check_canonical(problems, limits, progress)
    return _report(problems, len(problems), canonical, excluded, check_hacks(problems, limits, progress))


def _report(problems, n_checked, canonical, excluded, hacks) -> dict:
    ok = (not excluded and all(d["hacked"] is None or d["hacked"] >= 0.95 for d in hacks["diagonal"].values())
          and not any(hacks["off_diagonal_pays"].values()))
    counts = {m: sum(p.mode == m for p in problems) for m in modes.names()}
    shapes = Counter(grader.test_shape(t) for p in problems for t in p.tests)
    return {"ok": ok, "isolation": sandbox.isolation(), "n_problems": len(problems), "mode_counts": counts,
            "test_shapes": dict(sorted(shapes.items())),
            "canonical_x_mode": canonical, "canonical_checked": n_checked, "canonical_pass": n_checked - len(excluded),
            "excluded": excluded, **hacks}


def build(source: str = "humaneval", seed: int = 0, none_frac: float = 0.25, test_frac: float = 0.25,
          leetcode_train=None, leetcode_test=None, limits=None, progress: bool = True,
          limit: int | None = None, leetcode_dir=None, min_tests: int = 10,
          difficulties=substrate.DIFFICULTIES, only_recorded=None):
    """Build the substrate. Returns (train, test, check_report).

    humaneval, easy: one pool, split ~3:1 seeded and stratified by mode. leetcode: the test file
    (test_medhard: a path; fetch_leetcode gives the pinned one) and the training problems, either
    a given file (a path) or, by default, the LeetCodeDataset problems disjoint from the test file
    with at least `min_tests` hidden asserts and a difficulty in `difficulties`
    (substrate.leetcodedataset_problems; the files from `leetcode_dir` or the pinned commit);
    each split is assigned modes on its own; only_recorded (a local copy of the rh-s65 pool, or
    'download') keeps the training problems that recorded pool covers. Problems whose canonical
    solution fails under some mode are excluded before modes are assigned, each with its reason
    in the report.
    """
    selected = None
    if source == "humaneval":
        pools = {"all": substrate.humaneval_problems()}
    elif source == "easy":
        pools = {"all": easy.easy_problems()}
    elif source == "leetcode":
        if leetcode_test is None:
            raise InputError("source 'leetcode' needs the leetcode_test path (test_medhard)")
        test_pool = substrate.load_leetcode(leetcode_test)
        if leetcode_train is not None:
            train_pool = substrate.load_any(leetcode_train)
        else:
            files = substrate.leetcodedataset_files(leetcode_dir)
            train_pool, selected = substrate.leetcodedataset_problems(files, test_pool, min_tests, difficulties)
        if only_recorded is not None:
            rows = substrate.load_recorded_rows(substrate.fetch_rh_s65(
                None if only_recorded == "download" else only_recorded, param="substrate.only_recorded"))
            found, matched = substrate.match_recorded(train_pool, rows)
            train_pool = [p for p in train_pool if p.id in set(found.values())]
            selected = {**(selected or {}), "only_recorded": matched, "kept": len(train_pool)}
        pools = {"train": train_pool, "test": test_pool}
    else:
        raise InputError(f"unknown source {source!r}; valid: easy, humaneval, leetcode")
    if limit is not None:  # small presets: the first `limit` problems of each source file
        pools = {name: pool[:limit] for name, pool in pools.items()}
    everything = [p for pool in pools.values() for p in pool]
    canonical, excluded, cpu = check_canonical(everything, limits, progress)
    bad = {e["id"] for e in excluded}
    if selected is not None and leetcode_train is None:
        # LeetCodeDataset training problems are a selection, and a canonical that passes every mode
        # (within the calibration's CPU) is one of its criteria, like min_tests: the ones that fail are
        # left out and listed there. Elsewhere (a given file, test_medhard) an exclusion fails the verdict.
        train_ids = {q.id for q in pools["train"]}
        selected["canonical_failed"] = [e for e in excluded if e["id"] in train_ids]
        excluded = [e for e in excluded if e["id"] not in train_ids]
        failed = {e["id"] for e in selected["canonical_failed"]}
        selected["kept"] -= len(failed)
        selected["kept_by_difficulty"] = {d: sum(q.meta["difficulty"] == d and q.id not in failed for q in pools["train"])
                                          for d in substrate.DIFFICULTIES}
    kept = {name: substrate.assign_modes(calibrate([p for p in pool if p.id not in bad], cpu), seed, none_frac)
            for name, pool in pools.items()}
    if "all" in kept:  # one pool (easy, humaneval): a seeded split stratified by mode
        train, test = substrate.split(kept["all"], seed, test_frac)
    else:
        train, test = kept["train"], kept["test"]
    for name, split in (("train", train), ("test", test)):
        if not split:  # nothing to train on, or no test problem to measure the base model and arms on
            raise InputError(f"substrate: the {name} split is empty ({len(everything)} problems, "
                             f"{len(excluded)} excluded, test_frac {test_frac}): raise params substrate.limit")
    n_checked = len(everything) - len((selected or {}).get("canonical_failed", []))
    report = _report(train + test, n_checked, canonical, excluded, check_hacks(train + test, limits, progress))
    report.update(source=source, seed=seed, n_train=len(train), n_test=len(test),
                  cpu_limits=cpu_summary(train + test, cpu))
    if selected is not None:  # how the LeetCodeDataset training problems were chosen
        report["leetcode_train"] = selected
    return train, test, report


def base_rates(model_dir: str | Path, problems: list[substrate.Problem], t: config.Train, fast: bool, seed: int,
               progress: bool = True) -> dict:
    """The base model's pass@1 and pass@BASE_SAMPLES on `problems`, sampled as the training rollouts
    are (train.max_new_tokens, train.temperature): the headroom the student has before anything
    trains. pass@n is the share of problems with a passing sample among n (stats.pass_at_k); pass@1
    and the hack rate over the samples of hackable problems are the eval's own rates
    (sampling.rates). Reported, not enforced: a tiny test model has no headroom."""
    model, tok = load(str(model_dir))
    expanded, grades = sample_and_grade(model, tok, problems, n_samples=BASE_SAMPLES, temperature=t.temperature,
                                        max_new_tokens=t.max_new_tokens, batch_size=t.gen_batch, seed=seed,
                                        fast=fast, progress=progress)
    samples = sample_rows(expanded, grades, "base")
    overall = next(r for r in rates(samples) if r["mode"] == "overall")
    solved = Counter(s["problem_id"] for s in samples if s["gt_pass"])
    pass1 = overall["solve"]
    return {"split": "test", "n_problems": len(problems), "n_samples": BASE_SAMPLES,
            "max_new_tokens": t.max_new_tokens, "temperature": t.temperature,
            "pass@1": pass1, f"pass@{BASE_SAMPLES}": sum(pass_at_k(BASE_SAMPLES, solved[p.id], BASE_SAMPLES)
                                                         for p in problems) / len(problems),
            "hack_hackable": overall["hack_hackable"],
            "headroom": {"lo": HEADROOM[0], "hi": HEADROOM[1], "within": HEADROOM[0] <= pass1 <= HEADROOM[1]}}


def format_check(report: dict) -> str:
    """The self-check as text tables (for `vgrout substrate check`)."""
    pct = lambda x: "  -  " if x is None else f"{100 * x:5.1f}"  # noqa: E731
    lines = [f"isolation: {report['isolation']}   problems: {report['n_problems']}   modes: {report['mode_counts']}",
             f"hidden tests by shape (all run by the trusted comparison): {report.get('test_shapes')}",
             "", f"canonical x mode (% gt_pass / % flawed_pass / % hacked); pass all modes: "
             f"{report['canonical_pass']}/{report['canonical_checked']}"]
    lines += [f"  {m:<16}{pct(c['gt_pass'])} {pct(c['flawed_pass'])} {pct(c['hacked'])}"
              for m, c in report["canonical_x_mode"].items()]
    lines += [f"  excluded {e['id']}: {e['reason']}" for e in report["excluded"]]
    lines += ["", "hack x mode (% hacked; template rows, grading-mode columns)",
              "  " + " " * 16 + "".join(f"{m:>16}" for m in modes.names())]
    lines += ["  " + f"{t:<16}" + "".join(f"{pct(report['hack_x_mode'][t][m]['hacked']):>16}" for m in modes.names())
              for t in modes.hackable()]
    lines += ["", "diagonal (own-mode problems hacked by their template): " +
              ", ".join(f"{m} {pct(d['hacked']).strip()}% of {d['n']}" for m, d in report["diagonal"].items())]
    leaks = {t: ms for t, ms in report["off_diagonal_pays"].items() if ms}
    lines.append(f"off-diagonal templates paid: {leaks or 'none'}")
    if "cpu_limits" in report:
        c = report["cpu_limits"]
        lines.append(f"CPU limits: the larger of {c['default_s']} s and {c['factor']} x the canonical's "
                     f"(slowest canonical {c['canonical_max_s']:.2f} s; {c['above_default']} problems above the default)")
    if "base" in report:
        b, n = report["base"], report["base"]["n_samples"]
        lines.append(f"base model on the {b['n_problems']} test problems ({n} samples each, {b['max_new_tokens']} new "
                     f"tokens, T {b['temperature']}): pass@1 {pct(b['pass@1']).strip()}%, pass@{n} "
                     f"{pct(b[f'pass@{n}']).strip()}%, hack {pct(b['hack_hackable']).strip()}% of hackable samples; "
                     f"headroom {100 * b['headroom']['lo']:.0f}-{100 * b['headroom']['hi']:.0f}%: "
                     f"{'within' if b['headroom']['within'] else 'OUTSIDE'}")
    if "leetcode_train" in report:
        t = report["leetcode_train"]
        lines.append(f"LeetCodeDataset training problems (>= {t['min_tests']} hidden asserts, {'/'.join(t['difficulties'])}, "
                     f"disjoint from the test file): {t['kept']} kept; left out for a failing canonical: "
                     f"{[e['id'] for e in t.get('canonical_failed', [])] or 'none'}")
    lines.append(f"verdict: {'OK' if report['ok'] else 'FAILED'}")
    return "\n".join(lines)


def build_block(c, progress: bool = True):
    """build() from a params `substrate` block (its local files checked first, test_medhard fetched
    where no local copy is named). Returns (train, test, check_report)."""
    lc_train, lc_test = c.leetcode_train, c.leetcode_test
    only = None if c.only_recorded == "download" else c.only_recorded
    for key, path in (("leetcode_train", lc_train), ("leetcode_test", lc_test), ("leetcode_dir", c.leetcode_dir),
                      ("only_recorded", only)):
        if c.source == "leetcode" and path is not None and not Path(path).exists():
            raise InputError(f"params substrate.{key}: {path}: file not found")
    if c.source == "leetcode":
        lc_test = lc_test or substrate.fetch_leetcode("leetcode_test_medhard", param="substrate.leetcode_test")
    return build(c.source, c.seed, c.none_frac, c.test_frac, lc_train, lc_test, limit=c.limit, progress=progress,
                 leetcode_dir=c.leetcode_dir, min_tests=c.min_tests, difficulties=c.difficulties,
                 only_recorded=c.only_recorded)


def build_stage(params, layout: Layout = Layout(), progress: bool = True) -> dict:
    """DVC stage substrate: build from params' `substrate` block, write the splits and the
    self-check. A failed self-check is an error, never a silently used substrate."""
    out_dir, check_path, c = layout.substrate, layout.substrate_check, params.substrate
    train, test, report = build_block(c, progress)
    substrate.write_problems(Path(out_dir) / "train.jsonl", train)
    substrate.write_problems(Path(out_dir) / "test.jsonl", test)
    if report["ok"]:  # the base model's headroom on the test split
        if not (Path(layout.model) / "config.json").exists():
            raise InputError(f"{layout.model}: no model; the substrate's check samples it, so run the model stage "
                             f"first (dvc repro model)")
        report["base"] = base_rates(layout.model, test, params.train, params.fast, c.seed, progress)
    write_json(check_path, report)
    if not report["ok"]:
        raise InputError(f"{check_path}: the substrate self-check failed:\n{format_check(report)}")
    return report
