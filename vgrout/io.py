"""Small file helpers shared by every stage: atomic writes and jsonl with located errors.

Every output a later stage trusts goes through `atomic_write*`: the bytes land in a
temporary file in the same directory and are renamed into place, so a crash leaves
either the old file or the new one, never half of one.
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import gzip
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any, Iterable, Iterator


class InputError(ValueError):
    """A user-facing input problem; the message names the file, line or key at fault."""


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def append_jsonl(path: str | os.PathLike, row: dict) -> None:
    """Append one row and fsync: step logs are appended, and resumption truncates them."""
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_text(path: str | os.PathLike) -> str:
    """A UTF-8 text file (a .gz file decompressed first); a missing file or other bytes are an
    InputError naming the file and where."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: file not found")
    data = path.read_bytes()
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise InputError(f"{path}: not a complete gzip file ({e})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r})") from None


def read_numbered_jsonl(path: str | os.PathLike) -> list[tuple[int, dict]]:
    """The rows of a jsonl file (.jsonl.gz too), each with its line number; a malformed line is an
    InputError naming file and line."""
    path = Path(path)
    rows = []
    # split on newlines only: a raw U+2028 inside a JSON string is not a line break
    for lineno, line in enumerate(read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{lineno}: malformed JSON line: {e.msg}") from None
        if not isinstance(row, dict):
            raise InputError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
        rows.append((lineno, row))
    return rows


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Read a jsonl file (.jsonl.gz too); a malformed line is an InputError naming file and line."""
    return [row for _, row in read_numbered_jsonl(path)]


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def code_files(module: str) -> list[Path]:
    """The source files of `module` and of every vgrout module it imports, transitively (imports
    in functions too), with the __init__.py of each package on the way: the code a process that
    runs `module` can execute. Found by reading the imports, not by importing."""
    import ast

    pkg_root = Path(__file__).resolve().parent.parent  # the directory holding the vgrout package

    def file_of(name: str) -> Path | None:
        base = pkg_root.joinpath(*name.split("."))
        return base.with_suffix(".py") if base.with_suffix(".py").is_file() else \
            base / "__init__.py" if (base / "__init__.py").is_file() else None

    seen: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # the packages on the way run their __init__.py
            mod = ".".join(parts[:i])
            if mod not in seen and (f := file_of(mod)) is not None:
                seen[mod] = f
                for node in ast.walk(ast.parse(f.read_text(), str(f))):
                    if isinstance(node, ast.Import):
                        todo += [a.name for a in node.names if a.name.split(".")[0] == "vgrout"]
                    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                            and node.module.split(".")[0] == "vgrout":
                        todo.append(node.module)
                        todo += [f"{node.module}.{a.name}" for a in node.names]  # a submodule, where it is one
    return sorted(seen.values())


@contextlib.contextmanager
def staged_dirs(*dirs: Path) -> Iterator[list[Path]]:
    """A fresh, empty directory beside each of `dirs` to write its new contents in; when the block
    succeeds each is swapped into place (the old one removed), when it fails, removed. So a failure
    anywhere leaves the old directories as they were (DVC keeps them: these outs are persist), and a
    success leaves exactly the files this run wrote, none a previous run left. Nothing is written
    into an existing file, so none that DVC's cache may share (a hardlink or symlink) is changed."""
    made: list[Path] = []
    try:
        for d in map(Path, dirs):
            d.parent.mkdir(parents=True, exist_ok=True)
            new = d.parent / f".{d.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
            new.mkdir()  # under the umask, as the directory it replaces was made (mkdtemp's are 0700)
            made.append(new)
        yield list(made)
        for d, new in zip(map(Path, dirs), made):
            _swap_in(new, d)
    finally:
        for new in made:
            shutil.rmtree(new, ignore_errors=True)


RENAME_EXCHANGE, AT_FDCWD = 2, -100  # linux/fs.h, fcntl.h


def _swap_in(new: Path, dest: Path) -> None:
    """Put directory `new` at `dest`, whose old contents end up at `new` (the caller removes them):
    one atomic exchange where Linux and the filesystem offer it, else two renames."""
    if dest.exists():
        try:
            renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
        except (OSError, AttributeError, TypeError):  # no libc to load, or one without renameat2
            renameat2 = None
        if renameat2 and renameat2(AT_FDCWD, os.fsencode(new), AT_FDCWD, os.fsencode(dest), RENAME_EXCHANGE) == 0:
            return
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
        os.rename(dest, old / dest.name)
        os.rename(new, dest)
        shutil.rmtree(old)
        return
    os.rename(new, dest)
