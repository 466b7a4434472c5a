"""The run records as DuckDB tables: each run's per_mode_deploy.json, per-sample grades, eval curve and
step log, checked and loaded, for the contrasts and the artifacts to query.

Inputs per run `{arm}-{seed}` (written by vgrout.eval.evaluate and vgrout.train.loop):
  metrics/runs/{run}/per_mode_deploy.json, deploy_samples.csv, eval_curve.json, steps.jsonl
  runs/train/{run}/rollouts.jsonl, rollout_acts.safetensors     (A7 only)
The reference run `base` (arm "base", seed null) needs only per_mode_deploy.json.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterable

import duckdb
import pandas as pd

from vgrout.arms import BASE, METHOD, REGISTRY, yoked_name
from vgrout.io import InputError, read_json
from vgrout.layout import DEPLOY_SAMPLES

ROW_KEYS = ("view", "mode", "n", "n_solved", "n_hacked", "solve", "hack", "n_hackable", "hack_hackable", "n_none",
            "solve_none")
ROW_TYPE = ("STRUCT(view VARCHAR, mode VARCHAR, n BIGINT, n_solved BIGINT, n_hacked BIGINT, solve DOUBLE, "
            "hack DOUBLE, solve_lo DOUBLE, solve_hi DOUBLE, hack_lo DOUBLE, hack_hi DOUBLE, "
            "n_hackable BIGINT, n_hacked_hackable BIGINT, hack_hackable DOUBLE, hack_hackable_lo DOUBLE, "
            "hack_hackable_hi DOUBLE, n_none BIGINT, n_solved_none BIGINT, solve_none DOUBLE, solve_none_lo DOUBLE, "
            "solve_none_hi DOUBLE{extra})[]")
DEPLOY_COLUMNS = {"run": "VARCHAR", "rows": ROW_TYPE.format(extra="")}
CURVE_COLUMNS = {"run": "VARCHAR", "rows": ROW_TYPE.format(extra=", step BIGINT")}
# Step-log columns the artifacts read; pinned so an all-null column (e.g. is_max_route_student in
# the `none` arm) still has a numeric type.
STEP_COLUMNS = {"step": "BIGINT", "hack_rate": "DOUBLE", "solve_rate": "DOUBLE", "qmass_rollouts": "DOUBLE",
                "qmass_update": "DOUBLE", "n_keep": "BIGINT", "n_absorb": "BIGINT", "n_route": "BIGINT",
                **{f"n_{z}_teacher": "BIGINT" for z in ("keep", "absorb", "route")},
                "gradnorm_deployed": "DOUBLE", "gradnorm_quarantine": "DOUBLE",
                **{f"is_{s}_{z}_student": "DOUBLE" for z in ("keep", "absorb", "route") for s in ("p50", "max")}}
STEP_REQUIRED = ("step", "qmass_rollouts", "qmass_update")
# deploy_samples.csv as vgrout.eval.evaluate writes it (SAMPLE_FIELDS, in this order; booleans as 0/1)
SAMPLE_COLUMNS = {"view": "VARCHAR", "problem_id": "VARCHAR", "sample": "BIGINT", "mode": "VARCHAR",
                  "hackable": "INTEGER", "gt_pass": "INTEGER", "hacked": "INTEGER", "hacked_strict": "INTEGER"}


# ---------------------------------------------------------------------------- inputs

@dataclasses.dataclass(frozen=True)
class Run:
    run: str
    arm: str
    seed: int | None
    heldout_modes: tuple[str, ...] | None
    deploy_path: Path
    samples_path: Path | None
    curve_path: Path | None
    steps_path: Path | None
    rollouts_path: Path | None
    acts_path: Path | None


def _require(path: Path) -> Path:
    if not path.exists():
        raise InputError(f"{path}: file not found")
    return path


def load_run(metrics_root: Path, runs_root: Path, run: str, gate_inputs: bool = True) -> Run:
    """One run's files, checked. gate_inputs False: without its rollouts and their activations
    (A7's inputs), for re-making the other artifacts where only the metrics were kept."""
    deploy_path = _require(metrics_root / run / "per_mode_deploy.json")
    d = read_json(deploy_path)
    for key in ("run", "arm", "seed", "rows"):
        if key not in d:
            raise InputError(f"{deploy_path}: missing key '{key}'")
    if d["run"] != run:
        raise InputError(f"{deploy_path}: key 'run' is '{d['run']}' but the file sits in the directory of run '{run}'")
    for i, row in enumerate(d["rows"]):
        for key in ROW_KEYS:
            if key not in row:
                raise InputError(f"{deploy_path}: rows[{i}] missing key '{key}'")
    if not any(r["view"] == "deploy" and r["mode"] == "overall" for r in d["rows"]):
        raise InputError(f"{deploy_path}: no row with view 'deploy' and mode 'overall'")
    if d["arm"] == BASE:  # its samples give the base's pass@k (older base runs wrote none)
        samples = metrics_root / run / DEPLOY_SAMPLES
        return Run(run, BASE, None, None, deploy_path, _samples_file(samples) if samples.exists() else None,
                   None, None, None, None)
    if not isinstance(d["seed"], int):
        raise InputError(f"{deploy_path}: key 'seed' must be an integer for arm '{d['arm']}', got {d['seed']!r}")
    if d["arm"] in REGISTRY and REGISTRY[d["arm"]].yoked:  # a yoked run is named for the arm it copies
        raise InputError(f"{deploy_path}: arm '{d['arm']}' is yoked and its run names no arm it copies; yoked runs "
                         f"are {yoked_name(d['arm'], 'TO')} (gate.yoke_to). A run made before that, "
                         f"{d['arm']}-SEED, copied {METHOD.name}: rename it {yoked_name(d['arm'], METHOD.name)}-SEED")
    heldout = d.get("heldout_modes")
    return Run(run=run, arm=d["arm"], seed=d["seed"],
               heldout_modes=tuple(heldout) if heldout is not None else None,
               deploy_path=deploy_path, samples_path=_samples_file(metrics_root / run / DEPLOY_SAMPLES),
               curve_path=_require(metrics_root / run / "eval_curve.json"),
               steps_path=_require(metrics_root / run / "steps.jsonl"),
               rollouts_path=_require(runs_root / run / "rollouts.jsonl") if gate_inputs else None,
               acts_path=_require(runs_root / run / "rollout_acts.safetensors") if gate_inputs else None)


def _samples_file(path: Path) -> Path:
    """A per-sample grades file whose header is the one evaluate writes: DuckDB reads the columns by
    position, so a reordered or foreign csv would be misread silently."""
    with open(_require(path)) as f:
        header = f.readline().rstrip("\r\n")
    if header != ",".join(SAMPLE_COLUMNS):
        raise InputError(f"{path}: header '{header}', expected '{','.join(SAMPLE_COLUMNS)}'")
    return path


def find_runs(metrics_root: str | Path) -> list[str]:
    """Every run directory under metrics_root holding a per_mode_deploy.json."""
    found = sorted(p.parent.name for p in Path(metrics_root).glob("*/per_mode_deploy.json"))
    if not found:
        raise InputError(f"{metrics_root}: no */per_mode_deploy.json found")
    return found


def _sql_files(paths: Iterable[Path]) -> str:
    return "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths) + "]"


