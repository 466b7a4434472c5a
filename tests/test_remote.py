"""`vgrout pull` against real DVC: push to a directory remote, clone afresh, pull, nothing to re-run;
and a clone where the remote's relative URL points nowhere gets an error naming the remote."""
from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from tests.workspace import ROOT, env_for, sh
from vgrout import cli
from vgrout.io import InputError
from vgrout.ops import remote

GIT = "git -c user.name=t -c user.email=t@t"


@pytest.fixture(scope="module", autouse=True)
def dvc_env(tmp_path_factory):
    """No user or system DVC config (a global core.remote would change what is tested), no
    analytics daemon, DVC's site cache in tmp."""
    base = tmp_path_factory.mktemp("dvc-env")
    with pytest.MonkeyPatch.context() as mp:
        for var in ("DVC_GLOBAL_CONFIG_DIR", "DVC_SYSTEM_CONFIG_DIR", "DVC_SITE_CACHE_DIR"):
            mp.setenv(var, str(base / var))
        mp.setenv("DVC_NO_ANALYTICS", "1")
        yield


@pytest.fixture(scope="module")
def origin(tmp_path_factory, dvc_env):
    """work/repo: one stage with a cached output, reproduced, pushed to the default remote `store`
    at `../remote` (written `../../remote` in .dvc/config, as the project's is: beside the repo)."""
    work = tmp_path_factory.mktemp("work")
    repo = work / "repo"
    repo.mkdir()
    sh(f"git init -q && dvc init -q && echo hello > in.txt && "
       f"dvc stage add -q -n make -d in.txt -o out.txt 'cp in.txt out.txt' && dvc repro -q && "
       f"dvc remote add -d store ../remote && {GIT} add -A && {GIT} commit -qm init && dvc push -q", repo)
    assert (work / "remote" / "files" / "md5").is_dir()
    return repo


def clone(origin, dest):
    dest.parent.mkdir(parents=True, exist_ok=True)
    sh(f"git clone -q {origin} {dest}", origin.parent)
    assert not (dest / "out.txt").exists() and not (dest / ".dvc" / "cache").exists()
    return dest


def assert_nothing_to_run(root):
    assert "Data and pipelines are up to date" in sh("dvc status", root)
    out = sh("dvc repro", root)
    assert "Stage 'make' didn't change, skipping" in out and "Running stage" not in out, out


def test_fresh_clone_beside_the_remote_pulls_everything(origin):
    root = clone(origin, origin.parent / "clone")
    res = remote.pull(root)
    r = res["remote"]
    assert (r.name, r.url, r.source) == ("store", "../../remote", ".dvc/config")
    assert r.resolved == str(origin.parent / "remote")
    assert res["fetched"] == 1 and res["added"] == ["out.txt"] and res["status"] == {}
    assert (root / "out.txt").read_text() == "hello\n"
    assert_nothing_to_run(root)


def test_cli_pull(origin, monkeypatch):
    root = clone(origin, origin.parent / "clone-cli")
    monkeypatch.chdir(root)
    res = CliRunner().invoke(cli.app, ["pull"])
    assert res.exit_code == 0, res.output
    assert "remote 'store'" in res.output and "fetched 1 files" in res.output
    assert "dvc status: clean" in res.output
    assert (root / "out.txt").read_text() == "hello\n"


def test_clone_where_the_relative_remote_is_missing(origin, tmp_path):
    root = clone(origin, tmp_path / "elsewhere" / "clone")  # ../../remote from here: tmp_path/elsewhere/remote
    missing = tmp_path / "elsewhere" / "remote"
    with pytest.raises(InputError) as e:
        remote.pull(root)
    msg = str(e.value)
    for part in ("DVC remote 'store'", "url '../../remote'", "(in .dvc/config)", f"resolves to {missing}",
                 "does not exist", "dvc remote modify --local store url", "dvc repro"):
        assert part in msg, msg
    assert not (root / "out.txt").exists()
    # The command line ends with that message and status 2, not DVC's "Checkout failed".
    res = subprocess.run([sys.executable, "-m", "vgrout.cli", "pull"], cwd=root, env=env_for(ROOT),
                         capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.startswith("error: DVC remote 'store'"), res.stderr
    assert "Checkout failed" not in res.stdout + res.stderr
    # The reviewer's fix: point the remote at the published store in config.local, then pull.
    sh(f"dvc remote modify --local store url {origin.parent / 'remote'}", root)
    r = remote.check(root)
    assert (r.source, r.resolved) == (".dvc/config.local", str(origin.parent / "remote"))
    assert remote.pull(root)["status"] == {}
    assert_nothing_to_run(root)


def test_remote_that_lacks_the_outputs(origin, tmp_path):
    root = clone(origin, origin.parent / "clone-empty")
    (tmp_path / "empty").mkdir()
    sh(f"dvc remote modify --local store url {tmp_path / 'empty'}", root)
    with pytest.raises(InputError, match=r"DVC remote 'store' \(.*empty\) lacks the cached files of: out\.txt\. "
                                         r"Push them .*`dvc push -r store`"):
        remote.pull(root)


def test_no_remote_or_unknown_remote(tmp_path):
    sh("git init -q && dvc init -q", tmp_path)
    with pytest.raises(InputError, match=r"no DVC remote configured: no core.remote in \.dvc/config or "
                                         r"\.dvc/config\.local .*dvc remote add -d"):
        remote.check(tmp_path)
    with pytest.raises(InputError, match=r"DVC remote 'nope' is not defined .*defined: none"):
        remote.check(tmp_path, "nope")


def test_non_local_url_is_not_contacted(tmp_path):
    sh("git init -q && dvc init -q && dvc remote add -d s3store s3://bucket/x "
       "&& dvc remote add web https://example.invalid/vgrout", tmp_path)
    assert remote.check(tmp_path) == remote.Remote("s3store", "s3://bucket/x", "s3://bucket/x", ".dvc/config")
    assert remote.check(tmp_path, "web").resolved == "https://example.invalid/vgrout"
