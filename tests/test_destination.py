"""A destination checked before any work: what is refused, and what each refusal says."""

from __future__ import annotations

import errno
import os
import re
import tempfile
from pathlib import Path

import pytest

from sparse_adapt.destination import TEMPORARY_EXTRA, check_not_an_input, check_output, check_writable
from sparse_adapt.errors import OutputError


def test_a_folder_holding_a_single_file_is_not_empty_and_counts_its_entries(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep")
    with pytest.raises(OutputError, match=re.escape(f"--out {out} is not empty (1 entry); pass --overwrite")):
        check_output(out)
    (out / "more.txt").write_text("keep")
    with pytest.raises(OutputError, match=re.escape(f"--out {out} is not empty (2 entries); pass --overwrite")):
        check_output(out)
    assert check_output(out, overwrite=True) == out
    assert sorted(p.name for p in out.iterdir()) == ["more.txt", "notes.txt"]  # the check itself writes nothing


def test_an_input_given_as_an_absolute_path_is_the_relative_out_naming_it(tmp_path, monkeypatch):
    model = tmp_path / "model"
    model.mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OutputError, match=re.escape(f"--out model is also an input ({model})")):
        check_not_an_input("model", [model])


def test_an_input_that_is_no_local_path_is_never_taken_for_one(tmp_path, monkeypatch):
    # A Hub id names no folder here: an --out of the same name, above or below it, holds no input.
    monkeypatch.chdir(tmp_path)
    for out in ("naver", "naver/splade-v3", "naver/splade-v3/adapted"):
        check_not_an_input(out, ["naver/splade-v3", None])


def test_a_path_under_a_file_names_the_file_in_the_way(tmp_path):
    holder = tmp_path / "holder"
    holder.write_text("keep")
    message = f"--out {holder}/terms.json: {holder} is a file, not a directory"
    with pytest.raises(OutputError, match=f"^{re.escape(message)}$"):
        check_writable(holder / "terms.json")


def test_replacing_a_folder_needs_its_parent_writable_and_names_it(tmp_path, monkeypatch):
    """The new version is written beside the old one and renamed over it: a writable folder in a
    parent that refuses new files would fail after the work."""
    out = tmp_path / "parent" / "out"
    out.mkdir(parents=True)
    (out / "old.txt").write_text("x")
    real = tempfile.mkstemp

    def mkstemp(*args, **kwargs):
        if Path(kwargs["dir"]) == out.parent:  # as a read-only parent refuses it
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    with pytest.raises(OutputError, match=re.escape(f"--out {out}: cannot write in {out.parent} (Permission denied)")):
        check_output(out, overwrite=True)
    assert [p.name for p in out.iterdir()] == ["old.txt"]


@pytest.mark.parametrize("raised, refused", [
    (RuntimeError("Symlink loop from 'a'"), True),  # Python 3.11 and 3.12
    (OSError(errno.ELOOP, "Too many levels of symbolic links", "a"), True),  # as newer Pythons raise it
    (OSError(errno.EACCES, "Permission denied", "a"), False),  # not a loop: the error itself
])
def test_a_loop_of_symbolic_links_is_one_line_whichever_error_python_raises_for_it(raised, refused, tmp_path,
                                                                                  monkeypatch):
    def resolve(self, strict=False):
        raise raised

    monkeypatch.setattr(Path, "resolve", resolve)
    with pytest.raises(OutputError if refused else type(raised)) as caught:
        check_not_an_input(tmp_path / "a", [])
    assert ("a loop of symbolic links" in str(caught.value)) == refused


def test_a_file_output_naming_an_existing_folder_is_refused_even_empty_or_with_overwrite(tmp_path):
    # an empty folder is used as is by a folder output, but a file would replace it
    out = tmp_path / "run.trec"
    out.mkdir()
    for overwrite in (False, True):
        with pytest.raises(OutputError, match=re.escape(f"--save-run {out} is a directory; give a file path")):
            check_output(out, overwrite, kind="file", flag="--save-run")
    assert out.is_dir() and not any(out.iterdir())


def test_a_name_is_measured_in_bytes_not_characters(tmp_path):
    # "é" takes 2 bytes on disk: a name short in characters can still leave no room for the temporary
    fits = os.pathconf(tmp_path, "PC_NAME_MAX") - TEMPORARY_EXTRA
    check_writable(tmp_path / ("é" * (fits // 2)))
    name = "é" * (fits // 2 + 1)
    with pytest.raises(OutputError, match=re.escape(f"the name is too long ({2 * len(name)} bytes;")):
        check_writable(tmp_path / name)


def test_a_file_system_that_does_not_say_its_name_limit_is_taken_to_allow_255_bytes(tmp_path, monkeypatch):
    def pathconf(path, name):
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(os, "pathconf", pathconf)
    check_writable(tmp_path / ("y" * (255 - TEMPORARY_EXTRA)))
    with pytest.raises(OutputError, match=re.escape(f"({256 - TEMPORARY_EXTRA} bytes; the hidden temporary written "
                                                    f"beside it needs {TEMPORARY_EXTRA} more, of the 255 this file")):
        check_writable(tmp_path / ("y" * (256 - TEMPORARY_EXTRA)))


def test_an_input_given_through_a_link_is_the_out_naming_its_target(tmp_path):
    # `--qrels link.tsv --save-run real.tsv --overwrite` would write the run over the qrels themselves
    real = tmp_path / "real.tsv"
    real.write_text("q1 0 d1 1\n")
    (tmp_path / "link.tsv").symlink_to(real)
    with pytest.raises(OutputError, match=re.escape(f"--save-run {real} is also an input ({tmp_path / 'link.tsv'})")):
        check_output(real, overwrite=True, kind="file", flag="--save-run", inputs=[tmp_path / "link.tsv"])
    assert real.read_text() == "q1 0 d1 1\n"


def test_every_temporary_an_atomic_write_names_is_one_the_atomic_docs_give(tmp_path, monkeypatch):
    # A killed writer's leftovers are found by their names: a name the docs do not give is one a user
    # (or the engineer reading clean_leftovers) cannot recognise as ours.
    import fnmatch

    import sparse_adapt.atomic as atomic

    seen: list[str] = []
    real_replace = os.replace

    def replace(src, dst):
        seen.extend(Path(p).name for p in (src, dst))
        return real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    for write in (atomic.atomic_file, atomic.atomic_directory):
        target = tmp_path / f"out-{write.__name__}"
        for _ in range(2):  # the second write replaces the first: a directory's old version is moved aside
            with write(target) as tmp:
                seen.append(tmp.name)
                (tmp / "f" if tmp.is_dir() else tmp).write_text("x")
    monkeypatch.undo()
    hidden = {name for name in seen if name.startswith(".")}
    assert any(".tmp-" in name for name in hidden) and any(".old-" in name for name in hidden)
    for doc in (atomic.__doc__, atomic.clean_leftovers.__doc__):
        given = re.findall(r"``(\.NAME\.[^`]+)``", doc)
        for name in hidden:
            stem = name[1:].split(".tmp-")[0].split(".old-")[0]
            patterns = [g.replace("NAME", stem).replace("PID", str(os.getpid())) for g in given]
            assert any(fnmatch.fnmatchcase(name, p) for p in patterns), (name, given)
