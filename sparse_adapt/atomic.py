"""Atomic writes: a reader (or a crash) never sees a half-written file or directory.

Everything is written into a hidden temporary sibling of the target and renamed over it only once
complete (``os.replace`` is atomic within one filesystem). On failure or a stop (Ctrl-C, SIGTERM) the
temporary is removed and the target left as it was. The temporary is flushed to disk (fsync) before
the rename and the rename after it: after a power cut the target is the old version or the complete
new one, never a new name on empty files. A process killed mid-write (SIGKILL, power cut) cannot
clean up, so every temporary sibling carries its writer's pid (``.NAME.tmp-PID-*``, a file's
``.NAME.tmp-PID``, ``.NAME.old-PID``) and the next write of the same target removes those whose writer is gone
(:func:`clean_leftovers`), or puts an ``.old`` back where a kill between the two renames of a
replacement left no target.

A target another process made or replaced while the block wrote (two commands given one new
destination) is left alone and the block's output dropped, with one line: the later writer's rename
would delete the earlier one's finished output.

Commands check their destination before any work: :mod:`sparse_adapt.destination`.
"""

from __future__ import annotations

import errno
import glob
import json
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from sparse_adapt.errors import WRITE_ERRNOS, OutputError, os_errno

_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<rest>.*)$")


def _writer_alive(rest: str, entry: Path | None = None) -> bool:
    """Whether the process that named a temporary ``...tmp-<rest>`` may still be writing it.

    A live process with that pid is another one when it started after ``entry`` was last
    written: pids wrap around, and a container's entry point is pid 1 after every restart,
    so a pid alone kept a dead writer's temporaries (and its moved-aside old version) forever.
    """
    pid = rest.split("-", 1)[0]
    if not pid.isdigit():  # not written by a pid-tagging version: nobody can still own it
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        pass
    started = _process_start(int(pid))
    try:
        stat = entry.lstat() if entry is not None else None
    except OSError:
        stat = None
    # ctime too: renaming ".NAME.old-PID" aside keeps the old version's mtime, not its ctime
    written = max(stat.st_mtime, stat.st_ctime) if stat is not None else None
    # Boot time is whole seconds and start times are clock ticks: 2 s of slack.
    return started is None or written is None or started <= written + 2.0


def _process_start(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), from Linux's /proc; None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()  # the name may hold spaces
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat, starttime in ticks
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def clean_leftovers(directory: str | Path, name: str | None = None) -> list[Path]:
    """Remove temporaries of crashed writes in ``directory`` (of target ``name`` only, if given).

    Only hidden ``.NAME.tmp-PID-*`` / ``.NAME.tmp-PID`` / ``.NAME.old-PID`` entries whose process is gone are
    removed; a live writer's temporaries are left alone. Returns what was removed. An
    ``.old`` whose target is missing is the previous, complete version, moved aside by a
    writer killed between its two renames: it is put back, not removed.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    removed = []
    for entry in sorted(directory.iterdir(), key=lambda e: e.name):
        m = _LEFTOVER.match(entry.name)
        if m is None or (name is not None and m["name"] != name) or _writer_alive(m["rest"], entry):
            continue
        target = directory / m["name"]
        if m["kind"] == "old" and not (target.exists() or target.is_symlink()):
            os.replace(entry, target)
            continue
        _remove(entry)
        removed.append(entry)
    return removed


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def remove_own(directory: Path, prefix: str) -> None:
    """Remove what this process named ``prefix*`` in ``directory`` (the pid is in ``prefix``): a stop
    raised as mkdtemp or mkstemp returns comes before the name is bound."""
    for entry in directory.glob(f"{glob.escape(prefix)}*"):
        _remove(entry)


def _umask() -> int:
    os.umask(mask := os.umask(0o022))  # reading the umask means setting it: put it straight back
    return mask


def _raise_naming(e: BaseException, target: Path) -> None:
    """Re-raise a failed write that names no file (``write()`` on a full disk, safetensors' own
    errors) as an ``OSError`` naming ``target``, so the one-line error says where."""
    if isinstance(e, OSError) and e.filename is not None:
        return
    if (code := os_errno(e)) in WRITE_ERRNOS:
        raise OSError(code, os.strerror(code), str(target)) from e


def _share_like_the_user(root: Path) -> None:
    """Give what a writer made owner-only (transformers saves ``model.safetensors`` through a 0600
    temporary) the mode of any file the user makes: a team's model had all but the weights readable."""
    mask = _umask()
    for path in root.rglob("*"):
        if path.is_symlink():
            continue
        mode = path.stat().st_mode & 0o777
        if path.is_file() and mode & 0o077 == 0:
            executable = 0o111 if mode & 0o100 else 0
            os.chmod(path, (0o666 | executable) & ~mask)
        elif path.is_dir() and mode & 0o077 == 0:
            os.chmod(path, 0o777 & ~mask)


