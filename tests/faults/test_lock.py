"""The run-directory lock: one holder at a time, and no lock file left in the user's folder."""

from __future__ import annotations

import os
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
    with locked(out):
        assert len(calls) == 2  # the orphan was dropped and the new file at the path locked
        other = subprocess.run([sys.executable, "-c", TRY_LOCK, str(out)], cwd=ROOT, env=ENV,
                               capture_output=True, text=True)
        assert "is in use by another sparse-adapt process" in other.stderr
    assert not (out / LOCK_FILE).exists()


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
