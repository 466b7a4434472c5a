"""The DVC cache contract: a stage re-runs exactly when something it declares changes, so
every project module a stage's command can import must be one of its `deps` (a listed
directory covers the files under it). And a stage that fails must not delete the git-tracked
metrics it did not get to rewrite.

`missing_deps(root)` is the checker: for every stage of root/dvc.yaml (foreach and matrix
stages expanded by DVC itself), the Python its `cmd` runs (`python stages/x.py`,
`python -m pkg.mod`, a [project.scripts] entry point), the transitive closure of the project
modules that code imports (any import statement, in functions too, relative ones, and
`importlib.import_module` of a literal name), less what the stage's deps cover. It knows no
module by name: a module is project code when it resolves to a file under root.
"""
from __future__ import annotations

import ast
import json
import re
import shlex
import shutil
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import yaml

from tests.workspace import ROOT, copy_tracked_tree, sh

PYTHON = re.compile(r"python(\d+(\.\d+)*)?$")
SHELL_OPERATORS = {"&&", "||", ";", "|", "&", "("}
DYNAMIC = "a computed name: list the directory it imports from"


# ---------------------------------------------------------------------------- stages

@dataclass(frozen=True)
class Output:
    path: str           # relative to root
    cache: bool
    persist: bool


@dataclass(frozen=True)
class Stage:
    name: str           # as `dvc repro` names it: train@routeA-0
    group: str          # the dvc.yaml entry it comes from: train
    cmds: tuple[str, ...]
    wdir: str           # relative to root
    deps: tuple[str, ...]   # file and directory deps (not params), relative to root
    outs: tuple[Output, ...]  # outs, metrics and plots


def load_stages(root: Path) -> list[Stage]:
    """The stages of root/dvc.yaml as DVC reads them: templates resolved, foreach/matrix expanded."""
    from dvc.dependency import ParamsDependency
    from dvc.repo import Repo

    root = Path(root).resolve()
    rel = lambda p: Path(p).resolve().relative_to(root).as_posix()  # noqa: E731
    stages = []
    # no_scm: a copy of the tree need not be a git repository to be read
    with Repo(str(root), config={"core": {"no_scm": True}}) as repo:
        for s in repo.stage.load_file(str(root / "dvc.yaml")):
            wdir = Path(s.wdir)
            stages.append(Stage(
                name=s.name, group=s.name.split("@")[0],
                cmds=tuple([s.cmd] if isinstance(s.cmd, str) else s.cmd), wdir=rel(wdir),
                deps=tuple(rel(wdir / d.def_path) for d in s.deps if not isinstance(d, ParamsDependency)),
                outs=tuple(Output(rel(wdir / o.def_path), o.use_cache, o.persist) for o in s.outs)))
    return stages


# ---------------------------------------------------------------------------- what a cmd runs

@dataclass(frozen=True)
class Entry:
    """Code a command runs: a script file, or a module run with -m or by an entry point."""
    script: Path | None = None
    module: str | None = None


@cache
def console_scripts(root: Path) -> dict[str, str]:
    """[project.scripts] of pyproject.toml: command name -> module."""
    pyproject = root / "pyproject.toml"
    if not pyproject.exists():
        return {}
    scripts = tomllib.loads(pyproject.read_text()).get("project", {}).get("scripts", {})
    return {name: target.split(":")[0] for name, target in scripts.items()}


def entries(cmd: str, cwd: Path, root: Path) -> list[Entry]:
    """The Python a shell command runs: `python [opts] x.py`, `python [opts] -m mod`, any other
    word naming an existing .py file (`uv run x.py`), and [project.scripts] commands."""
    words = list(shlex.shlex(cmd, posix=True, punctuation_chars=True))
    found, i = [], 0
    while i < len(words):
        w = words[i]
        if PYTHON.match(Path(w).name):
            i += 1
            while i < len(words) and words[i].startswith("-"):
                opt = words[i]
                if opt == "-m" and i + 1 < len(words):
                    found.append(Entry(module=words[i + 1]))
                    i += 2
                    break
                if opt == "-c":
                    i += 2  # inline code: nothing to read
                    break
                if opt in ("-W", "-X", "--check-hash-based-pycs"):
                    i += 1
                i += 1
            continue  # a script after the options is found below, as any .py word
        if w.endswith(".py") and (cwd / w).is_file():
            found.append(Entry(script=(cwd / w).resolve()))
        elif w in console_scripts(root) and (i == 0 or words[i - 1] in SHELL_OPERATORS):
            found.append(Entry(module=console_scripts(root)[w]))
        i += 1
    return found


# ---------------------------------------------------------------------------- imports

