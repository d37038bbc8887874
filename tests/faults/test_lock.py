"""The run-directory lock: one holder at a time, and no lock file left in the user's folder."""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sparse_adapt import lock
from sparse_adapt.lock import LOCK_FILE, LockError, locked

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
TRY_LOCK = "import sys\nfrom sparse_adapt.lock import locked\nwith locked(sys.argv[1]):\n    pass\n"


def test_a_folder_the_user_made_keeps_no_lock_file(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("kept")
    with locked(out):
        assert (out / LOCK_FILE).read_text().strip() == str(os.getpid())
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_a_killed_holders_longer_pid_is_replaced_whole(tmp_path):
    # SIGKILL leaves the file behind: our shorter pid written over its start would read as another.
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_FILE).write_text("9999999999\n")
    with locked(out):
        assert (out / LOCK_FILE).read_text() == f"{os.getpid()}\n"


def test_a_folder_the_lock_made_goes_when_nothing_was_written(tmp_path):
    out = tmp_path / "new"
    with pytest.raises(RuntimeError):
        with locked(out):
            raise RuntimeError("failed before writing")
    assert not out.exists()
    with locked(out):
        (out / "result").write_text("x")
    assert [p.name for p in out.iterdir()] == ["result"]


def test_a_lock_file_removed_between_open_and_flock_is_not_held(tmp_path, monkeypatch):
    # The holder before us unlinks its file after we opened it: locking that orphan would let a
    # third process create and lock a new file at the path beside us.
    out = tmp_path / "run"
    out.mkdir()
    real_flock, calls = lock.fcntl.flock, []

    def flock_after_the_previous_holder_left(fd, op):
        calls.append(fd)
        if len(calls) == 1:
            (out / LOCK_FILE).unlink()
        return real_flock(fd, op)

    monkeypatch.setattr(lock.fcntl, "flock", flock_after_the_previous_holder_left)
    before = len(os.listdir("/proc/self/fd"))
    with locked(out):
        assert len(calls) == 2  # the orphan was dropped and the new file at the path locked
        other = subprocess.run([sys.executable, "-c", TRY_LOCK, str(out)], cwd=ROOT, env=ENV,
                               capture_output=True, text=True)
        assert "is in use by another sparse-adapt process" in other.stderr
    assert not (out / LOCK_FILE).exists()
    assert len(os.listdir("/proc/self/fd")) == before  # the orphan's descriptor is closed too, not leaked


def test_a_second_holder_is_refused_in_the_same_process(tmp_path):
    with locked(tmp_path / "run"):
        with pytest.raises(LockError, match=rf"pid {os.getpid()}"):
            with locked(tmp_path / "run"):
                pass
        assert (tmp_path / "run" / LOCK_FILE).exists()  # the refused one did not remove it


@pytest.mark.parametrize("where", ["open", "flock"])
def test_a_stop_while_the_lock_is_taken_leaves_no_lock_file(where, tmp_path, monkeypatch):
    """Python raises a Ctrl-C as the system call it came during returns: just after os.open made
    the lock file (or flock took it), before the descriptor was kept, the file stayed."""
    real_open, real_flock = os.open, lock.fcntl.flock
    calls = []

    def opened(path, flags, *args):
        fd = real_open(path, flags, *args)  # made, its descriptor never kept (the process's exit closes it)
        if flags & os.O_CREAT:  # the taking, not the cleanup's open
            raise KeyboardInterrupt
        return fd

    def flocked(fd, op):
        real_flock(fd, op)
        calls.append(fd)
        if len(calls) % 2:  # each folder's taking; its cleanup's flock (the next call) goes through
            raise KeyboardInterrupt

    monkeypatch.setattr(*((lock.os, "open", opened) if where == "open" else (lock.fcntl, "flock", flocked)))
    mine = tmp_path / "mine"
    mine.mkdir()
    for out in (mine, tmp_path / "new"):
        with pytest.raises(KeyboardInterrupt):
            with locked(out):
                pytest.fail("the block ran")
    monkeypatch.undo()
    assert list(mine.iterdir()) == [] and not (tmp_path / "new").exists()
    with locked(tmp_path / "new"):  # nothing holds it
        pass


