"""Atomic writes: a reader (or a crash) never sees a half-written file or directory.

Everything is written into a hidden temporary sibling of the target and renamed over it
only once complete (``os.replace`` is atomic within one filesystem). On failure the
temporary is removed and the target is left as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


@contextmanager
def atomic_directory(target: str | Path) -> Iterator[Path]:
    """Yield a temporary directory that replaces ``target`` when the block succeeds."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if target.exists():
        # A directory cannot be replaced by rename while it exists: move it aside first.
        old = target.parent / f".{target.name}.old-{os.getpid()}"
        os.replace(target, old)
    os.replace(tmp, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextmanager
def atomic_file(target: str | Path) -> Iterator[Path]:
    """Yield a temporary file path that replaces ``target`` when the block succeeds."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, target)


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write text (UTF-8) or bytes to ``path`` atomically."""
    with atomic_file(path) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """``obj`` as indented, key-sorted JSON, atomically."""
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")
