"""`vgrout ...`: one command line over the same library functions the DVC stages call.

Commands that mirror a stage call that stage's function with params.yaml (or --params) read
exactly as the stage reads it: only the keys dvc.yaml declares for it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, get_args

import typer
from rich.console import Console
from rich.table import Table

from vgrout import stage
from vgrout.io import InputError
from vgrout.layout import Layout

app = typer.Typer(help="vgrout: vector gradient routing against reward hacking in GRPO.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
substrate_app = typer.Typer(help="The coding problems with loophole modes.", no_args_is_help=True)
pairs_app = typer.Typer(help="The authored (hack, clean) pairs.", no_args_is_help=True)
app.add_typer(substrate_app, name="substrate")
app.add_typer(pairs_app, name="pairs")
console = Console()

PARAMS = typer.Option(Path("params.yaml"), "--params", help="params file")


@substrate_app.command("build")
def substrate_build(params_file: Path = PARAMS):
    """Write train/test problem files and the self-check (the `substrate` stage)."""
    from vgrout.substrate import selfcheck
    selfcheck.build_stage(stage.scoped("substrate", params_file))


@substrate_app.command("check")
def substrate_check(problems: list[Path] = typer.Argument(None, help="problem files (default: the substrate)")):
    """Grade every canonical solution and every mode's hack template under every mode."""
    from vgrout.substrate import problems as substrate
    from vgrout.substrate import selfcheck
    files = problems or [Layout().train_problems, Layout().test_problems]
    probs = [p for f in files for p in substrate.load_any(f)]
    report = selfcheck.self_check(probs)
    console.print(selfcheck.format_check(report), highlight=False)
    if not report["ok"]:
        raise typer.Exit(1)


@substrate_app.command("headroom")
def substrate_headroom(sources: list[str] = typer.Argument(..., help="candidate sources: easy, humaneval, leetcode"),
                       out: Path = typer.Option(..., "-o", "--out", help="json file to write"),
                       params_file: Path = PARAMS):
    """The base model's pass@1 and pass@8 on each candidate source's test split, sampled as the training
    rollouts are: the substrate stage's check of its own source, for choosing substrate.source."""
    from vgrout import config
    from vgrout.io import write_json
    from vgrout.substrate import selfcheck
    p = config.load(params_file)
    c, found = p.substrate, {}
    valid = get_args(config.Substrate.model_fields["source"].annotation)
    unknown = [s for s in sources if s not in valid]
    if unknown:  # before any build: each one grades every canonical solution
        raise InputError(f"unknown source(s) {unknown}; valid: {', '.join(valid)}")
    for source in sources:
        _, test, report = selfcheck.build_block(c.model_copy(update={"source": source}))
        if not report["ok"]:
            raise InputError(f"substrate '{source}': its self-check failed:\n{selfcheck.format_check(report)}")
        found[source] = selfcheck.base_rates(Layout().model, test, p.train, p.fast, c.seed)
    write_json(out, {"params": str(params_file), "model": p.model.spec, "seed": c.seed, "test_frac": c.test_frac,
                     "sources": found})
    table = Table("source", "test problems", "pass@1", f"pass@{selfcheck.BASE_SAMPLES}", "hack (hackable samples)")
    for source, r in found.items():
        hack = "—" if r["hack_hackable"] is None else f"{r['hack_hackable']:.3f}"
        table.add_row(source, str(r["n_problems"]), f"{r['pass@1']:.3f}", f"{r[f'pass@{selfcheck.BASE_SAMPLES}']:.3f}",
                      hack)
    console.print(table)


