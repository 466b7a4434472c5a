"""`vgrout pull`: the cached outputs from the DVC remote, after a check that names a missing remote.

A fresh clone's `dvc pull` from a directory remote that is not on this machine ends in DVC's
"Missing cache files ... Checkout failed", which does not say that the remote itself is
absent. `check` reads the remote the pull would use from DVC's own merged config and, for a
directory remote, says which remote, where it was configured and where it points, and what to do.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from vgrout.io import InputError

HINT = ("Point it at the published store (README, Sharing results): `dvc remote add -d --local store URL`, "
        "or `dvc remote modify --local {name} url URL` (both write .dvc/config.local, not tracked by git); "
        "then `vgrout pull` again. Or recompute the outputs with `dvc repro`.")


@dataclass(frozen=True)
class Remote:
    name: str
    url: str       # as written in its config file
    resolved: str  # DVC's reading of it: an absolute path for a directory remote, else the URL itself
    source: str    # the config file that set the URL (relative to the repository when inside it)


def check(root: Path = Path("."), name: str | None = None) -> Remote:
    """The remote a pull from root would use (`name`, else core.remote); InputError if there is none
    or it is a directory that is not there. URLs with a scheme (s3://, gs://, https://, ssh://) are
    not contacted: a network or credential failure is DVC's to report."""
    from dvc.config import Config
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        conf, files, top = repo.config, repo.config.files, Path(repo.root_dir).resolve()
    # DVC merges the levels in Config.LEVELS order (system, global, repo, local), a later one winning;
    # the raw files give the URL as written and which file it came from.
    raw = {lvl: Config.load_file(files[lvl]) for lvl in Config.LEVELS if lvl in files and Path(files[lvl]).is_file()}

    def where(path: str) -> str:
        p = Path(path).resolve()
        return str(p.relative_to(top)) if p.is_relative_to(top) else str(p)

    repo_files = f"{where(files['repo'])} or {where(files['local'])}"
    if name is None:
        name = conf["core"].get("remote")
        if not name:
            raise InputError(f"no DVC remote configured: no core.remote in {repo_files} (nor a --remote). "
                             "To fetch published outputs add one: `dvc remote add -d --local store URL`; "
                             "or compute them with `dvc repro`.")
    if name not in conf["remote"]:
        raise InputError(f"DVC remote '{name}' is not defined in {repo_files}; defined: "
                         f"{sorted(conf['remote']) or 'none'}. {HINT.format(name=name)}")
    level = next(lvl for lvl in reversed(Config.LEVELS) if "url" in raw.get(lvl, {}).get("remote", {}).get(name, {}))
    remote = Remote(name, raw[level]["remote"][name]["url"], str(conf["remote"][name]["url"]), where(files[level]))
    if re.match(r"\w+://", remote.resolved):  # DVC's own test for "not a path" (Config._resolve)
        return remote
    if not Path(remote.resolved).is_dir():
        state = "is not a directory" if Path(remote.resolved).exists() else "does not exist on this machine"
        raise InputError(f"DVC remote '{name}': url '{remote.url}' (in {remote.source}) resolves to "
                         f"{remote.resolved}, which {state}, so there is nothing to pull from. "
                         f"{HINT.format(name=name)}")
    return remote


def pull(root: Path = Path("."), name: str | None = None) -> dict:
    """Check the remote, pull every cached output from it, then `dvc status`.

    Through DVC's Python API rather than a `dvc pull` subprocess: the same DVC that `check` read the
    config with, and its result is data (the paths added or modified, the count fetched) rather than
    text to parse; a CheckoutError (files the remote lacks) becomes an InputError naming the remote."""
    from dvc.exceptions import CheckoutError
    from dvc.repo import Repo

    remote = check(root, name)
    with Repo(str(root)) as repo:
        def rel(paths):  # DVC gives them relative to the working directory; ours are the repository's
            return [os.path.relpath(p, repo.root_dir) for p in paths]

        try:
            res = repo.pull(remote=remote.name)
        except CheckoutError as e:
            raise InputError(f"DVC remote '{remote.name}' ({remote.resolved}) lacks the cached files of: "
                             f"{', '.join(rel(map(str, e.target_infos)))}. Push them where they were computed "
                             f"(`dvc push -r {remote.name}`), or recompute them with `dvc repro`.") from None
        status = repo.status()
    return {"remote": remote, "fetched": res["stats"]["fetched"], "added": rel(res["added"]),
            "modified": rel(res["modified"]), "status": status}
