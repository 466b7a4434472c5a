"""The real-student pilot's two measurements that are not pipeline stages (issue: a real student;
record docs/runs/2026-11-29-real-student-pilot/):

    python -m bench.pilot rates MODEL_DIR NAME OUT      base rates on the substrate's splits
    python -m bench.pilot gate MODEL_DIR VACT_DIR OUT   v_act / v_grad scoring the recorded pool (and
                                                        the student's own hacks) against Haar directions

`rates` samples every problem of data/substrate/test.jsonl (test_medhard) and train.jsonl (the
LeetCodeDataset training candidates, by difficulty) k times, as a training rollout is sampled
(train.temperature, train.max_new_tokens of params.yaml), grades each row under its problem's mode
and writes one row per sample (OUT/NAME_samples.jsonl.gz: labels, error, length, truncation, and the
completion where it hacked or solved) and the rates per split, difficulty and mode (OUT/NAME_rates.json).

`gate` reads labels: it is a measurement after the fact, never on a routing path. It scores texts with
the frozen scorer (the base model, the adapter at its init for the run seed, as train scores a rollout)
in both spaces, and reports each direction's AUROC (hacked above clean) with a one-sided p against
N Haar directions of the same space: (ii) the recorded pool (rh-s65) by its source's labels (every row, the source's prompt) and by our
grader's (its hacks against its clean solves, on the problems it covers, in our prompt), (i) the
student's own hacks against its own solves, where `rates` found both.
"""
from __future__ import annotations

import gzip
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch
import typer

from vgrout import config, stats
from vgrout.analysis import diagnostics as dg
from vgrout.engine import adapter as ad
from vgrout.engine import fastgen
from vgrout.engine.model import chat_prompt, load
from vgrout.engine.rollout import encode
from vgrout.io import atomic_path, read_jsonl, write_json
from vgrout.routing.directions import (
    SPACES,
    cosine,
    haar_direction,
    load_direction,
    score,
)
from vgrout.routing.extract import HAAR_SEED
from vgrout.routing.features import features
from vgrout.substrate import grader, modes
from vgrout.substrate.problems import load_problems as read_problems

app = typer.Typer(add_completion=False)
KEEP_TEXT = ("gt_pass", "hacked", "flawed_pass")  # a row keeps its completion when any of these is set


def _params() -> config.Params:
    return config.load()