@app.command()
def grade(problems: Path, completions: Path, out: Path = typer.Option(..., "-o", "--out"),
          mode: Optional[str] = typer.Option(None, help="grade every row under this mode"),
          format: str = typer.Option("auto", help="problem file format: auto, substrate, leetcode"),
          isolation: str = typer.Option("bwrap", help="bwrap, or rlimit: the weaker rlimit-only sandbox"),
          max_chars: Optional[int] = typer.Option(None, help="longer completions are not parsed (error too_long); "
                                                               "default grader.MAX_COMPLETION_CHARS")):
    """Grade completions ({problem_id, completion, mode?} rows) against a problem file."""
    from vgrout.substrate import grader, sandbox
    grades = grader.grade_files(problems, completions, out, mode=mode, format=format,
                                limits=sandbox.Limits(isolation=isolation),
                                max_chars=grader.MAX_COMPLETION_CHARS if max_chars is None else max_chars)
    n = len(grades)
    console.print(f"graded {n}: gt_pass {sum(g.gt_pass for g in grades)}, "
                  f"hacked {sum(g.hacked for g in grades)} (strict {sum(g.hacked_strict for g in grades)}), "
                  f"errors {sum(g.error is not None for g in grades)}"
                  f" -> {out}")


@pairs_app.command("check")
def pairs_check(files: list[Path] = typer.Argument(None, help="pair files (default: params pairs.*)"),
                params_file: Path = PARAMS):
    """Validate pair files; every problem is reported with its file and line."""
    from vgrout import config
    from vgrout.pairs import pairs
    if not files:
        p = config.load(params_file).pairs
        files = [Path(f) for f in p.files + p.placebo_files]
    problems = pairs.check_files(files)
    for line in problems:
        console.print(line)
    if problems:
        raise typer.Exit(1)
    console.print(f"[green]{len(pairs.load_pairs(files))} pairs OK[/green]")


@app.command("extract-vact")
def extract_vact(seed: int = typer.Option(0), params_file: Path = PARAMS):
    """v_act and v_grad at the adapter init of SEED (the `extract_vact@SEED` stage)."""
    from vgrout.routing import directions, extract
    m = extract.extract_stage(stage.scoped("extract_vact", params_file), seed)
    for name in directions.SPACES.values():
        console.print(f"{name}: separation {m[name]['separation']:.2f}, "
                      f"leave-one-out {m[name]['loo_separation']:.2f}, "
                      f"Haar mean {m[name]['haar_separation']['mean']:.2f}")


@app.command()
def train(arm: str = typer.Option(...), seed: int = typer.Option(0), params_file: Path = PARAMS,
          steps: Optional[int] = typer.Option(None, help="override train.steps")):
    """Dr.GRPO training of one arm and seed (the `train@ARM-SEED` stage); resumes if killed."""
    from vgrout.train import loop as tr
    cfg = tr.train_run(stage.scoped("train", params_file), arm, seed)
    if steps is not None:
        cfg.t = cfg.t.model_copy(update={"steps": steps})
    out = tr.train(cfg)
    console.print(f"adapter -> {out / 'adapter.safetensors'}; step log -> {cfg.log_path}; DVCLive -> {cfg.live_dir}")


@app.command("eval")
def eval_(arm: str = typer.Option(..., help="an arm, or 'base' for the base model"),
          seed: Optional[int] = typer.Option(0), params_file: Path = PARAMS):
    """Deploy and train-mode evaluation of one run (the `eval@ARM-SEED` stage)."""
    from vgrout import arms
    from vgrout.eval import evaluate
    base = arm == arms.BASE
    res = evaluate.eval_stage(stage.scoped("eval_base" if base else "eval", params_file), arm, None if base else seed)
    table = Table("view", "mode", "n", "solve", "hack")
    for r in res["rows"]:
        table.add_row(r["view"], r["mode"], str(r["n"]), f"{r['solve']:.3f}", f"{r['hack']:.3f}")
    console.print(table)


@app.command()
def aggregate(params_file: Path = PARAMS):
    """DuckDB over every run -> metrics/artifacts (A1-A7), metrics/summary.json, plots/."""
    from vgrout.analysis import aggregate as ag
    ag.aggregate_stage(stage.scoped("aggregate", params_file))