@dataclass(frozen=True)
class Import:
    module: str | None   # the dotted name after `from`/`import` (None: `from . import x`)
    names: tuple[str, ...]  # what `from module import ...` names (each may be a submodule)
    level: int           # leading dots of a relative import
    line: int
    computed: bool = False  # import_module(<not a literal>)


class _Imports(ast.NodeVisitor):
    """Every import a module can execute: at top level, in functions and classes, in try and
    if blocks; not under `if TYPE_CHECKING:` (never run)."""

    def __init__(self):
        self.found: list[Import] = []

    def visit_If(self, node: ast.If):
        t = node.test
        if (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
                (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"):
            for n in node.orelse:
                self.visit(n)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import):
        self.found += [Import(a.name, (), 0, node.lineno) for a in node.names]

    def visit_ImportFrom(self, node: ast.ImportFrom):
        self.found.append(Import(node.module, tuple(a.name for a in node.names), node.level, node.lineno))

    def visit_Call(self, node: ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if name in ("import_module", "__import__") and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                level = len(arg.value) - len(arg.value.lstrip("."))
                self.found.append(Import(arg.value[level:] or None, (), level, node.lineno))
            else:
                self.found.append(Import(None, (), 0, node.lineno, computed=True))
        self.generic_visit(node)


@cache
def imports_of(path: Path) -> tuple[Import, ...]:
    v = _Imports()
    v.visit(ast.parse(path.read_text(), filename=str(path)))
    return tuple(v.found)


def resolve(name: str, search: tuple[Path, ...], root: Path) -> Path | None:
    """The project file that `import name` executes last (module.py or package/__init__.py),
    or None when name is not project code (stdlib, third party, a namespace directory)."""
    for base in search:
        stem = base.joinpath(*name.split("."))
        for f in (stem.with_suffix(".py"), stem / "__init__.py"):
            if f.is_file():
                return f.resolve() if f.resolve().is_relative_to(root) else None
    return None


def module_name(path: Path, search: tuple[Path, ...]) -> str | None:
    for base in search:
        if path.is_relative_to(base):
            parts = list(path.relative_to(base).with_suffix("").parts)
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return None


def closure(entry: Entry, cwd: Path, root: Path) -> tuple[set[Path], list[str]]:
    """The project files running entry executes, and the places that import a computed name."""
    # sys.path[0] is the script's directory (or the cwd with -m); the project root stands for
    # the installed package.
    search = tuple(dict.fromkeys([entry.script.parent if entry.script else cwd, root]))
    files: set[Path] = set()
    computed: list[str] = []
    todo: list[tuple[Path, str | None]] = []

    def add(path: Path, name: str | None):
        if path not in files:
            files.add(path)
            todo.append((path, name))

    def import_dotted(dotted: str) -> bool:
        """`import a.b.c` runs a/__init__, a/b/__init__ and a/b/c; True if a.b.c is project code."""
        parts = dotted.split(".")
        for k in range(1, len(parts) + 1):
            prefix = ".".join(parts[:k])
            f = resolve(prefix, search, root)
            if f is None:
                return False
            add(f, prefix)
        return True

    if entry.script:
        add(entry.script, None)  # run as __main__: no package, relative imports fail
    elif import_dotted(entry.module):
        main = resolve(entry.module, search, root)
        if main.name == "__init__.py" and (main.parent / "__main__.py").is_file():
            add(main.parent / "__main__.py", entry.module + ".__main__")

    while todo:
        path, name = todo.pop()
        package = None
        if name is not None:
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for imp in imports_of(path):
            if imp.computed:
                computed.append(f"{path.relative_to(root).as_posix()}:{imp.line}: import of {DYNAMIC}")
                continue
            if imp.level:
                if not package:
                    continue  # a relative import outside a package: an ImportError when run
                up = package.split(".")
                if imp.level - 1 >= len(up):
                    continue
                base = ".".join(up[:len(up) - (imp.level - 1)])
                dotted = f"{base}.{imp.module}" if imp.module else base
            else:
                dotted = imp.module
            if not import_dotted(dotted):
                continue
            for n in imp.names:
                if n != "*":
                    sub = resolve(f"{dotted}.{n}", search, root)
                    if sub is not None:
                        import_dotted(f"{dotted}.{n}")
    return files, computed


# ---------------------------------------------------------------------------- the checker

def covered(path: str, deps) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in deps)


def required(stage: Stage, root: Path) -> tuple[set[str], list[str]]:
    """Files (relative to root) that stage's commands execute, and its computed imports."""
    root = Path(root).resolve()
    cwd = root / stage.wdir
    files, computed = set(), []
    for cmd in stage.cmds:
        for e in entries(cmd, cwd, root):
            f, c = closure(e, cwd, root)
            files |= {p.relative_to(root).as_posix() for p in f}
            computed += c
    return files, computed


def missing_deps(root: Path = ROOT, stages: list[Stage] | None = None) -> dict[str, list[str]]:
    """stage name -> the project files it can execute that its deps do not cover (and any
    import of a computed name in a directory its deps do not cover). Empty: the contract holds."""
    root = Path(root).resolve()
    found = {}
    for stage in load_stages(root) if stages is None else stages:
        files, computed = required(stage, root)
        missing = sorted(f for f in files if not covered(f, stage.deps))
        missing += [c for c in computed if not covered(str(Path(c.split(":")[0]).parent), stage.deps)]
        if missing:
            found[stage.name] = missing
    return found


# ---------------------------------------------------------------------------- tests

def test_every_stage_declares_the_project_modules_it_imports():
    found = missing_deps(ROOT)
    assert not found, "stages whose deps miss project code they run:\n" + json.dumps(found, indent=2)


def test_every_stage_runs_project_code():
    """Guard on the checker: it sees the Python each stage runs (else it proves nothing)."""
    for stage in load_stages(ROOT):
        files, _ = required(stage, ROOT)
        assert len(files) > 1, (stage.name, stage.cmds, files)  # an entry point and what it imports


def _template(d: dict) -> dict:
    return d["do"] if "foreach" in d else d


@pytest.mark.parametrize("kind", ["plain", "expanded"])
def test_checker_reports_a_dropped_dep(tmp_path, kind):
    """Drop one module from one stage's deps in a copy of the tree: the checker names exactly
    that module, for exactly that stage (every stage a foreach/matrix entry expands to)."""
    stages = load_stages(ROOT)
    doc = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    group = next(g for g, d in doc["stages"].items()
                 if ("foreach" in d or "matrix" in d) == (kind == "expanded")
                 and any(s.group == g for s in stages))
    first = next(s for s in stages if s.group == group)
    needed, _ = required(first, ROOT)
    scripts = {e.script.relative_to(ROOT).as_posix()
               for c in first.cmds for e in entries(c, ROOT / first.wdir, ROOT) if e.script}
    deps = _template(doc["stages"][group])["deps"]
    dropped = next(d for d in reversed(deps) if d in needed - scripts and d.endswith(".py"))

    copy = copy_tracked_tree(tmp_path / "tree")
    deps.remove(dropped)
    (copy / "dvc.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))

    assert missing_deps(copy) == {s.name: [dropped] for s in stages if s.group == group}


def test_checker_follows_every_import_form(tmp_path):
    """python script.py, python -m mod, an entry point; import a.b, from a import b (b a
    submodule), from a.b import name, from . import x, from .. import y, imports in functions,
    import_module("literal"); not TYPE_CHECKING imports, not third-party ones, not what -c
    runs; a computed import_module is reported."""
    files = {
        "pyproject.toml": '[project.scripts]\ntool = "pkg.cli:main"\n',
        "pkg/cli.py": "def main():\n    pass\n",
        "pkg/never2.py": "",
        "pkg/__init__.py": "",
        "pkg/a.py": "import pkg.sub.b\nfrom pkg import c, notamodule\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/b.py": "from . import d\nfrom .. import e\n",
        "pkg/sub/d.py": "import importlib\nimportlib.import_module('pkg.h')\n",
        "pkg/c.py": "def f():\n    from pkg.sub.g import name\n",
        "pkg/e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.never\nimport json\n",
        "pkg/sub/g.py": "name = 1\n",
        "pkg/h.py": "import importlib\ndef load(x):\n    return importlib.import_module(f'pkg.{x}')\n",
        "pkg/never.py": "",
        "run.py": "import pkg.a\n",
    }
    for f, text in files.items():
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text(text)
    cmds = ("python -u run.py tool && python -m pkg.c; python -c 'import pkg.never2'", "tool --x")
    stage = Stage("s", "s", cmds, ".", ("run.py",), ())
    found = missing_deps(tmp_path, [stage])["s"]
    assert found == sorted(set(files) - {"pyproject.toml", "run.py", "pkg/never.py", "pkg/never2.py"}) \
        + [f"pkg/h.py:3: import of {DYNAMIC}"]
    # a directory dep covers the files under it, and the computed import in it
    assert missing_deps(tmp_path, [Stage("s", "s", cmds, ".", ("run.py", "pkg"), ())]) == {}


@pytest.mark.parametrize("preset", [None, "replication"])
def test_layout_and_dvc_yaml_name_the_same_paths(preset, tmp_path):
    """Every path vgrout.layout gives a stage to write is an output of a dvc.yaml stage (or lies
    inside one), for every arm and seed of params.yaml (and of the replication preset, whose yoked
    arms copy three arms): the two homes of a path cannot drift."""
    from vgrout import arms, config
    from vgrout.layout import Layout, run_name

    root = ROOT
    if preset:  # dvc.yaml under another params.yaml
        root = tmp_path
        shutil.copy(ROOT / "dvc.yaml", root / "dvc.yaml")
        (root / ".dvc").mkdir()
        (root / "params.yaml").write_text(config.render(config.preset(preset)))
    stages = load_stages(root)
    outs = {o.path for s in stages for o in s.outs}
    params, lay = config.load(root / "params.yaml"), Layout()
    # a yoked run trains after the run it copies: its stage reads that run's step log
    yoked = {s.name: s for s in stages if s.group == "train_yoked"}
    assert len(yoked) == len(params.train.yoked) * len(params.gate.yoke_to) * len(params.train.seeds) > 0
    for arm in params.train.yoked:
        for to in params.gate.yoke_to:
            for seed in params.train.seeds:
                s = yoked[f"train_yoked@{arm}-{to}-{seed}"]
                assert f"metrics/runs/{to}-{seed}/steps.jsonl" in s.deps
                assert lay.run(run_name(arms.yoked_name(arm, to), seed)).as_posix() in {o.path for o in s.outs}
    written = [lay.model, lay.train_problems, lay.test_problems, lay.substrate_check, lay.pairs,
               lay.pairs_check, lay.pool, lay.pool_metrics, lay.artifacts, lay.summary,
               lay.plots / "png", lay.plots / "html", lay.run_metrics("base") / "per_mode_deploy.json",
               lay.deploy_samples("base")]
    for seed in params.train.seeds:
        written += [lay.vact(seed), lay.vact_metrics(seed)]
        for arm in params.run_arms:  # a yoked run by its yoked_name (placebo_routeA)
            run = run_name(arm, seed)
            written += [lay.run(run), lay.deploy_samples(run), *(lay.run_metrics(run) / f for f in
                                                                 ("steps.jsonl", "per_mode_deploy.json", "eval_curve.json")),
                        lay.run_live(run) / "metrics.json", lay.run_live(run) / "plots" / "metrics"]
    inside = lambda p: any(p == o or p.startswith(o + "/") for o in outs)  # noqa: E731
    assert [p.as_posix() for p in written if not inside(p.as_posix())] == []


def test_git_tracked_metrics_persist():
    """DVC deletes a stage's outputs before running it unless they are `persist: true`: every
    `cache: false` output (git tracks it), file or directory, must persist, so a failed stage
    leaves it in place (a directory is swapped in whole by its stage, io.staged_dirs, so it keeps
    no file a new run no longer writes)."""
    loose = [(s.name, o.path) for s in load_stages(ROOT) for o in s.outs if not o.cache and not o.persist]
    assert not loose, f"cache: false outputs without persist: true: {loose}"


@pytest.mark.slow
def test_a_failed_stage_keeps_its_tracked_metrics(reproduced_copy):
    """A copy of the reproduced CI repository, its substrate's self-check committed, then a
    substrate source that does not exist: the repro fails and the committed self-check is still
    there, byte for byte."""
    work = reproduced_copy
    check = work / "metrics/substrate_check.json"
    before = check.read_bytes()
    assert json.loads(before)["ok"]
    sh("git add -A && git -c user.name=t -c user.email=t@t commit -qm substrate", work)

    params = yaml.safe_load((work / "params.yaml").read_text())
    params["substrate"]["source"] = "nope"
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = sh("dvc repro substrate", work, check=False)
    assert "failed to reproduce 'substrate'" in out and "substrate.source = 'nope'" in out, out
    assert check.read_bytes() == before


def test_code_digest_hashes_exactly_what_a_training_run_imports():
    """train's resume fingerprint (code_digest over vgrout.io.code_files of the train loop) covers
    the modules this file's independent checker finds the loop importing, transitively, and no
    other: not the analysis, not the benchmark (editing either does not restart a run)."""
    from vgrout.io import code_files
    hashed = {p.relative_to(ROOT).as_posix() for p in code_files("vgrout.train.loop")}
    imported, _ = closure(Entry(module="vgrout.train.loop"), ROOT, ROOT)
    assert hashed == {p.relative_to(ROOT).as_posix() for p in imported}
    assert {"vgrout/engine/decode.py", "vgrout/routing/gate.py", "vgrout/substrate/sandbox.py"} <= hashed
    assert not any(p.startswith(("vgrout/analysis/", "bench/", "vgrout/ops/")) for p in hashed), sorted(hashed)