@pytest.mark.parametrize("where", ["truncate", "release"])
def test_a_stop_while_the_lock_is_written_or_released_leaves_no_lock_file(where, tmp_path, monkeypatch):
    """Just after the lock was taken (writing the pid) or as a finished run released it (checking
    the file is still its own), a stop left .sparse-adapt.lock in the run folder for good."""
    real_truncate, real_stat = os.ftruncate, os.stat
    stats = []

    def truncated(fd, size):
        real_truncate(fd, size)
        raise KeyboardInterrupt

    def stat(path, *args, **kwargs):  # the release's check is the second os.stat of the lock file
        found = real_stat(path, *args, **kwargs)
        if str(path).endswith(LOCK_FILE):
            stats.append(path)
            if len(stats) == 2:
                raise KeyboardInterrupt
        return found

    monkeypatch.setattr(*((lock.os, "ftruncate", truncated) if where == "truncate" else (lock.os, "stat", stat)))
    out = tmp_path / "new"
    with pytest.raises(KeyboardInterrupt):
        with locked(out):
            assert where == "release", "the block ran"
            (out / "result").write_text("x")
    monkeypatch.undo()
    assert (sorted(p.name for p in out.iterdir()) == ["result"]) if where == "release" else not out.exists()


def _hold(path: Path) -> int:
    """A descriptor holding the flock on a lock file at ``path``, as another holder's would."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def test_a_holder_that_has_not_written_its_pid_yet_is_refused_with_the_folder_and_an_unknown_pid(tmp_path):
    # Between taking the flock and writing its pid the holder's file is empty.
    out = tmp_path / "run"
    out.mkdir()
    theirs = _hold(out / LOCK_FILE)
    try:
        message = (f"{out} is in use by another sparse-adapt process (pid ?); "
                   "wait for it to finish or choose another --out")
        with pytest.raises(LockError, match=f"^{re.escape(message)}$"):
            with locked(out):
                pass
    finally:
        os.close(theirs)


def test_a_lock_file_that_is_no_longer_ours_is_left_to_its_holder(tmp_path):
    # Our file was removed while we held it and a later process locked a new one at the path:
    # removing theirs as we finish would let a third process lock beside them.
    out = tmp_path / "run"
    out.mkdir()
    with locked(out):
        (out / LOCK_FILE).unlink()
        theirs = _hold(out / LOCK_FILE)
    try:
        assert (out / LOCK_FILE).exists()
        with pytest.raises(LockError):
            with locked(out):
                pass
    finally:
        os.close(theirs)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open descriptors through /proc")
def test_neither_a_held_nor_a_refused_lock_leaves_a_descriptor_open(tmp_path):
    # A long-lived caller (a notebook, tune's trials) would run out of descriptors.
    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    before = open_descriptors()
    with locked(tmp_path / "run"):
        with pytest.raises(LockError):
            with locked(tmp_path / "run"):
                pass
        assert open_descriptors() == before + 1  # ours alone
    assert open_descriptors() == before


def test_a_stopped_taking_never_removes_a_lock_file_another_process_put_at_the_path(tmp_path, monkeypatch):
    """The cleanup after a stop locks the file it opened; if that file was meanwhile removed and
    another process locked a new one at the path, the path is theirs and stays."""
    out = tmp_path / "run"
    out.mkdir()
    real_open, real_flock = os.open, lock.fcntl.flock
    theirs: list[int] = []

    def opened(path, flags, *args):
        fd = real_open(path, flags, *args)
        if flags & os.O_CREAT:  # the taking: stopped as os.open returns
            raise KeyboardInterrupt
        return fd

    def flocked(fd, op):
        if not theirs:  # the cleanup's flock, on the file it opened: the path is replaced meanwhile
            (out / LOCK_FILE).unlink()
            theirs.append(real_open(out / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644))
            real_flock(theirs[0], fcntl.LOCK_EX | fcntl.LOCK_NB)
        return real_flock(fd, op)

    monkeypatch.setattr(lock.os, "open", opened)
    monkeypatch.setattr(lock.fcntl, "flock", flocked)
    with pytest.raises(KeyboardInterrupt):
        with locked(out):
            pytest.fail("the block ran")
    monkeypatch.undo()
    try:
        assert (out / LOCK_FILE).exists() and os.path.samestat(os.fstat(theirs[0]), os.stat(out / LOCK_FILE))
    finally:
        os.close(theirs[0])


def test_the_lock_file_the_module_docs_name_is_the_one_held_and_removed(tmp_path):
    # The docs tell a user which file in their folder is ours (and safe to delete once no run holds it).
    named = re.findall(r"``OUT/([^`]+)``", lock.__doc__)
    assert named, "the module docs name no lock file"
    out = tmp_path / "run"
    with locked(out):
        held = sorted(p.name for p in out.iterdir())
    assert held == named and not (out / named[0]).exists()
