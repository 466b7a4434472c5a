"""Pack one decisive session's returned files (d_collect.sh's, kept beside the repository) into the record:
compact, gzipped, the text of the rollouts dropped. Also builds the upstream package a later session carries (so
that every seed of the grid reads the same substrate, pool, pairs and base evaluation) and lists the sha256 of the
files kept beside the repository (the rollouts' features A7 reads, 12 MB a run; the upstream package).

    python docs/runs/2026-11-30-decisive/pack.py RETURNS SESSION_NAME [--upstream OUT.tgz]

RETURNS: the folder of what d_collect.sh brought back: h1.tgz and h2.tgz (the head's files: dvc.lock, params.yaml,
analysis.yaml, metrics/, runs/, data/), h_final.tgz (the head after its aggregate), logs.tgz (the fan-out's
status.json and stage logs) and dd_logs.tgz (/tmp/dd), RUN.acts.gz (each run's rollout_acts.safetensors). Writes docs/runs/2026-11-30-decisive/
SESSION_NAME/: per run RUN/{deploy_samples.csv,per_mode_deploy.json,eval_curve.json,steps.jsonl,rows.jsonl}.gz and
config.json; base/; dvc.lock.gz, params.yaml, device_summary.json (the device's aggregate over this session's
seeds), device_artifacts/ (its A2.md, A7.md, A7.csv, A7_runs.csv, gzipped), logs.tgz, kept_beside.sha256,
returns.sha256 (the returned tarballs, which assemble.py checks).
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
UPSTREAM_STAGES = ("model", "substrate", "pairs", "teacher_pool", "eval_base")  # what a later session reuses
UPSTREAM_FILES = ("data/substrate", "data/pool", "runs/pairs", "metrics/substrate_check.json",
                  "metrics/pairs_check.json", "metrics/pool.json", "metrics/runs/base")


def gz(src: Path, dst: Path, drop: tuple[str, ...] = ()) -> None:
    """src gzipped to dst (mtime 0: the same bytes every time); for a jsonl, the keys in drop removed."""
    data = src.read_bytes()
    if drop:
        rows = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
        data = "".join(json.dumps({k: v for k, v in r.items() if k not in drop}) + "\n" for r in rows).encode()
    with gzip.GzipFile(dst, "wb", mtime=0) as f:
        f.write(data)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def upstream_lock(lock_text: str) -> str:
    """dvc.lock cut to the stages a later session reuses, their entries unchanged (re-written by PyYAML: DVC reads the
    same values)."""
    lock = yaml.safe_load(lock_text)
    missing = [s for s in UPSTREAM_STAGES if s not in lock["stages"]]
    if missing:
        raise SystemExit(f"dvc.lock: no entry for {', '.join(missing)}")
    return yaml.safe_dump({"schema": lock["schema"], "stages": {s: lock["stages"][s] for s in UPSTREAM_STAGES}},
                          sort_keys=False)


def unpack(returns: Path, ws: Path) -> None:
    """The returned files laid out as the head's workspace (ws) and its logs (ws/logs)."""
    for f in ("h1.tgz", "h2.tgz", "h_final.tgz"):  # h_final last: the head's files after its aggregate
        with tarfile.open(returns / f) as tar:
            tar.extractall(ws, filter="data")
    for f in ("logs.tgz", "dd_logs.tgz"):
        with tarfile.open(returns / f) as tar:
            tar.extractall(ws / "logs", filter="data")
    for acts in sorted(returns.glob("*.acts.gz")):
        (ws / "runs/train" / acts.name.removesuffix(".acts.gz") / "rollout_acts.safetensors").write_bytes(
            gzip.decompress(acts.read_bytes()))


RETURNS = ("h1.tgz", "h2.tgz", "h_final.tgz", "logs.tgz", "dd_logs.tgz")  # what d_collect.sh brings back, besides acts


def main(returns: Path, name: str, upstream: Path | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        unpack(returns, Path(tmp))
        pack(Path(tmp), name, upstream)
    (HERE / name / "returns.sha256").write_text("".join(f"{sha256(returns / f)}  {f}\n" for f in RETURNS))


def pack(ws: Path, name: str, upstream: Path | None) -> None:
    out = HERE / name
    if out.exists():
        raise SystemExit(f"{out}: exists (a session is packed once)")
    runs = sorted(p.name for p in (ws / "metrics/runs").iterdir() if p.is_dir())
    out.mkdir()
    kept = []
    for run in runs:
        m, t, o = ws / "metrics/runs" / run, ws / "runs/train" / run, out / run
        o.mkdir()
        for f in ("deploy_samples.csv", "per_mode_deploy.json", "eval_curve.json", "steps.jsonl"):
            if (m / f).exists():
                gz(m / f, o / f"{f}.gz")
        if run == "base":
            continue
        gz(t / "rollouts.jsonl", o / "rows.jsonl.gz", drop=("completion",))
        shutil.copy(t / "config.json", o / "config.json")
        kept.append((sha256(t / "rollout_acts.safetensors"), f"runs/train/{run}/rollout_acts.safetensors"))
    (out / "device_artifacts").mkdir()  # the device aggregate's tables the README quotes (A2: the claims; A7: the gate)
    for f in ("A2.md", "A7.md", "A7.csv", "A7_runs.csv"):
        gz(ws / "metrics/artifacts" / f, out / "device_artifacts" / f"{f}.gz")
    gz(ws / "dvc.lock", out / "dvc.lock.gz")
    shutil.copy(ws / "params.yaml", out / "params.yaml")
    shutil.copy(ws / "metrics/summary.json", out / "device_summary.json")
    with gzip.GzipFile(out / "logs.tgz", "wb", mtime=0) as g, tarfile.open(fileobj=g, mode="w") as tar:
        for p in sorted((ws / "logs").rglob("*")):  # status, stage logs, start/fan-out logs, GPU samples
            if p.is_file() and p.name not in ("done", "smi.pid"):
                tar.add(p, arcname=str(p.relative_to(ws / "logs")))
    if upstream is not None:
        buf = io.BytesIO()
        with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as g, tarfile.open(fileobj=g, mode="w") as tar:
            info = tarfile.TarInfo("dvc.lock")
            text = upstream_lock((ws / "dvc.lock").read_text()).encode()
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text))
            for f in UPSTREAM_FILES:
                tar.add(ws / f, arcname=f)
        upstream.write_bytes(buf.getvalue())
        kept.append((sha256(upstream), f"{upstream.name} (the upstream package, {len(buf.getvalue()):,} bytes)"))
    for f in ("data/substrate/train.jsonl", "data/substrate/test.jsonl", "data/pool/pool.jsonl", "runs/pairs/pairs.json"):
        kept.append((sha256(ws / f), f))
    (out / "kept_beside.sha256").write_text("".join(f"{h}  {p}\n" for h, p in kept))
    print(f"{out}: {len(runs)} runs; {sum(p.stat().st_size for p in out.rglob('*') if p.is_file()):,} bytes")


if __name__ == "__main__":
    args = sys.argv[1:]
    up = None
    if "--upstream" in args:
        i = args.index("--upstream")
        up = Path(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        raise SystemExit(__doc__)
    main(Path(args[0]), args[1], up)
