"""`vgrout pull` against real DVC: push to a directory remote, clone afresh, pull, nothing to re-run;
the same over HTTP (the pushed directory served read-only on 127.0.0.1, as a reviewer reads a public
bucket); and a clone where the remote's relative URL points nowhere gets an error naming the remote."""
from __future__ import annotations

import functools
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

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


@pytest.fixture
def serve(monkeypatch):
    """serve(directory) -> its http:// URL: the directory read-only over HTTP on 127.0.0.1 (Python's
    http.server answers GET and HEAD only), in a thread, until the test ends. `requests` collects the
    paths asked for. NO_PROXY: DVC's HTTP client reads proxy settings from the environment."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    servers, requests = [], []

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, fmt, *args):
            requests.append(f"{self.command} {self.path} {args[1] if len(args) > 1 else ''}".strip())

    def start(directory):
        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(directory)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    start.requests = requests
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


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


def test_pull_over_http(origin, tmp_path, serve, monkeypatch):
    """A reviewer's clone, where the committed directory remote is absent, pulls from the pushed store
    served over HTTP, named in config.local as the default: the output arrives and nothing is to run."""
    url = serve(origin.parent / "remote")
    root = clone(origin, tmp_path / "reviewer" / "clone")  # ../../remote from here: absent
    sh(f"dvc remote add -d --local web {url}", root)
    monkeypatch.chdir(root)
    res = CliRunner().invoke(cli.app, ["pull"])
    assert res.exit_code == 0, res.output
    assert f"remote 'web' ({url}, from .dvc/config.local): fetched 1 files" in res.output
    assert "1 outputs added" in res.output and "dvc status: clean" in res.output
    assert (root / "out.txt").read_text() == "hello\n"
    # The bytes came over HTTP (a fresh clone has no cache; the directory remote is not on this path).
    assert "GET /files/md5/b1/946ac92492d2347c6235b4d2611184 200" in serve.requests, serve.requests
    assert_nothing_to_run(root)


def test_pull_over_http_from_an_empty_store(origin, tmp_path, serve):
    """The same served directory without the pushed files: `vgrout pull` names the remote and the
    output it lacks, and writes nothing."""
    (tmp_path / "empty").mkdir()
    url = serve(tmp_path / "empty")
    root = clone(origin, tmp_path / "reviewer" / "clone")
    sh(f"dvc remote add -d --local web {url}", root)
    res = subprocess.run([sys.executable, "-m", "vgrout.cli", "pull"], cwd=root, env=env_for(ROOT),
                         capture_output=True, text=True)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"error: DVC remote 'web' ({url}) lacks the cached files of: out.txt." in res.stderr, res.stderr
    assert any(r.startswith("GET /files/md5/b1/946ac92492d2347c6235b4d2611184 404")
               or r.startswith("HEAD /files/md5/b1/946ac92492d2347c6235b4d2611184 404") for r in serve.requests), \
        serve.requests
    assert not (root / "out.txt").exists()


def test_clone_where_the_relative_remote_is_missing(origin, tmp_path):
    root = clone(origin, tmp_path / "elsewhere" / "clone")  # ../../remote from here: tmp_path/elsewhere/remote
    missing = tmp_path / "elsewhere" / "remote"
    with pytest.raises(InputError) as e:
        remote.pull(root)
    msg = str(e.value)
    for part in ("DVC remote 'store'", "url '../../remote'", "(in .dvc/config)", f"resolves to {missing}",
                 "does not exist", "dvc remote add -d --local store URL", "dvc remote modify --local store url",
                 "dvc repro"):
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
