"""The params schema: one default per key, presets as overlays, errors that name file, key and
what is allowed, and stages that read only the params dvc.yaml declares for them."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vgrout import config, stage
from vgrout.io import InputError

ROOT = Path(__file__).resolve().parents[1]
PRESETS = sorted(p.stem for p in (ROOT / "presets").glob("*.yaml"))


def test_params_yaml_is_the_rendered_default():
    assert config.load(ROOT / "params.yaml") == config.preset("default", ROOT / "presets")


@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_holds_only_what_differs_and_renders_a_complete_file(name, tmp_path):
    over = config.read_yaml(ROOT / "presets" / f"{name}.yaml") or {}
    defaults = config.Params().model_dump()

    def leaves(d, prefix=""):
        for k, v in d.items():
            if isinstance(v, dict) and k != "rates":
                yield from leaves(v, f"{prefix}{k}.")
            else:
                yield prefix + k, v

    flat = dict(leaves(defaults))
    for key, value in leaves(over):
        assert key in flat and value != flat[key], f"presets/{name}.yaml: {key} repeats the default"
    params = config.preset(name, ROOT / "presets")
    (tmp_path / "params.yaml").write_text(config.render(params))
    assert config.load(tmp_path / "params.yaml") == params  # complete: every key is written


def _write(tmp_path, old: str, new: str) -> Path:
    text = config.render(config.Params())
    assert old in text, old
    path = tmp_path / "params.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize("old,new,message", [
    ("  steps: 36", "  steps: '4'", r"params.yaml: train.steps = '4': Input should be a valid integer"),
    ("  steps: 36", "  steps: true", r"train.steps = True: Input should be a valid integer"),
    ("  r: 8 ", "  r: 0 ", r"adapter.r = 0: Input should be greater than or equal to 1"),
    ("  temperature: 0.7", "  temprature: 0.7",
     r"unknown key 'eval.temprature'; valid keys of eval: n_samples, temperature,"),
    ("  per_problem: 8", "  per_problm: 8", r"unknown key 'pool.per_problm'"),
    ("  q_lo: 0.25", "  q_lo: 0.9", r"gate: gate.q_lo \(0.9\) exceeds gate.q_hi \(0.75\)"),
    ("  arms: [none,", "  arms: [nonee,", r"train.arms = .*arm 'nonee' unknown; valid: none, routeA"),
    ("  modes: null", "  modes: [exit]", r"'exit' is not a hackable loophole mode"),
    ("  lr: 0.002", "  lr: 2e-3", r"YAML reads 2e-3 as text: write it with a dot, e.g. 0.002"),
    ("  old_micro_batch: 0", "  old_micro_batch: 24", r"train.old_micro_batch \(24\) is not a multiple"),
    ("  gen_deploy_frac: 0.0", "  gen_deploy_frac: 0.25",
     r"train.gen_deploy_frac \(0.25\) of 2 rows per group is 0.5 rows, not a whole number; valid: 0, 0.5, 1"),
    ("  mix: 0.5", "  mix: 0.3", r"train.mix \(0.3\) of 4 rows per group is 1.2 rows, not a whole number; valid: 0, 0.25"),
    ("  dual_clip: 3.0", "  dual_clip: 1.1", r"train.dual_clip \(1.1\) must exceed 1 \+ train.clip_eps \(1.2\)"),
    ("  is_cap: 2.0", "  is_cap: 1.0", r"train.is_cap = 1.0: Input should be greater than 1"),
    ("  lr: 0.002", "", r"missing key 'train.lr'"),
    ("canonical: 0.1, wrong: 0.15}", "canonical: 0.1}", r"missing key 'pool.rates.wrong'"),
])
def test_a_bad_value_is_one_clear_error(tmp_path, old, new, message):
    with pytest.raises(InputError, match=message) as e:
        config.load(_write(tmp_path, old, new))
    assert str(e.value).startswith(str(tmp_path / "params.yaml"))


@pytest.mark.parametrize("blocks, controls", [
    ({"train": {"arms": ["none", "routeA"], "yoked": ["placebo"]}}, "['placebo']"),  # yoked to routeA's counts
    ({"train": {"arms": ["none", "routeA", "haar"], "yoked": []}}, "['haar']"),      # a free-running Haar placebo
    ({"train": {"arms": ["none", "routeA", "uniform"], "yoked": []}, "gate": {"cut_rule": "step"}}, "['uniform']"),
    ({"train": {"arms": ["routeA", "placeboA1p", "placeboA1n"], "yoked": []}, "gate": {"cut_rule": "step"}},
     "['placeboA1p', 'placeboA1n']"),
])
def test_a_refresh_is_refused_beside_controls(blocks, controls):
    """gate.refresh_every re-extracts a gated arm's direction mid-run; a count-matched, yoked or placebo control was
    matched to the direction as extracted once. A run set with both is one error naming the key and the controls;
    without controls the refresh stands."""
    def parse(blocks):
        blocks = {**blocks, "gate": {"refresh_every": 2, "scorer": "live", **blocks.get("gate", {})}}
        return config.parse(config.overlay(config.Params().model_dump(), blocks), "p.yaml", complete=False)
    with pytest.raises(InputError, match=r"p.yaml: .*gate.refresh_every is 2, and the run set has the controls "
                                         + re.escape(controls)):
        parse(blocks)
    assert parse({"train": {"arms": ["none", "routeA", "heldout"], "yoked": []}}).gate.refresh_every == 2


def test_a_duplicated_block_malformed_yaml_and_bytes_name_the_line(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(config.render(config.Params()) + "train: {steps: 4}\n")
    with pytest.raises(InputError, match=r"params.yaml:\d+:1: invalid YAML: key 'train' given twice"):
        config.load(path)
    path.write_text("train: [\n")
    with pytest.raises(InputError, match=r"params.yaml:2:1: invalid YAML"):
        config.load(path)
    path.write_bytes(b"train: {steps: 4}\n\xff\n")
    with pytest.raises(InputError, match=r"params.yaml:2: not UTF-8 text \(byte 18"):
        config.load(path)


def test_a_stage_reads_only_what_dvc_yaml_declares(tmp_path):
    """The guard that keeps dvc.yaml's params complete: an undeclared read fails, a declared one
    passes (the pipeline test runs every stage under it)."""
    p = stage.scoped("train", ROOT / "params.yaml", ROOT / "dvc.yaml")
    assert p.train.steps == config.load(ROOT / "params.yaml").train.steps and p.gate.q_lo == 0.25 and p.fast is True
    with pytest.raises(stage.UndeclaredParam, match="'gate.random_seed'"):
        p.gate.random_seed
    with pytest.raises(stage.UndeclaredParam, match="'eval'"):
        p.eval
    assert set(p.gate.model_dump()) == {"q_lo", "q_hi", "buffer_size", "warmup", "placebo_seed", "refresh_every",
                                        "scorer", "cut_rule", "center", "score", "teacher_zone"}
    # and it does fail when a stage's declaration misses a key it reads
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    dvc["stages"]["train"]["params"].remove("gate.warmup")
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(dvc))
    with pytest.raises(stage.UndeclaredParam, match="'gate.warmup'"):
        stage.scoped("train", ROOT / "params.yaml", tmp_path / "dvc.yaml").gate.warmup


def test_every_stage_has_one_thin_entry_point():
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    for name, spec in dvc["stages"].items():
        cmd = spec.get("do", spec)["cmd"]
        script = ROOT / cmd.split()[1]
        text = script.read_text()
        entry = "eval_base" if name == "eval_base" else name
        assert f'stage.main("{entry}"' in text or (name in ("eval", "eval_base") and "stage.main(" in text), name
        assert len(text.splitlines()) <= 8, f"{script} is not thin"


def test_a_stage_error_is_one_line_and_no_traceback(tmp_path):
    path = _write(tmp_path, "  steps: 36", "  steps: '4'")
    (tmp_path / "dvc.yaml").write_text((ROOT / "dvc.yaml").read_text())
    out = subprocess.run([sys.executable, str(ROOT / "stages" / "train.py"), "routeA", "0"], cwd=tmp_path,
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 2
    assert out.stderr.strip() == f"error: {path.name}: train.steps = '4': Input should be a valid integer"
    assert "Traceback" not in out.stderr + out.stdout
