"""A DVC stage's entry point: the params dvc.yaml declares for it, and errors a user can act on.

A stage reads only the params its dvc.yaml entry declares (`params:`), so that DVC re-runs it
whenever one of them changes. `scoped` enforces that at run time: reading any other key is a
bug in the stage and fails loudly, in every pipeline run and the CI pipeline test.
A known input problem (InputError) ends the stage with one line on stderr and exit status 2, no
traceback (set VGROUT_TRACEBACK=1 to see one); anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel

from vgrout import config
from vgrout.io import InputError

DVC_YAML = Path("dvc.yaml")


class UndeclaredParam(RuntimeError):
    """A stage read a params key that dvc.yaml does not declare for it."""


def declared(stage: str, dvc_yaml: str | Path = DVC_YAML) -> list[str]:
    """The params keys dvc.yaml declares for `stage` (its `foreach`/`matrix` body included)."""
    stages = (config.read_yaml(dvc_yaml) or {}).get("stages", {})
    if stage not in stages:
        raise InputError(f"{dvc_yaml}: no stage '{stage}'; stages: {', '.join(stages)}")
    spec = stages[stage].get("do", stages[stage])
    keys = spec.get("params", [])
    if not all(isinstance(k, str) for k in keys):
        raise InputError(f"{dvc_yaml}: stage '{stage}': params must be keys of params.yaml")
    return keys


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
    exit_on_input_error(lambda: fn(scoped(stage), *args))
    gc.freeze()


def exit_on_input_error(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except InputError as e:
        if os.environ.get("VGROUT_TRACEBACK"):
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
