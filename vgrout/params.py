"""params.yaml access with errors that name the missing key."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from vgrout.io import InputError

DEFAULT_PARAMS = Path("params.yaml")


def load(path: str | Path = DEFAULT_PARAMS) -> dict:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: params file not found")
    with open(path) as f:
        params = yaml.safe_load(f)
    if not isinstance(params, dict):
        raise InputError(f"{path}: expected a mapping at top level")
    params["_path"] = str(path)
    return params


def get(params: dict, dotted: str) -> Any:
    """params['a']['b'] for 'a.b', or an InputError naming the key and the file."""
    node: Any = params
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise InputError(f"{params.get('_path', 'params')}: missing key '{dotted}'")
        node = node[part]
    return node
