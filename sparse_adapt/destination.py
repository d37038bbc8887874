"""A command's destination, checked before any work: an existing non-empty directory or an existing
file is the user's and is refused unless they pass ``--overwrite``; an input, or a folder holding
one, is refused always; a destination that cannot be written fails at once, not after an hour of
encoding. The output itself is then written by :mod:`sparse_adapt.atomic`.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path
from typing import Literal, Sequence

from sparse_adapt.atomic import clean_leftovers, remove_own
from sparse_adapt.data.reading import encodable
from sparse_adapt.errors import OutputError


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
    prefix = f".sparse-adapt-probe-{os.getpid()}-"
    try:
        # Permission bits do not tell the whole story (root, read-only mounts, immutable
        # directories): create and remove a file where the output will go.
        fd, probe = tempfile.mkstemp(prefix=prefix, dir=where)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputError(f"{flag} {target}: cannot write in {where} ({e.strerror or e})") from None
    except BaseException:
        remove_own(where, prefix)
        raise


def check_output(
    target: str | Path, overwrite: bool = False, kind: Literal["directory", "file"] = "directory", flag: str = "--out",
    inputs: Sequence[str | Path | None] = (), overwrite_flag: str = "--overwrite",
) -> Path:
    """Check a command's destination before any work is done; returns it as a Path.

    Refused unless ``overwrite``: an existing file, an existing non-empty directory (an
    empty one is used as is). A directory is never replaced by a file. Refused always: one
    of ``inputs`` (a local path; a built-in or Hub name is skipped) or a folder holding one,
    since the replacement would delete it; the working directory or a folder holding it; a
    mount point (a rename cannot replace it);
    anything but a regular file or a directory (a device, a pipe: replacing ``/dev/null``
    with a file breaks the system). Crash leftovers of earlier writes of ``target`` are
    removed; a destination that cannot be written fails. ``flag`` and ``overwrite_flag`` name
    the destination and the way to allow replacing it in the messages (a Python caller's
    ``out`` and ``overwrite=True``, a command's ``--out`` and ``--overwrite``).
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
                f"pass {overwrite_flag} to replace it, or choose another path"
            )
    elif target.exists() and not overwrite:
        raise OutputError(f"{flag} {target} is an existing file; pass {overwrite_flag} to replace it, or choose "
                          "another path")
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
