"""One writer per output directory: a lock file that dies with its process.

``with locked(out): ...`` holds an exclusive ``flock`` on ``OUT/.sparse-adapt.lock``; a
second process asking for the same directory is refused at once with a line naming the
holder's pid. The kernel releases the lock when the holder exits, however it exits
(SIGKILL included), so a crash never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sparse_adapt.errors import OutputError

LOCK_FILE = ".sparse-adapt.lock"


class LockError(OutputError):
    """Another process is writing the same output directory."""


@contextmanager
def locked(directory: str | Path) -> Iterator[Path]:
    """Hold ``directory``'s lock for the block (the directory is created if needed).

    A directory this call created and that holds nothing but the lock file afterwards
    (the work failed before writing anything) is removed again.
    """
    directory = Path(directory)
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            raise LockError(
                f"{directory} is in use by another sparse-adapt process (pid {holder}); "
                f"wait for it to finish or choose another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        try:
            yield directory
        finally:
            if created and [p.name for p in directory.iterdir()] == [LOCK_FILE]:
                path.unlink(missing_ok=True)
                directory.rmdir()
    finally:
        os.close(fd)  # closing the descriptor releases the flock