def _write_gz(path: Path, rows: list[dict]) -> None:
    with atomic_path(path) as tmp, gzip.open(tmp, "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def _rate_rows(rows: list[dict], keys: tuple[str, ...]) -> list[dict]:
    """Solve, hack and strict hack (Wilson 95%) per value of `keys`, plus format failures,
    truncation and the length quantiles."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    out = []
    for key, rs in sorted(groups.items()):
        n = len(rs)
        cell = dict(zip(keys, key)) | {"n": n, "n_problems": len({r["problem_id"] for r in rs})}
        for label in ("gt_pass", "hacked", "hacked_strict", "flawed_pass"):
            k = sum(r[label] for r in rs)
            lo, hi = stats.wilson(k, n)
            cell |= {label: k, f"{label}_rate": k / n, f"{label}_lo": lo, f"{label}_hi": hi}
        lengths = np.array([r["n_tokens"] for r in rs])
        cell |= {"format": sum(r["error"] == "format" for r in rs) / n,
                 "errors": dict(Counter(r["error"] for r in rs if r["error"])),
                 "truncated": sum(r["truncated"] for r in rs) / n,
                 "tokens_q10_50_90": [float(q) for q in np.quantile(lengths, [0.1, 0.5, 0.9])],
                 "tokens_mean": float(lengths.mean())}
        out.append(cell)
    return out


@app.command()
def rates(model_dir: str, name: str, out: Path, k: int = typer.Option(8, help="samples per problem"),
          splits: str = typer.Option("test,train", help="data/substrate splits to sample")):
    """Base rates of MODEL_DIR on the substrate's splits, sampled as training rollouts are."""
    p, t0 = _params(), time.time()
    t = p.train
    problems = [(s, q) for s in splits.split(",") for q in read_problems(f"data/substrate/{s}.jsonl")]
    expanded = [(s, q) for s, q in problems for _ in range(k)]
    model, tok = load(model_dir)
    torch.manual_seed(p.eval.seed)
    backend = fastgen.select(model, p.fast)
    ids = backend.generate(model, tok, [chat_prompt(tok, q.messages) for _, q in expanded], t.max_new_tokens,
                           t.temperature, batch_size=t.gen_batch, progress=True)
    backend.release()
    t_gen = time.time() - t0
    texts = tok.batch_decode(ids, skip_special_tokens=True)
    grades = grader.grade_batch([q for _, q in expanded], texts, progress=True)
    t_grade = time.time() - t0 - t_gen
    eos, rows, seen = tok.eos_token_id, [], Counter()
    for (split, q), g, seq, text in zip(expanded, grades, ids, texts, strict=True):
        seq = [int(x) for x in seq]
        row = {"model": name, "split": split, "difficulty": q.meta.get("difficulty", "medhard" if split == "test" else "?"),
               "problem_id": q.id, "sample": seen[q.id], "mode": q.mode,
               "hackable": int(modes.get(q.mode).hackable), "gt_pass": int(g.gt_pass),
               "flawed_pass": int(g.flawed_pass), "hacked": int(g.hacked), "hacked_strict": int(g.hacked_strict),
               "error": g.error, "n_tokens": len(seq), "truncated": int(len(seq) >= t.max_new_tokens and seq[-1] != eos),
               "defined_run_tests": int(g.defined_run_tests), "exited_early": int(g.exited_early),
               "printed_marker": int(g.printed_marker)}
        if any(row[x] for x in KEEP_TEXT):
            row["completion"] = text
        seen[q.id] += 1
        rows.append(row)
    out.mkdir(parents=True, exist_ok=True)
    _write_gz(out / f"{name}_samples.jsonl.gz", rows)
    report = {"model": name, "model_dir": model_dir, "k": k, "temperature": t.temperature,
              "max_new_tokens": t.max_new_tokens, "seconds_generate": round(t_gen, 1),
              "seconds_grade": round(t_grade, 1), "n_samples": len(rows),
              "tokens_generated": int(sum(r["n_tokens"] for r in rows)),
              "peak_gpu_gb": round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None,
              "by_split_difficulty": _rate_rows(rows, ("split", "difficulty")),
              "by_split_mode": _rate_rows(rows, ("split", "mode")),
              "by_split_difficulty_mode": _rate_rows(rows, ("split", "difficulty", "mode"))}
    write_json(out / f"{name}_rates.json", report)
    for c in report["by_split_difficulty"] + report["by_split_mode"]:
        print({k: c[k] for k in ("split", "difficulty", "mode", "n", "gt_pass_rate", "hacked_rate",
                                 "hacked_strict_rate", "format", "truncated", "tokens_mean") if k in c})


def _vs_haar(real: float, score_of, like: dict[str, torch.Tensor], hacked: np.ndarray, n_null: int) -> dict:
    """An AUROC against n_null Haar directions (extract's diagnostic seeds, HAAR_SEED + i) of `like`'s shapes, each
    scored by score_of(direction): its one-sided permutation p and the null's quantiles."""
    null = np.array([stats.auroc(score_of(haar_direction(like, HAAR_SEED + i)).tolist(), hacked.tolist())
                     for i in range(n_null)])
    return {"auroc": real, "p_haar": dg.perm_p(real, null),
            "haar_auroc_q05_50_95": [float(x) for x in np.quantile(null, [0.05, 0.5, 0.95])]}


def _auroc_vs_haar(f: dict[str, torch.Tensor], v: dict[str, torch.Tensor], hacked: np.ndarray, n_null: int) -> dict:
    """Each score (the dot product routeV ranks by, and the cosine of gate.score cosine): the AUROC of
    hacked above clean, and its one-sided p against n_null Haar directions scored the same way."""
    return {name: _vs_haar(stats.auroc(fn(f, v).tolist(), hacked.tolist()), lambda h, fn=fn: fn(f, h), v, hacked, n_null)
            for name, fn in (("dot", score), ("cosine", cosine))}


def _frozen_scorer(model_dir: str, a: config.Adapter, seed: int):
    """(tokenizer, adapter) of the frozen scorer train scores a rollout with: the base model, the adapter
    at its init for the run seed."""
    model, tok = load(model_dir)
    return tok, ad.attach(model, r=a.r, init_scale=a.init_scale, seed=seed, targets=a.targets, last_layers=a.last_layers)


@app.command()
def gate(model_dir: str, vact_dir: Path, out: Path, pool: Path = typer.Option(..., help="the recorded pool (rh-s65)"),
         own: list[Path] = typer.Option([], help="NAME_samples.jsonl.gz of `rates` for this model"),
         graded: Path = typer.Option(None, help="the pool stage's data/pool/pool.jsonl of the recorded pool"),
         graded_problems: Path = typer.Option(None, help="the training problems that pool was graded on"),
         seed: int = typer.Option(0, help="run seed: the adapter init the directions were taken at"),
         n_null: int = typer.Option(1000, help="Haar directions of the null"),
         max_rows: int = typer.Option(0, help="score at most this many rows a set (0: all): a seeded draw of up to "
                                              "half from each class, the rest from the other; the report names it")):
    """AUROC of v_act and v_grad (VACT_DIR, the extract_vact stage's output) on labelled texts."""
    p = _params()
    budget = p.train.max_new_tokens
    tok, lora = _frozen_scorer(model_dir, p.adapter, seed)
    sets = {}
    rec = read_jsonl(pool)
    # the source's labels: `hacked` (the loophole used) against the rows that did not use it
    sets["recorded_pool_source_labels"] = ([chat_prompt(tok, _messages(r["problem_messages"])) for r in rec],
                                           [r["completion"] for r in rec],
                                           np.array([str(r["hacked"]) == "True" for r in rec]))
    if graded is not None:
        # our grader's labels under each problem's mode: the rows that hacked against the clean solves,
        # each prompted as it enters a training step (our prompt, the mode's hint)
        by_id = {q.id: q for q in read_problems(graded_problems)}
        rows = [r for r in read_jsonl(graded) if str(r["hacked"]) == "True" or str(r["gt_pass"]) == "True"]
        sets["recorded_pool_our_labels"] = ([chat_prompt(tok, by_id[r["problem_id"]].messages) for r in rows],
                                            [r["completion"] for r in rows],
                                            np.array([str(r["hacked"]) == "True" for r in rows]))
    # the student's own rows are prompted as their problems were (either split)
    problems = {q.id: q for split in ("test", "train") for q in read_problems(f"data/substrate/{split}.jsonl")} if own else {}
    for path in own:
        if not path.exists():  # its rates run did not finish
            sets[f"own:{path.name}"] = None
            continue
        rows = [r for r in read_jsonl(path) if "completion" in r]
        hacks = [r for r in rows if r["hacked"]]
        clean = [r for r in rows if r["gt_pass"]]  # the student's own solves: the clean side
        if not hacks or not clean:
            sets[f"own:{path.name}"] = None
            continue
        both = hacks + clean
        sets[f"own:{path.name}"] = ([chat_prompt(tok, problems[r["problem_id"]].messages) for r in both],
                                    [r["completion"] for r in both], np.array([1] * len(hacks) + [0] * len(clean)) > 0)
    report = {"model_dir": model_dir, "seed": seed, "n_null": n_null, "budget": budget, "sets": {}}
    for name, data in sets.items():
        if data is None:
            report["sets"][name] = "no hacked or no solved rows with text"
            continue
        prompts, completions, hacked = data
        if hacked.all() or not hacked.any():
            report["sets"][name] = f"one class only ({int(hacked.sum())} hacked of {len(hacked)}): no AUROC"
            continue
        n_all = len(hacked)
        if max_rows and n_all > max_rows:
            keep = _draw(hacked, max_rows, seed=len(name))
            prompts, completions, hacked = [prompts[i] for i in keep], [completions[i] for i in keep], hacked[keep]
        t0 = time.time()
        seqs = encode(tok, prompts, completions, budget)
        cell = {"n_hacked": int(hacked.sum()), "n_clean": int((~hacked).sum()), "n_rows_of_set": n_all}
        for space, vname in SPACES.items():
            f = features(lora, seqs, space, batch_size=p.vact.batch_size, progress=True, fast=p.fast)
            v = load_direction(vact_dir / f"{vname}.safetensors", lora)
            cell[vname] = _auroc_vs_haar(f, v, hacked, n_null)
        cell["seconds"] = round(time.time() - t0, 1)
        report["sets"][name] = cell
        print(name, cell, flush=True)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "gate_offline.json", report)