def _fsync(path: Path, tree: bool = False) -> None:
    """fsync ``path`` (``tree``: and everything inside it): a rename publishes an output only after
    its data is on disk, and is itself on disk before the command says done (see the module)."""
    # A link inside the tree is not its data; ``path`` itself (a --out's folder) may be one.
    for p in [*(q for q in path.rglob("*") if not q.is_symlink()), path] if tree else [path]:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        except OSError as e:  # a folder some file systems cannot sync (EINVAL): its files were
            if e.errno not in (errno.EINVAL, errno.EBADF) or not p.is_dir():
                raise OSError(e.errno, e.strerror, str(p)) from None  # named: a full disk says where
        finally:
            os.close(fd)


def _identity(path: Path) -> tuple[int, int, int] | None:
    """``path``'s device, inode and status change time (a link's own), None when absent."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino, st.st_ctime_ns


def _check_unchanged(target: Path, before: tuple[int, int, int] | None) -> None:
    """Refuse to publish over a ``target`` another process made or replaced while this block wrote:
    two `export`s into one new --out, both checked while it was still absent, had the later one
    delete the earlier one's finished output. Replaced: another inode *and* change time, since some
    file systems (FUSE without use_ino, CIFS noserverino) renumber an untouched file's inode
    (a rename into place sets the change time)."""
    now = _identity(target)
    if now is None:  # gone meanwhile: nothing of anyone's to lose
        return
    if before is None or (now[:2] != before[:2] and now[2] != before[2]):
        what = "appeared" if before is None else "was replaced"
        raise OutputError(f"{target}: {what} while this command ran (another command writing the same path?); "
                          "it is left as it is and nothing was written: look at what is there, then choose another "
                          "path or pass --overwrite to replace it")


@contextmanager
def atomic_directory(target: str | Path) -> Iterator[Path]:
    """Yield a temporary directory that replaces ``target`` when the block succeeds, and ``target``
    is still what it was when the block began (see :func:`_check_unchanged`); a stop (raised as the
    system call it came during returns) landing on any step leaves no temporary."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(target.parent, target.name)
    before = _identity(target)
    # named before any step: a stop lands on a Python call (a path's "/") outside the steps' cleanup
    prefix, old = f".{target.name}.tmp-{os.getpid()}-", target.parent / f".{target.name}.old-{os.getpid()}"
    try:
        tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
    except BaseException:  # a Ctrl-C during mkdir is raised as it returns, before ``tmp`` is bound
        remove_own(target.parent, prefix)
        raise
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's 0700: the output is shared like any the user makes
        yield tmp
    except BaseException as e:  # with any temporary of the block's own named like it (lucene's input folder)
        remove_own(target.parent, prefix)
        _raise_naming(e, target)
        raise
    try:  # a stop (Ctrl-C) landing on any step up to the rename removes the temporary too
        _share_like_the_user(tmp)
        _fsync(tmp, tree=True)
        _check_unchanged(target, before)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    made, moving = _identity(tmp), False
    try:
        moving = target.exists() or target.is_symlink()  # a directory cannot be replaced by rename while it exists
        if moving:
            os.replace(target, old)
        os.replace(tmp, target)
    except BaseException as e:  # refused at the last step (a mount point, an immutable folder), or stopped
        now = _identity(target)
        if now is not None and now[:2] == made[:2]:  # published: the stop landed just after the rename
            if moving:
                _remove(old)
            raise
        if moving and old.exists() and now is None:
            os.replace(old, target)
        shutil.rmtree(tmp, ignore_errors=True)
        if not isinstance(e, OSError):
            raise
        raise OutputError(f"{target}: cannot be replaced ({e.strerror or e}); nothing was changed") from None
    try:  # before the flush: a failing one must not leave the old version beside the new
        if moving:
            _remove(old)
    except BaseException:  # stopped while a large old version went: the rest goes (a 2nd stop is only noted)
        _remove(old)
        raise
    _fsync(target.parent)


@contextmanager
def atomic_file(target: str | Path) -> Iterator[Path]:
    """Yield a temporary file path that replaces ``target`` when the block succeeds, and ``target``
    is still what it was when the block began (see :func:`_check_unchanged`)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(target.parent, target.name)
    before = _identity(target)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        yield tmp
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        _raise_naming(e, target)
        raise
    try:
        _fsync(tmp)
        _check_unchanged(target, before)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        os.replace(tmp, target)
    except OSError as e:  # an immutable file, another user's file in a sticky folder: the old one stays
        tmp.unlink(missing_ok=True)
        raise OutputError(f"{target}: cannot be replaced ({e.strerror or e}); it was left as it was") from None
    _fsync(target.parent)


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
