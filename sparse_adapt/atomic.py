"""Atomic writes: a reader (or a crash) never sees a half-written file or directory.

Everything is written into a hidden temporary sibling of the target and renamed over it only once
complete (``os.replace`` is atomic within one filesystem). On failure or a stop (Ctrl-C, SIGTERM) the
temporary is removed and the target left as it was. The temporary is flushed to disk (fsync) before
the rename and the rename after it: after a power cut the target is the old version or the complete
new one, never a new name on empty files. A process killed mid-write (SIGKILL, power cut) cannot
clean up, so every temporary sibling carries its writer's pid (``.NAME.tmp-PID-*``,
``.NAME.old-PID``) and the next write of the same target removes those whose writer is gone
(:func:`clean_leftovers`), or puts an ``.old`` back where a kill between the two renames of a
replacement left no target.

A target another process made or replaced while the block wrote (two commands given one new
destination) is left alone and the block's output dropped, with one line: the later writer's rename
would delete the earlier one's finished output.

Commands check their destination before any work (:func:`check_output`): an existing non-empty
directory or an existing file is the user's and is refused unless they pass ``--overwrite``, and a
destination that cannot be written fails at once, not after an hour of encoding.
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
from typing import Any, Iterator, Literal, Sequence

from sparse_adapt.data.reading import encodable
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

    Only hidden ``.NAME.tmp-PID-*`` / ``.NAME.old-PID`` entries whose process is gone are
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


def _remove_ours(directory: Path, prefix: str) -> None:  # this process's temporaries of one target
    for entry in directory.glob(f"{glob.escape(prefix)}*"):
        _remove(entry)


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


# Bytes a temporary's name adds to its target's: ".", ".tmp-", a pid of up to 7 digits, "-",
# mkdtemp's 8 characters, and a suffix such as the indexer's "-input".
TEMPORARY_EXTRA = 40


def _name_max(directory: Path) -> int:
    try:
        return os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def check_writable(target: str | Path, flag: str = "--out", into: bool = False) -> None:
    """Fail now, with one line, if ``target`` could not be created or replaced (``into``: if
    files could not be written inside the directory ``target``, as a run directory needs)."""
    target = Path(target)
    if not encodable(str(target)):  # a name in another encoding: tokenizers saved no model there (a traceback)
        shown = str(target).encode("utf-8", "backslashreplace").decode("utf-8")
        raise OutputError(f"{flag} {shown}: the path is not valid UTF-8 (a name in another encoding); "
                          "give a UTF-8 path")
    where = target if into and target.is_dir() else _nearest_existing(target.parent)
    if not where.is_dir():
        raise OutputError(f"{flag} {target}: {where} is a file, not a directory")
    if not into:  # the hidden temporary beside it (.NAME.tmp-PID-XXXXXXXX) is the longer name: refused after the work
        limit, size = _name_max(where), len(os.fsencode(target.name))
        if size + TEMPORARY_EXTRA > limit:
            raise OutputError(f"{flag} {target}: the name is too long ({size} bytes; the hidden temporary written "
                              f"beside it needs {TEMPORARY_EXTRA} more, of the {limit} this file system allows)")
    try:
        # Permission bits do not tell the whole story (root, read-only mounts, immutable
        # directories): create and remove a file where the output will go.
        fd, probe = tempfile.mkstemp(prefix=f".sparse-adapt-probe-{os.getpid()}-", dir=where)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputError(f"{flag} {target}: cannot write in {where} ({e.strerror or e})") from None


def check_output(
    target: str | Path, overwrite: bool = False, kind: Literal["directory", "file"] = "directory", flag: str = "--out",
    inputs: Sequence[str | Path | None] = (),
) -> Path:
    """Check a command's destination before any work is done; returns it as a Path.

    Refused unless ``overwrite``: an existing file, an existing non-empty directory (an
    empty one is used as is). A directory is never replaced by a file. Refused always: one
    of ``inputs`` (a local path; a built-in or Hub name is skipped) or a folder holding one,
    since the replacement would delete it; the working directory or a folder holding it;
    anything but a regular file or a directory (a device, a pipe: replacing ``/dev/null``
    with a file breaks the system). Crash leftovers of earlier writes of ``target`` are
    removed; a destination that cannot be written fails.
    """
    target = Path(target)
    check_not_an_input(target, inputs, flag)
    resolved = _resolve(target, flag)
    if resolved == Path.cwd().resolve() or resolved in Path.cwd().resolve().parents:
        raise OutputError(f"{flag} {target} is the working directory or holds it; give a new folder for the result")
    if target.exists() and not (target.is_file() or target.is_dir()):
        raise OutputError(f"{flag} {target} is not a regular file or directory (a device or a pipe); give a file path")
    if target.is_dir() and os.path.ismount(target):  # a container's volume: renames cannot replace it
        raise OutputError(f"{flag} {target} is a mount point, which an output replaces whole and cannot; "
                          "give a new folder inside it")
    clean_leftovers(target.parent, target.name)
    if target.is_dir():
        if kind == "file":
            raise OutputError(f"{flag} {target} is a directory; give a file path")
        entries = sum(1 for _ in target.iterdir())
        if entries and not overwrite:
            raise OutputError(
                f"{flag} {target} is not empty ({entries} {'entry' if entries == 1 else 'entries'}); "
                f"pass --overwrite to replace it, or choose another path"
            )
    elif target.exists() and not overwrite:
        raise OutputError(f"{flag} {target} is an existing file; pass --overwrite to replace it, or choose another path")
    check_writable(target, flag)
    return target


def _resolve(target: Path, flag: str) -> Path:
    """``target`` resolved; a loop of symbolic links is one line (Python 3.11's resolve() raises
    RuntimeError for it, a traceback)."""
    try:
        return target.resolve()
    except (RuntimeError, OSError) as e:
        if isinstance(e, OSError) and e.errno != errno.ELOOP:
            raise
        raise OutputError(f"{flag} {target}: a loop of symbolic links; give a path that leads somewhere") from None


def check_not_an_input(target: str | Path, inputs: Sequence[str | Path | None], flag: str = "--out",
                       holding: bool = True) -> None:
    """``target`` is none of ``inputs``, holds none of them (unless ``holding`` is False: a
    directory whose own files are written beside the user's, as tune's) and is not inside an
    input folder (written over, they would be lost or damaged: `--save-run
    MODEL/tokenizer.json` broke a model; a new file there would be refused when written again,
    so none is written there); inputs that are no local path (a built-in base, a Hub id) are skipped."""
    resolved = _resolve(Path(target), flag)
    for given in inputs:
        if given is None or not Path(given).exists():
            continue
        path = Path(given).resolve()
        if path == resolved:
            raise OutputError(f"{flag} {target} is also an input ({given}); write the result somewhere else")
        if holding and resolved in path.parents:
            raise OutputError(f"{flag} {target} holds an input ({given}), which writing there would delete; "
                              "write the result somewhere else")
        if path in resolved.parents:  # a model's tokenizer.json replaced by a run file
            raise OutputError(f"{flag} {target} is inside an input's folder ({given}), whose files an output "
                              "could replace; write the result somewhere else")


def empty_or_model_directory(path: Path) -> bool:
    """An empty directory, or one holding a saved Hugging Face model (``config.json``)."""
    return not any(path.iterdir()) or (path / "config.json").is_file()


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
        _remove_ours(target.parent, prefix)
        raise
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's 0700: the output is shared like any the user makes
        yield tmp
    except BaseException as e:  # with any temporary of the block's own named like it (lucene's input folder)
        _remove_ours(target.parent, prefix)
        _raise_naming(e, target)
        raise
    try:  # a stop (Ctrl-C) landing on any step up to the rename removes the temporary too
        _share_like_the_user(tmp)
        _fsync(tmp, tree=True)
        _check_unchanged(target, before)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        if target.exists() or target.is_symlink():  # a directory cannot be replaced by rename while it exists
            os.replace(target, old)
        os.replace(tmp, target)
    except BaseException as e:  # refused at the last step (a mount point, an immutable folder), or stopped
        if not tmp.exists():  # published: the stop landed just after the rename
            _remove(old)
            raise
        if old.exists() and not target.exists():
            os.replace(old, target)
        shutil.rmtree(tmp, ignore_errors=True)
        if not isinstance(e, OSError):
            raise
        raise OutputError(f"{target}: cannot be replaced ({e.strerror or e}); nothing was changed") from None
    try:  # before the flush: a failing one must not leave the old version beside the new
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