def _sql_columns(columns: dict[str, str]) -> str:
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in columns.items()) + "}"


def load_tables(runs: list[Run]) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with tables run_info, deploy, curve, steps (rows unnested)."""
    con = duckdb.connect()
    con.execute("CREATE MACRO sem(x) AS stddev_samp(x) / sqrt(count(x))")
    info = pd.DataFrame([{"run": r.run, "arm": r.arm, "seed": r.seed} for r in runs])
    con.register("run_info_df", info)
    con.execute("CREATE TABLE run_info AS SELECT run, arm, seed::BIGINT AS seed FROM run_info_df")
    con.execute(f"""
        CREATE TABLE deploy AS
        SELECT run, unnest(rows, recursive := true)
        FROM read_json({_sql_files(r.deploy_path for r in runs)}, columns = {_sql_columns(DEPLOY_COLUMNS)})""")
    trained = [r for r in runs if r.arm != BASE]
    if not trained:
        raise InputError("no trained runs (only the base reference run) to aggregate")
    con.execute(f"""
        CREATE TABLE curve AS
        SELECT run, unnest(rows, recursive := true)
        FROM read_json({_sql_files(r.curve_path for r in trained)}, columns = {_sql_columns(CURVE_COLUMNS)})""")
    files = pd.DataFrame({"filename": [str(r.steps_path) for r in trained], "run": [r.run for r in trained]})
    con.register("step_files", files)
    con.execute(f"""
        CREATE TABLE steps AS
        SELECT f.run, s.* EXCLUDE (filename)
        FROM read_json({_sql_files(r.steps_path for r in trained)}, format = 'newline_delimited',
                       columns = {_sql_columns(STEP_COLUMNS)}, filename = true) s
        JOIN step_files f USING (filename)""")
    for col in STEP_REQUIRED:
        bad = con.execute(f"SELECT f.filename FROM step_files f LEFT JOIN steps s USING (run) "
                          f"GROUP BY f.filename HAVING count(s.{col}) = 0 OR count(s.{col}) < count(*)").fetchall()
        if bad:
            raise InputError(f"{bad[0][0]}: key '{col}' missing or null in some rows (or no rows)")
    for r in trained:
        n = con.execute("SELECT count(*) FROM curve WHERE run = ? AND view = 'deploy' AND mode = 'overall'",
                        [r.run]).fetchone()[0]
        if n == 0:
            raise InputError(f"{r.curve_path}: no row with view 'deploy' and mode 'overall'")
    con.execute("CREATE VIEW per_run AS SELECT i.*, d.* EXCLUDE (run) FROM deploy d JOIN run_info i USING (run)")
    _load_samples(con, [r for r in runs if r.samples_path is not None])
    return con


def _load_samples(con, trained: list[Run]) -> None:
    """Table samples: the per-sample grades of every trained run (and of base, where it wrote them),
    checked against its per_mode_deploy.json."""
    files = pd.DataFrame({"filename": [str(r.samples_path) for r in trained], "run": [r.run for r in trained]})
    con.register("sample_files", files)
    con.execute(f"""
        CREATE TABLE samples AS
        SELECT f.run, s.* EXCLUDE (filename)
        FROM read_csv({_sql_files(r.samples_path for r in trained)}, header = true, filename = true,
                      columns = {_sql_columns(SAMPLE_COLUMNS)},
                      -- the dialect stated, not sniffed: a sniffed one is the first file's, and DuckDB
                      -- silently dropped the rows of a file whose line ends (CRLF vs LF) differed
                      auto_detect = false, delim = ',', quote = '"', escape = '"') s
        JOIN sample_files f USING (filename)""")
    where = {r.run: r for r in trained}
    dup = con.execute("""SELECT run, view, problem_id, sample FROM samples
                         GROUP BY ALL HAVING count(*) > 1 LIMIT 1""").fetchone()
    if dup:
        raise InputError(f"{where[dup[0]].samples_path}: view '{dup[1]}', problem '{dup[2]}', sample {dup[3]} "
                         "appears more than once")
    # The bootstrap resamples these rows while the tables print per_mode_deploy.json's rates: a
    # samples file of another eval (a stale copy, a hand edit) would make the two disagree.
    bad = con.execute("""
        SELECT d.run, d.n, d.n_hacked, d.n_solved, c.n, c.n_hacked, c.n_solved
        FROM deploy d
        LEFT JOIN (SELECT run, count(*) AS n, sum(hacked) AS n_hacked, sum(gt_pass) AS n_solved
                   FROM samples WHERE view = 'deploy' GROUP BY run) c USING (run)
        WHERE d.view = 'deploy' AND d.mode = 'overall' AND list_contains($runs, d.run)
          AND (c.n IS NULL OR c.n <> d.n OR c.n_hacked <> d.n_hacked OR c.n_solved <> d.n_solved)
        ORDER BY d.run LIMIT 1""", {"runs": [r.run for r in trained]}).fetchone()
    if bad:
        r = where[bad[0]]
        raise InputError(f"{r.samples_path}: its deploy samples (n={bad[4]}, hacked={bad[5]}, solved={bad[6]}) do not "
                         f"reproduce {r.deploy_path}'s overall deploy row (n={bad[1]}, hacked={bad[2]}, "
                         f"solved={bad[3]}): the two files come from different evals; re-run eval of {r.run}")