@app.command("gate-eval")
def gate_eval(rollouts: Path, acts: Path, direction: Path,
              q_lo: Optional[float] = typer.Option(None, help="default: the schema's gate.q_lo (vgrout/config.py)"),
              q_hi: Optional[float] = typer.Option(None, help="default: the schema's gate.q_hi (vgrout/config.py)"),
              n_null: Optional[int] = typer.Option(None, help="Haar directions of the null (default: diagnostics.N_NULL)"),
              n_perm: Optional[int] = typer.Option(None, help="label permutations (default: diagnostics.N_PERM)"),
              placebo: Optional[Path] = typer.Option(None, help="the style-contrast pairs' direction (v_act_placebo.safetensors)"),
              out: Optional[Path] = typer.Option(None, "-o", "--out")):
    """Gate diagnostics on a labelled rollout file: AUROC (pooled, per step, within prompt groups),
    precision/recall at each cut, F0.5, qmass, against a Haar null, a within-step label-permutation
    null and the style-contrast pairs' direction (labels used only here)."""
    import json

    from vgrout import config
    from vgrout.analysis import diagnostics
    gate = config.Gate()  # one default per key: the schema's, unless given here
    given = {k: v for k, v in dict(n_null=n_null, n_perm=n_perm).items() if v is not None}
    res = diagnostics.gate_eval_file(rollouts, acts, direction, q_lo=gate.q_lo if q_lo is None else q_lo,
                                     q_hi=gate.q_hi if q_hi is None else q_hi, placebo_path=placebo, **given)
    text = json.dumps(res, indent=2)
    if out:
        from vgrout.io import atomic_write_text
        atomic_write_text(out, text + "\n")
    console.print(text)


@app.command()
def fanout(address: Optional[str] = typer.Option(None, help="join this Ray cluster (HOST:PORT of `ray start "
                                                             "--head`, or auto); default: a local one"),
           work: Optional[Path] = typer.Option(None, help="the runs' work directories and logs (default "
                                                          ".dvc/tmp/fanout); on every node, shared or local"),
           remote: Optional[str] = typer.Option(None, help="move cached outputs through this DVC remote instead "
                                                           "of the head's cache (nodes without a shared filesystem)"),
           rest: bool = typer.Option(True, help="then `dvc repro` what reads the runs (aggregate)")):
    """Run every stale train/eval stage as a Ray task (params fanout.*), adopt each into dvc.lock as
    a serial `dvc repro` would have written it, then the rest of the pipeline."""
    from vgrout.ops import fanout as fo
    try:
        fo.fanout(Path("."), address=address, work=work, remote=remote, rest=rest, console=console)
    except fo.FanoutFailed as e:
        console.print(f"[red]{e}[/red]")
        raise typer.Exit(1)


@app.command()
def pull(remote: Optional[str] = typer.Option(None, help="the DVC remote to pull from (default: core.remote)")):
    """Every cached output from the DVC remote, after checking that the remote is there (a missing
    directory remote is named, with what to do); then `dvc status`."""
    from vgrout.ops import remote as rm
    res = rm.pull(Path("."), remote)
    r = res["remote"]
    console.print(f"remote '{r.name}' ({r.resolved}, from {r.source}): fetched {res['fetched']} files; "
                  f"{len(res['added'])} outputs added, {len(res['modified'])} modified", highlight=False)
    for path in res["added"] + res["modified"]:
        console.print(f"  {path}", highlight=False)
    if res["status"]:
        console.print(f"dvc status: {len(res['status'])} stale: {', '.join(sorted(res['status']))} "
                      "(`dvc status` says why; `dvc repro` recomputes them)", highlight=False)
    else:
        console.print("dvc status: clean (nothing to recompute)", highlight=False)


@app.command()
def preset(name: str, params_file: Path = PARAMS):
    """Switch the pipeline to a preset: write a complete params file from the schema's defaults
    overlaid with presets/NAME.yaml."""
    from vgrout import config
    from vgrout.io import atomic_write_text
    atomic_write_text(params_file, config.render(config.preset(name)))
    console.print(f"{params_file} <- defaults + presets/{name}.yaml")


@app.command("model")
def model_prepare(spec: str, out_dir: Path = typer.Option(Layout().model)):
    """Materialise a model spec as a plain safetensors directory (the `model` stage)."""
    from vgrout.engine import model
    console.print(str(model.prepare(spec, out_dir)))


def main():
    stage.exit_on_input_error(app)


if __name__ == "__main__":
    main()