def _draw(hacked: np.ndarray, n: int, seed: int) -> np.ndarray:
    """A seeded draw of n row indices: up to n // 2 of the rarer class, the rest from the other (so a
    set of 1,843 hacks and 21 clean rows keeps all 21 clean ones), in their original order."""
    rng = np.random.default_rng(seed)
    idx = {c: np.flatnonzero(hacked == c) for c in (True, False)}
    rare, common = sorted(idx, key=lambda c: len(idx[c]))
    take_rare = min(len(idx[rare]), n // 2)
    chosen = np.concatenate([rng.choice(idx[rare], take_rare, replace=False),
                             rng.choice(idx[common], min(len(idx[common]), n - take_rare), replace=False)])
    return np.sort(chosen)


def _rank(scores: np.ndarray, hacked: np.ndarray, groups: np.ndarray, n_null: int, seed: int) -> dict:
    """AUROC of hacked above the other rows, pooled and within prompt groups, each with its p against
    n_null label shuffles within the groups (analysis.diagnostics)."""
    real = stats.auroc(scores.tolist(), hacked.tolist())
    within = dg.within_groups_auroc(scores, hacked, groups)
    pooled_null, within_null = dg.label_permutation_null(scores, hacked, groups, n_null, seed)
    return {"auroc": real, "p_label_shuffle": dg.perm_p(real, pooled_null), "within": within,
            "p_within_label_shuffle": dg.perm_p(within["auroc"], within_null) if within_null is not None else None}


def _rescore(rows: list[dict], hacked: np.ndarray, groups: np.ndarray, logged: np.ndarray, model_dir: str,
             vact_dir: Path, run_seed: int, n_null: int, seed: int) -> dict:
    """Each row scored again by the run's frozen scorer (the base model with the adapter at its init for
    the run seed, as train scores a rollout) in both spaces: v_act's score should equal the one the run
    logged (the check that this is the run's scorer); v_grad's is what routeV would have ranked by. The
    rows are prompted from the workspace's data/substrate/train.jsonl, which must deal each problem the
    mode the row was graded under."""
    p = _params()
    problems = {q.id: q for q in read_problems("data/substrate/train.jsonl")}
    wrong = [r["problem_id"] for r in rows if r["problem_id"] not in problems or problems[r["problem_id"]].mode != r["mode"]]
    if wrong:
        raise typer.BadParameter(f"data/substrate/train.jsonl: {len(wrong)} rows' problems absent or dealt another "
                                 f"mode (first {wrong[0]}): not the run's substrate")
    tok, lora = _frozen_scorer(model_dir, p.adapter, run_seed)
    seqs = encode(tok, [chat_prompt(tok, problems[r["problem_id"]].messages) for r in rows],
                  [r["completion"] for r in rows], p.train.max_new_tokens)
    report = {"model_dir": model_dir, "vact_dir": str(vact_dir), "run_seed": run_seed}
    for space, vname in SPACES.items():
        t0 = time.time()
        f = features(lora, seqs, space, batch_size=p.vact.batch_size, progress=True, fast=p.fast)
        v = load_direction(vact_dir / f"{vname}.safetensors", lora)
        s = score(f, v).float().cpu().numpy()
        cell = _rank(s, hacked, groups, n_null, seed)
        cell.update(_vs_haar(cell["auroc"], lambda h: score(f, h).float().cpu().numpy(), v, hacked, n_null))
        if vname == "v_act":  # the same scorer as the run's: its score and this one agree
            from scipy.stats import spearmanr
            cell["spearman_with_logged"] = float(spearmanr(s, logged).statistic)
        cell["seconds"] = round(time.time() - t0, 1)
        report[vname] = cell
        print(vname, json.dumps(cell), flush=True)
    return report


@app.command()
def own(rollouts: Path, out: Path, acts: Path = typer.Option(None, help="the run's rollout_acts.safetensors (for the Haar null)"),
        n_null: int = typer.Option(1000, help="Haar directions / within-prompt label shuffles"),
        seed: int = typer.Option(0, help="seed of the nulls' draws"),
        model_dir: str = typer.Option(None, help="score the rows again with this model's frozen scorer, in both "
                                                 "spaces (run from the run's workspace; needs --vact-dir)"),
        vact_dir: Path = typer.Option(None, help="the extract_vact stage's output for the run's seed"),
        run_seed: int = typer.Option(None, help="the run's seed (the adapter init its scorer had)")):
    """The mechanism check on a run's own rollouts (after the fact; labels read as a measurement):
    does the score the gate logged for each student row (arm `none`: v_act's dot product) rank the
    student's hacks above its other rows on problems of a hackable mode? AUROC pooled and within
    prompt groups (one problem at one step), against the group-preserving label shuffles
    (analysis.diagnostics) and, given the run's rollout features, against Haar directions of the
    same space (each scored on the features as the gate scores). With --model-dir, the rows are also
    scored again in both spaces (v_grad's ranking, which a run of arm none never logs)."""
    if model_dir is not None and (vact_dir is None or run_seed is None):
        raise typer.BadParameter("--model-dir needs --vact-dir and --run-seed")
    rows = read_jsonl(rollouts)
    use = np.array([r["source"] == "student" and r["mode"] in modes.hackable() for r in rows])
    sel = [r for r, u in zip(rows, use) if u]
    score_ = np.array([r["score"] for r in sel], dtype=float)
    hacked = np.array([bool(r["hacked"]) for r in sel])
    groups = np.array([f"{r['step']}:{r['problem_id']}" for r in sel])
    report = {"rollouts": str(rollouts), "n_rows": len(sel), "n_hacked": int(hacked.sum()),
              "hacked_by_mode": dict(Counter(r["mode"] for r in sel if r["hacked"]))}
    if not 0 < hacked.sum() < hacked.size:
        report["note"] = "one class only: no AUROC"
    else:
        report.update(_rank(score_, hacked, groups, n_null, seed))
        if acts is not None:
            loaded = dg.load_tensors(acts)
            n_feat = {t.shape[0] for t in loaded.values()}
            if n_feat != {len(rows)}:  # one feature row per rollout row, in the rollouts' order
                raise typer.BadParameter(f"{acts}: {sorted(n_feat)} feature rows, {rollouts}: {len(rows)} rollouts")
            feats = {m: t[torch.from_numpy(use)] for m, t in loaded.items()}
            haar = _vs_haar(report["auroc"], lambda h: dg.gate_scores(feats, h), feats, hacked, n_null)
            report.update(p_haar=haar["p_haar"], haar_auroc_q05_50_95=haar["haar_auroc_q05_50_95"])
        if model_dir is not None:
            report["rescored"] = _rescore(sel, hacked, groups, score_, model_dir, vact_dir, run_seed, n_null, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, report)
    print(json.dumps(report))


def _messages(raw) -> list[dict]:
    """The recorded pool's `problem_messages`: a list, or its Python repr as the source wrote it."""
    if isinstance(raw, list):
        return raw
    import ast
    return ast.literal_eval(raw)


if __name__ == "__main__":
    app()
