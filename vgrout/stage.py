"""A DVC stage's entry point: the params dvc.yaml declares for it, and errors a user can act on.

A stage reads only the params its dvc.yaml entry declares (`params:`), so that DVC re-runs it
whenever one of them changes. `scoped` enforces that at run time: reading any other key is a
bug in the stage and fails loudly, in every pipeline run and the CI pipeline test.
A known input problem (InputError) ends the stage with one line on stderr and exit status 2, no
traceback (set VGROUT_TRACEBACK=1 to see one); anything else is a bug and keeps its traceback.

A stage stops when `dvc repro` does. Ctrl-C reaches it already (the terminal signals DVC's whole
process group; DVC ignores SIGINT while the command runs), but DVC forwards no signal: SIGTERM to
`dvc repro` ends DVC alone and leaves the stage running, orphaned (dvc/stage/run.py `_run`: a plain
Popen, SIGINT ignored, no SIGTERM handler). So a stage under DVC watches DVC's process (a pidfd,
Linux) and sends itself SIGTERM when it ends. DVC's process is the stage's nearest ancestor that is
not a shell: DVC runs `cmd` through $SHELL, or /bin/sh where SHELL is unset, and dash (Debian's sh)
does not exec a lone command, so the shell sits between them. SIGTERM, from there or anyone, raises
KeyboardInterrupt, as Ctrl-C does: `finally` blocks run and a half written file is removed
(io.atomic_path). A stage still going STOP_GRACE_S later is ended outright (what it was staging is
left as a dot-named .tmp, which .gitignore covers).
"""
from __future__ import annotations

import gc
import os
import select
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel

from vgrout import config
from vgrout.io import InputError

DVC_YAML = Path("dvc.yaml")
# The process that started this one, read at import (stage scripts import this module first): if DVC
# is gone by the time main starts watching it, the ancestry read from here shows it.
PARENT = os.getppid()
SHELLS = {"sh", "dash", "bash", "zsh", "fish"}  # what DVC may run `cmd` through
STOP_GRACE_S = 10.0  # after a SIGTERM, how long the stage may take to unwind before it is ended outright


class UndeclaredParam(RuntimeError):
    """A stage read a params key that dvc.yaml does not declare for it."""


def declared(stage: str, dvc_yaml: str | Path = DVC_YAML) -> list[str]:
    """The params keys dvc.yaml declares for `stage` (its `foreach`/`matrix` body included)."""
    stages = (config.read_yaml(dvc_yaml) or {}).get("stages", {})
    if stage not in stages:
        raise InputError(f"{dvc_yaml}: no stage '{stage}'; stages: {', '.join(stages)}")
    spec = stages[stage].get("do", stages[stage])
    keys = spec.get("params", [])
    # a mapping names another params file (aggregate's analysis.yaml, read by its own loader), not keys of params.yaml
    files = [k for k in keys if isinstance(k, dict)]
    if not all(isinstance(k, str) for k in keys if k not in files) or any(len(f) != 1 for f in files):
        raise InputError(f"{dvc_yaml}: stage '{stage}': params must be keys of params.yaml, or `FILE:` (another params file)")
    return [k for k in keys if isinstance(k, str)]


class Scoped:
    """Attribute access to Params limited to `allowed` keys ('train' is a block, 'gate.q_lo' one key)."""

    def __init__(self, node: BaseModel, allowed: set[str], stage: str, prefix: str = ""):
        self._node, self._allowed, self._stage, self._prefix = node, allowed, stage, prefix

    def model_dump(self) -> dict:
        """The declared part of this block, as its plain values."""
        out = {}
        for name in type(self._node).model_fields:
            key = self._prefix + name
            if key in self._allowed or any(a.startswith(key + ".") for a in self._allowed):
                value = getattr(self, name)
                out[name] = value.model_dump() if isinstance(value, (BaseModel, Scoped)) else value
        return out

    def __getattr__(self, name: str) -> Any:
        key = self._prefix + name
        value = getattr(self._node, name)
        if key in self._allowed:
            return value
        if isinstance(value, BaseModel) and any(a.startswith(key + ".") for a in self._allowed):
            return Scoped(value, self._allowed, self._stage, key + ".")
        raise UndeclaredParam(f"stage '{self._stage}' reads params key '{key}', which dvc.yaml does not "
                              f"declare in its params ({', '.join(sorted(self._allowed))})")


def scoped(stage: str, params_file: str | Path = config.PARAMS, dvc_yaml: str | Path = DVC_YAML) -> Scoped:
    return Scoped(config.load(params_file), set(declared(stage, dvc_yaml)), stage)


def main(stage: str, fn: Callable, *args) -> None:
    """Run `fn(params, *args)` as DVC stage `stage`."""
    # A stage process holds millions of objects from torch's and transformers' imports, none of
    # them garbage: frozen, no collection walks them, neither the full ones while the stage runs
    # nor those at exit (about a second a stage). Reference counting still frees what it frees.
    gc.freeze()
    stop_with_parent()
    exit_on_input_error(lambda: fn(scoped(stage), *args))
    gc.freeze()


def stop_with_parent() -> None:
    """SIGTERM raises KeyboardInterrupt; under DVC (which sets DVC_STAGE for a stage's command), on
    Linux, the end of DVC's process sends SIGTERM. Main thread only (signal handlers are set there)."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    if not (os.environ.get("DVC_STAGE") and sys.platform.startswith("linux")):
        return
    chain = _ancestry(PARENT)
    try:
        pidfd = os.pidfd_open(chain[-1])
    except OSError as e:
        print(f"warning: cannot watch DVC's process {chain[-1]} ({e.strerror}): this stage will not stop "
              "if `dvc repro` is killed", file=sys.stderr)
        return
    if os.getppid() != PARENT or _ancestry(PARENT) != chain:  # DVC ended before the watch began
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=_stop_when_ended, args=(pidfd,), daemon=True).start()


def _ancestry(pid: int) -> list[int]:
    """`pid`, then its ancestors while they are shells: the last is the process that ran the shell."""
    chain = [pid]
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if comm not in SHELLS:
            break
        pid = int(rest[1])  # ppid, the field after state
        chain.append(pid)
    return chain


def _stop_when_ended(pidfd: int) -> None:
    select.select([pidfd], [], [])  # a pidfd reads ready once its process has ended
    os.kill(os.getpid(), signal.SIGTERM)


def _on_sigterm(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the stage at once
    threading.Thread(target=_end_after, args=(STOP_GRACE_S,), daemon=True).start()
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _end_after(seconds: float) -> None:
    """Ends the process (SIGTERM's default action, restored by _on_sigterm) if it is still there:
    unwinding can wait on threads that do not stop (an executor's queued work)."""
    time.sleep(seconds)
    os.kill(os.getpid(), signal.SIGTERM)


def exit_on_input_error(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except InputError as e:
        if os.environ.get("VGROUT_TRACEBACK"):
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
