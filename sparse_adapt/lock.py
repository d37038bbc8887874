"""One writer per output directory: a lock file that dies with its process.

``with locked(out): ...`` holds an exclusive ``flock`` on ``OUT/.sparse-adapt.lock``; a
second process asking for the same directory is refused at once with a line naming the
holder's pid. The kernel releases the lock when the holder exits, however it exits
(SIGKILL included), so a crash never leaves a stale lock behind; the file itself is removed
when the block ends, so a finished run leaves none of it in the user's folder.

Removing a lock file races a process that opened it just before: that process would lock the
unlinked file while a third creates and locks a new one. So a holder only counts once the file
it locked is still the one at the path (the usual flock-and-unlink protocol); otherwise it
opens the path again.
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

    A directory this call created and that is empty afterwards (the work failed before
    writing anything) is removed again.
    """
    directory = Path(directory)
    created = not directory.exists()
    path = directory / LOCK_FILE
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = _acquire(directory, path)
    except BaseException as e:
        # A stop (Ctrl-C) is raised as the system call it came during returns: after os.open made
        # the file, before its descriptor was kept. Removed unless another process holds it.
        if not isinstance(e, LockError) and directory.is_dir():
            _remove_unheld(path)
            _remove_if_made_empty(directory, created)
        raise
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield directory
    finally:
        try:
            _release(fd, path, directory, created)
        except BaseException:  # a stop landing on one of its calls: the rest is done (a 2nd stop is only noted)
            _release(fd, path, directory, created)
            raise
        finally:
            os.close(fd)  # closing the descriptor releases the flock


def _release(fd: int, path: Path, directory: Path, created: bool) -> None:
    if _same_file(fd, path):  # still ours: a later holder never finds it unlinked
        path.unlink(missing_ok=True)
    _remove_if_made_empty(directory, created)


def _remove_if_made_empty(directory: Path, created: bool) -> None:
    if created and directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()


def _acquire(directory: Path, path: Path) -> int:
    """A descriptor holding the flock on the file now at ``path``."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            ours = _same_file(fd, path)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise LockError(
                f"{directory} is in use by another sparse-adapt process (pid {holder}); "
                f"wait for it to finish or choose another --out"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        if ours:
            return fd
        os.close(fd)  # the holder before us removed it after we opened it: open the new one


def _remove_unheld(path: Path) -> None:
    """Remove the lock file at ``path`` unless a process holds it (by the protocol above)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if _same_file(fd, path):
            path.unlink()
    except BlockingIOError:  # held: another process's
        pass
    finally:
        os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False
