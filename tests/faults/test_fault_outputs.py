"""Issue rows: an existing non-empty ``--out``, ``--out`` that is a file, a read-only ``--out``
and temporaries left by a write killed mid-way. Every writing command refuses what the
user already has unless ``--overwrite``, fails before any work when it cannot write, and
cleans up after crashes of earlier runs."""

from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from corpora import GATROCRAPTIC
from sparse_adapt.modeling.encoder import SpladeEncoder
from tests.faults.conftest import assert_one_line_error, cli, hidden_leftovers, train_argv

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_model_dir) -> dict[str, Path]:
    """Inputs of every writing command: a model, terms, docs, a headless encoder, an export."""
    from transformers import BertConfig, BertModel

    from sparse_adapt.retrieval.export import export_vectors

    root = tmp_path_factory.mktemp("writers")
    (root / "terms.json").write_text(json.dumps({"jargon": ["Zorblatt"]}), encoding="utf-8")
    docs = root / "docs.jsonl"
    docs.write_text(json.dumps({"doc_id": "d1", "text": "Zorblatt metrics track spending."}) + "\n", encoding="utf-8")
    encoder = root / "encoder"
    tok = SpladeEncoder.from_pretrained(tiny_model_dir).tokenizer
    BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(encoder)
    tok.save_pretrained(encoder)
    export_vectors(SpladeEncoder.from_pretrained(tiny_model_dir), docs, root / "vectors")
    return {"model": tiny_model_dir, "terms": root / "terms.json", "docs": docs, "encoder": encoder,
            "vectors": root / "vectors"}


# Every command that writes a directory (flag, argv without the destination).
DIR_WRITERS = {
    "extend-vocab": lambda f: ["extend-vocab", "--base", f["model"], "--terms", f["terms"], "--out"],
    "export": lambda f: ["export", "--model", f["model"], "--docs", f["docs"], "--out"],
    "base": lambda f: ["base", "--from-encoder", f["encoder"], "--bias", "-1.0", "--out"],
    "index": lambda f: ["index", "--vectors", f["vectors"], "--index"],
    "onnx": lambda f: ["onnx", "--model", f["model"], "--out"],
    # report keeps its own results in --out (reruns reuse them); anything else there is refused
    "report": lambda f: ["report", "--base", f["model"], "--experiments", "H1", "--out"],
}
# The same commands plus the file writer.
ALL_WRITERS = {**DIR_WRITERS, "evaluate --save-run": lambda f: [
    "evaluate", "--model", f["model"], "--docs", GATROCRAPTIC.docs, "--queries", GATROCRAPTIC.queries,
    "--qrels", GATROCRAPTIC.qrels, "--save-run"]}


@pytest.mark.parametrize("command", sorted(DIR_WRITERS))
def test_non_empty_out_is_refused_and_left_as_it_was(command, files, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    result = cli(capsys, DIR_WRITERS[command](files) + [out])
    assert_one_line_error(result, str(out), "not empty", "--overwrite")
    assert [p.name for p in out.iterdir()] == ["notes.txt"] and (out / "notes.txt").read_text() == "keep me"
    assert hidden_leftovers(tmp_path) == []


@pytest.mark.parametrize("command", sorted(ALL_WRITERS))
def test_out_that_is_an_existing_file_is_refused(command, files, tmp_path, capsys):
    out = tmp_path / "some.yaml"
    out.write_text("key: value\n")
    result = cli(capsys, ALL_WRITERS[command](files) + [out])
    assert_one_line_error(result, str(out), "existing file", "--overwrite")
    assert out.read_text() == "key: value\n"
    assert hidden_leftovers(tmp_path) == []


def test_train_into_a_file_is_one_line(files, train_inputs, tmp_path, capsys):
    out = tmp_path / "some.yaml"
    out.write_text("key: value\n")
    result = cli(capsys, train_argv(files["model"], train_inputs, out))
    assert_one_line_error(result, str(out), "existing file")
    assert out.read_text() == "key: value\n"


@pytest.mark.parametrize("command", ["extend-vocab", "export", "base", "onnx"])
def test_overwrite_replaces_only_when_the_new_output_is_complete(command, files, tmp_path, capsys):
    out = tmp_path / "replaced"
    out.mkdir()
    (out / "notes.txt").write_text("old")
    result = cli(capsys, DIR_WRITERS[command](files) + [out, "--overwrite"])
    assert result.code == 0, result.err
    assert not (out / "notes.txt").exists()
    assert hidden_leftovers(tmp_path) == []
    if command == "extend-vocab":
        assert SpladeEncoder.from_pretrained(out).tokenizer.convert_tokens_to_ids("zorblatt") > 30000
    # an existing file becomes the output with --overwrite as well, leaving nothing hidden behind
    file_out = tmp_path / "was-a-file"
    file_out.write_text("x")
    assert cli(capsys, DIR_WRITERS[command](files) + [file_out, "--overwrite"]).code == 0
    assert file_out.is_dir() and hidden_leftovers(tmp_path) == []


@pytest.mark.parametrize("command", ["onnx", "export"])
def test_onnx_and_export_refuse_to_replace_the_model_they_read(command, files, tmp_path, capsys):
    model = tmp_path / "model"
    SpladeEncoder.from_pretrained(files["model"]).save_pretrained(model)
    before = sorted(p.name for p in model.iterdir())
    reads = {"onnx": ["onnx", "--model", model], "export": ["export", "--model", model, "--docs", files["docs"]]}
    result = cli(capsys, reads[command] + ["--out", model, "--overwrite"])
    assert_one_line_error(result, str(model), "is also an input")
    assert sorted(p.name for p in model.iterdir()) == before


# Which input of each writer an --out folder holds in the next test.
HELD_INPUT = {"extend-vocab": "terms", "export": "docs", "base": "encoder", "index": "vectors", "onnx": "model"}


@pytest.mark.parametrize("command", sorted(HELD_INPUT))
def test_an_output_holding_an_input_is_refused_even_with_overwrite(command, files, tmp_path, capsys):
    """Replaced whole, the folder took the input with it: `export --out <the corpus's folder>
    --overwrite` deleted the corpus, `onnx --out <the model's parent>` the model."""
    import shutil

    held = tmp_path / "project"
    copies = {k: (shutil.copytree(v, held / v.name) if v.is_dir() else Path(shutil.copy(v, held / v.name)))
              for k, v in files.items()}
    before = sorted(p.relative_to(held) for p in held.rglob("*"))
    result = cli(capsys, DIR_WRITERS[command](copies) + [held, "--overwrite"])
    assert_one_line_error(result, str(held), "holds an input")
    assert sorted(p.relative_to(held) for p in held.rglob("*")) == before


def test_an_output_inside_an_input_models_folder_is_refused(files, tmp_path, capsys):
    """`evaluate --save-run MODEL/tokenizer.json --overwrite` replaced the model's tokenizer with
    a TREC run, and the model no longer loaded; make-train did not count --base as an input."""
    model = tmp_path / "model"
    SpladeEncoder.from_pretrained(files["model"]).save_pretrained(model)
    before = {p.name: p.read_bytes() for p in model.iterdir() if p.is_file()}
    argv = ["evaluate", "--model", model, "--docs", GATROCRAPTIC.docs, "--queries", GATROCRAPTIC.queries,
            "--qrels", GATROCRAPTIC.qrels, "--save-run"]
    for target in (model / "tokenizer.json", model / "run.trec"):  # replacing a file of it, or adding one
        assert_one_line_error(cli(capsys, argv + [target, "--overwrite"]), str(target), "is inside an input's folder")
    make_train = ["make-train", "--corpus", GATROCRAPTIC.docs, "--terms", GATROCRAPTIC.terms, "--base", model,
                  "--out", model / "config.json", "--overwrite"]
    assert_one_line_error(cli(capsys, make_train), str(model / "config.json"), "is inside an input's folder")
    assert {p.name: p.read_bytes() for p in model.iterdir() if p.is_file()} == before


def test_save_run_over_an_input_or_a_pipe_or_the_working_directory_is_refused(files, tmp_path, capsys, monkeypatch):
    import shutil

    qrels = Path(shutil.copy(GATROCRAPTIC.qrels, tmp_path / "qrels.tsv"))
    argv = ["evaluate", "--model", files["model"], "--docs", GATROCRAPTIC.docs, "--queries", GATROCRAPTIC.queries,
            "--qrels", qrels, "--save-run"]
    assert_one_line_error(cli(capsys, argv + [qrels, "--overwrite"]), str(qrels), "is also an input")
    assert qrels.read_text() == Path(GATROCRAPTIC.qrels).read_text()
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    assert_one_line_error(cli(capsys, argv + [pipe, "--overwrite"]), "not a regular file or directory")
    assert pipe.is_fifo()
    monkeypatch.chdir(tmp_path)
    export = ["export", "--model", files["model"], "--docs", files["docs"], "--out"]
    assert_one_line_error(cli(capsys, export + [".", "--overwrite"]), "is the working directory or holds it")
    assert qrels.exists() and pipe.exists()


def test_save_run_overwrite_replaces_the_file(files, tmp_path, capsys):
    run = tmp_path / "run.trec"
    run.write_text("old\n")
    result = cli(capsys, ALL_WRITERS["evaluate --save-run"](files) + [run, "--overwrite", "--json"])
    assert result.code == 0, result.err
    assert run.read_text().split()[2] in {json.loads(line)["doc_id"] for line in GATROCRAPTIC.docs.open()}


def test_save_run_writes_ranx_json_to_a_json_name_and_refuses_lz4_before_scoring(files, tmp_path, capsys):
    """A .json name got TREC lines that --compare then read as invalid JSON; a .lz4 one would be
    neither format. JSON keeps every query, so the run reads back as it was scored."""
    from sparse_adapt.data.runs import load_run

    argv = ALL_WRITERS["evaluate --save-run"](files)
    assert_one_line_error(cli(capsys, argv + [tmp_path / "run.lz4"]), "run.lz4: .lz4 is ranx's binary format")
    assert not (tmp_path / "run.lz4").exists()
    result = cli(capsys, argv + [tmp_path / "run.json", "--json"])
    assert result.code == 0, result.err
    run = json.loads((tmp_path / "run.json").read_text())
    assert set(run) == {json.loads(line)["qid"] for line in GATROCRAPTIC.queries.open()}
    assert load_run(tmp_path / "run.json") == {q: scores for q, scores in run.items()}


def test_an_ir_datasets_home_that_cannot_be_made_is_one_line_saying_what_to_do(files, tmp_path):
    """ranx imports ir_datasets, which makes ~/.ir_datasets on import: with a read-only HOME every
    `evaluate` ended on a bare "Permission denied" (its own folder: /sys refuses any new one)."""
    argv = [str(a) for a in ALL_WRITERS["evaluate --save-run"](files) + [tmp_path / "run.trec"]]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "IR_DATASETS_HOME": "/sys/sparse-adapt-ir_datasets"}
    done = subprocess.run([sys.executable, "-m", "sparse_adapt", *argv], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1].startswith("error: ir_datasets (imported to evaluate runs) cannot "
                                                           "make its folder /sys/sparse-adapt-ir_datasets")
    assert "set IR_DATASETS_HOME to a folder you can write" in done.stderr
    assert not (tmp_path / "run.trec").exists()


# Every option naming a file to write (argv without the destination).
FILE_WRITERS = {
    "evaluate --save-run": ALL_WRITERS["evaluate --save-run"],
    "search --save-run": lambda f: ["search", "--model", f["model"], "--index", f["vectors"],
                                    "--queries", GATROCRAPTIC.queries, "--save-run"],
    "mine-terms --out": lambda f: ["mine-terms", "--corpus", f["docs"], "--out"],
    "build-dictionary --out": lambda f: ["build-dictionary", "--corpus", f["docs"], "--terms", f["terms"], "--out"],
    "make-train --out": lambda f: ["make-train", "--corpus", f["docs"], "--terms", f["terms"], "--out"],
}


@pytest.mark.parametrize("command", sorted(FILE_WRITERS))
@pytest.mark.parametrize("ending", ["/", "/.", "//"])
def test_a_file_output_naming_a_folder_is_refused_and_nothing_is_written(command, ending, files, tmp_path, capsys):
    """`--save-run runs/` (or `runs/.`) wrote a file named ``runs``: ``Path`` drops what names a folder."""
    result = cli(capsys, FILE_WRITERS[command](files) + [f"{tmp_path / 'runs'}{ending}"])
    assert_one_line_error(result, "names a folder; give the path of a file (such as "
                                  f"{tmp_path / 'runs'}{'/.' if ending == '/.' else ''}/NAME)")
    assert list(tmp_path.iterdir()) == []
    assert_one_line_error(cli(capsys, FILE_WRITERS[command](files) + [""]), "the path is empty")


@pytest.fixture
def no_work(monkeypatch):
    """Make loading any model fail the test: a refused destination must be refused first."""

    def boom(*args, **kwargs):
        raise AssertionError("work started before the destination was checked")

    monkeypatch.setattr(SpladeEncoder, "from_pretrained", classmethod(boom))
    monkeypatch.setattr("sparse_adapt.modeling.base.load_encoder", boom)


@pytest.mark.parametrize("command", sorted(ALL_WRITERS))
def test_read_only_destination_fails_before_any_work(command, files, read_only_dir, no_work, capsys):
    result = cli(capsys, ALL_WRITERS[command](files) + [read_only_dir / "out"])
    assert_one_line_error(result, str(read_only_dir / "out"), "cannot write")


def test_train_into_read_only_destination_fails_before_any_work(files, train_inputs, read_only_dir, no_work, capsys):
    result = cli(capsys, train_argv(files["model"], train_inputs, read_only_dir / "run"))
    assert_one_line_error(result, "cannot write")


KILLED_MID_WRITE = """
import os, signal, sys
from sparse_adapt.atomic import atomic_directory
with atomic_directory(sys.argv[1]) as tmp:
    (tmp / "model.safetensors").write_bytes(b"half a model")
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_temporaries_of_a_killed_write_are_removed_by_the_next_run(files, tmp_path, capsys):
    out = tmp_path / "model"
    proc = subprocess.run([sys.executable, "-c", KILLED_MID_WRITE, str(out)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == -signal.SIGKILL
    assert len(hidden_leftovers(tmp_path)) == 1 and not out.exists()
    result = cli(capsys, DIR_WRITERS["extend-vocab"](files) + [out])
    assert result.code == 0, result.err
    assert hidden_leftovers(tmp_path) == []


def test_a_live_writers_temporary_is_left_alone(tmp_path):
    from sparse_adapt.atomic import clean_leftovers

    live = tmp_path / f".model.tmp-{os.getpid()}-abc"
    dead = tmp_path / ".model.tmp-999999999-abc"  # above any pid_max
    mine = tmp_path / ".notes.tmp-999999999"
    for d in (live, dead, mine):
        d.mkdir()
    assert clean_leftovers(tmp_path, "model") == [dead]
    assert live.exists() and mine.exists()


def test_a_temporary_whose_pid_now_names_a_later_process_is_a_dead_writers(tmp_path, monkeypatch):
    """Pids wrap, and a container's entry point is pid 1 after each restart: a live pid kept a
    killed writer's temporary and its moved-aside old version for good."""
    import time

    from sparse_adapt import atomic

    started = atomic._process_start(os.getpid())  # read from /proc: this process began before now
    assert started is not None and time.time() - 24 * 3600 < started <= time.time()
    leftover = tmp_path / f".model.tmp-{os.getpid()}-abc"
    leftover.mkdir()
    assert atomic.clean_leftovers(tmp_path, "model") == []  # this process wrote it (it started before): alive
    monkeypatch.setattr(atomic, "_process_start", lambda pid: time.time() + 100)  # the pid's process is younger
    assert atomic.clean_leftovers(tmp_path, "model") == [leftover] and not leftover.exists()


def test_train_into_an_existing_read_only_run_directory_fails_before_any_work(
    files, train_inputs, read_only_dir, no_work, capsys
):
    result = cli(capsys, train_argv(files["model"], train_inputs, read_only_dir))
    assert_one_line_error(result, "cannot write in", str(read_only_dir))


KILLED_BETWEEN_RENAMES = """
import os, signal, sys
import sparse_adapt.atomic as atomic
real = os.replace
def replace(src, dst):
    real(src, dst)
    if ".old-" in str(dst):  # the old version is aside, the new one not yet in place
        os.kill(os.getpid(), signal.SIGKILL)
atomic.os.replace = replace
with atomic.atomic_directory(sys.argv[1]) as tmp:
    (tmp / "model.safetensors").write_bytes(b"the new model")
"""


def test_a_version_moved_aside_by_a_killed_replacement_is_put_back(files, tmp_path, capsys):
    """A writer killed between its two renames left the user's previous output hidden, and
    the next run deleted it with the temporaries."""
    out = tmp_path / "model"
    out.mkdir()
    (out / "model.safetensors").write_bytes(b"the user's model")
    proc = subprocess.run([sys.executable, "-c", KILLED_BETWEEN_RENAMES, str(out)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == -signal.SIGKILL and not out.exists() and len(hidden_leftovers(tmp_path)) == 2
    result = cli(capsys, DIR_WRITERS["extend-vocab"](files) + [out])
    assert_one_line_error(result, "is not empty", "--overwrite")  # it is the user's again
    assert (out / "model.safetensors").read_bytes() == b"the user's model" and hidden_leftovers(tmp_path) == []


def test_an_atomic_directory_gets_the_mode_of_any_directory_the_user_makes(tmp_path):
    """mkdtemp's 0700 once made every model, export and index readable by its owner alone."""
    from sparse_adapt.atomic import atomic_directory

    old = os.umask(0o027)
    try:
        with atomic_directory(tmp_path / "out") as tmp:
            (tmp / "f").write_text("x")
            (tmp / "weights").write_text("x")
            (tmp / "weights").chmod(0o600)  # as transformers saves model.safetensors (a mkstemp file)
        (tmp_path / "plain").mkdir()
        (tmp_path / "plain" / "f").write_text("x")
    finally:
        os.umask(old)
    assert stat_mode(tmp_path / "out") == stat_mode(tmp_path / "plain") == 0o750
    plain = stat_mode(tmp_path / "plain" / "f")
    assert stat_mode(tmp_path / "out" / "f") == stat_mode(tmp_path / "out" / "weights") == plain


def test_a_saved_model_shares_its_weights_like_its_other_files(files, tmp_path, capsys):
    out = tmp_path / "ext"
    assert cli(capsys, DIR_WRITERS["extend-vocab"](files) + [out]).code == 0
    assert stat_mode(out / "model.safetensors") == stat_mode(out / "config.json")


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_a_full_disk_while_saving_a_model_is_one_line(files, tmp_path, capsys, monkeypatch):
    """safetensors reports a failed write with its own error type, not an OSError: it had
    ended `extend-vocab` and `train` with a traceback and exit 1."""
    import transformers.modeling_utils
    from safetensors import SafetensorError

    def full(*args, **kwargs):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", full)  # what save_pretrained calls
    out = tmp_path / "ext"
    result = cli(capsys, DIR_WRITERS["extend-vocab"](files) + [out])
    assert_one_line_error(result, "No space left on device", str(out))
    assert not out.exists() and hidden_leftovers(tmp_path) == []


def test_a_full_disk_during_a_plain_write_names_the_file(files, tmp_path, capsys, monkeypatch):
    """``write()`` on a full disk raises an OSError with no file name: the one line said "No
    space left on device" and not where."""
    import errno

    real = Path.open

    class Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def writelines(self, lines):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def full(self, mode="r", *args, **kwargs):
        f = real(self, mode, *args, **kwargs)
        return Full(f) if "w" in mode and ".tmp-" in self.name else f  # the --save-run temporary

    monkeypatch.setattr(Path, "open", full)
    out = tmp_path / "run.trec"
    result = cli(capsys, ALL_WRITERS["evaluate --save-run"](files) + [out])
    errors = [line for line in result.err.splitlines() if not line.startswith("warning:")]  # the tiny model truncates
    assert result.code == 2 and "Traceback" not in result.err and len(errors) == 1, result.err
    assert "No space left on device" in result.err_line and str(out) in result.err_line
    assert not out.exists() and hidden_leftovers(tmp_path) == []


def test_a_refused_last_rename_leaves_the_old_output_and_no_temporary(tmp_path, monkeypatch):
    """A container's volume (EBUSY) or an immutable file (EPERM) refused the final rename after
    all the work: a traceback, and a full hidden copy left beside the output."""
    import errno

    import sparse_adapt.atomic as atomic
    from sparse_adapt.errors import OutputError

    out, run = tmp_path / "out", tmp_path / "run.trec"
    out.mkdir()
    (out / "old.txt").write_text("old")
    run.write_text("old run\n")
    real = os.replace

    def refused(src, dst):
        if ".tmp-" in str(src):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), str(src), None, str(dst))
        return real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", refused)
    with pytest.raises(OutputError, match=f"{out}: cannot be replaced .*nothing was changed"):
        with atomic.atomic_directory(out) as tmp:
            (tmp / "new.txt").write_text("new")
    assert [p.name for p in out.iterdir()] == ["old.txt"] and hidden_leftovers(tmp_path) == []
    with pytest.raises(OutputError, match=f"{run}: cannot be replaced .*left as it was"):
        with atomic.atomic_file(run) as tmp:
            tmp.write_text("new run\n")
    assert run.read_text() == "old run\n" and hidden_leftovers(tmp_path) == []


def test_an_output_reaches_the_disk_before_its_rename_and_the_rename_after(tmp_path, monkeypatch):
    """Without fsync a power cut after the rename could leave the new name on empty files."""
    import errno

    import sparse_adapt.atomic as atomic

    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(src)))
        return real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    monkeypatch.setattr(atomic.os, "replace", replace)
    with atomic.atomic_directory(tmp_path / "model") as tmp:
        (tmp / "sub").mkdir()
        (tmp / "sub" / "weights.bin").write_bytes(b"w")
        (tmp / "config.json").write_text("{}")
    synced = [p for e, p in events[:-2]]
    assert all(e == "fsync" for e, _ in events[:-2]) and events[-2][0] == "replace"
    assert sorted(Path(p).relative_to(tmp).as_posix() if p != str(tmp) else "." for p in synced) == [
        ".", "config.json", "sub", "sub/weights.bin"]
    assert events[-1] == ("fsync", str(tmp_path))  # the rename itself
    events.clear()
    atomic.write_atomic(tmp_path / "run.trec", "q1 Q0 d1 1 1.0 run\n")
    assert [e for e, _ in events] == ["fsync", "replace", "fsync"] and ".tmp-" in events[0][1]
    assert events[-1] == ("fsync", str(tmp_path))
    (tmp_path / "real").mkdir()  # an output folder reached through a link: its rename is flushed too
    (tmp_path / "runs").symlink_to(tmp_path / "real")
    events.clear()
    atomic.write_atomic(tmp_path / "runs" / "run.trec", "x\n")
    assert events[-1] == ("fsync", str(tmp_path / "real"))

    def unsupported(fd):  # a file system that cannot sync a folder: its files still are
        if os.path.isdir(os.readlink(f"/proc/self/fd/{fd}")):
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        return real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", unsupported)
    with atomic.atomic_directory(tmp_path / "model") as tmp:
        (tmp / "config.json").write_text("{}")
    assert (tmp_path / "model" / "config.json").read_text() == "{}"

    def failing(fd):  # the disk fails the flush: nothing is published, no temporary stays
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    def parent_fails(fd):  # the rename done, its flush fails: said, and no old version left beside the new
        if os.readlink(f"/proc/self/fd/{fd}") == str(tmp_path):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", parent_fails)
    with pytest.raises(OSError, match="Input/output error"):
        with atomic.atomic_directory(tmp_path / "model") as tmp:
            (tmp / "config.json").write_text("{}")
    assert hidden_leftovers(tmp_path) == []

    monkeypatch.setattr(atomic.os, "fsync", failing)
    with pytest.raises(OSError, match=f"Input/output error: '{re.escape(str(tmp_path))}/.run.trec.tmp-"):
        atomic.write_atomic(tmp_path / "run.trec", "new\n")
    assert (tmp_path / "run.trec").read_text() == "q1 Q0 d1 1 1.0 run\n" and hidden_leftovers(tmp_path) == []


def test_a_mount_point_is_refused_as_an_output_before_any_work(files, tmp_path, capsys, monkeypatch):
    real = os.path.ismount
    mounted = tmp_path / "volume"
    mounted.mkdir()
    monkeypatch.setattr(os.path, "ismount", lambda p: Path(p) == mounted or real(p))
    monkeypatch.setattr(SpladeEncoder, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("work started")))
    result = cli(capsys, ["export", "--model", files["model"], "--docs", files["docs"], "--out", mounted])
    assert_one_line_error(result, str(mounted), "is a mount point", "give a new folder inside it")


@pytest.mark.parametrize("change", ["appears", "is replaced"])
def test_an_output_another_process_writes_meanwhile_is_not_replaced(change, tmp_path):
    """Two commands writing one path, both checked while it was absent (or the same): the later
    one's rename deleted the earlier one's finished output."""
    import sparse_adapt.atomic as atomic
    from sparse_adapt.errors import OutputError

    out, run = tmp_path / "out", tmp_path / "run.trec"
    if change == "is replaced":
        out.mkdir()
        run.write_text("first\n")

    def theirs_dir() -> None:  # another process's finished atomic write of the same path
        other = tmp_path / "other"
        other.mkdir()
        (other / "theirs.txt").write_text("theirs")
        if out.exists():
            os.replace(out, tmp_path / "aside")
        os.replace(other, out)

    with pytest.raises(OutputError, match=f"{out}: {'appeared' if change == 'appears' else 'was replaced'} while "
                                          "this command ran .* nothing was written"):
        with atomic.atomic_directory(out) as tmp:
            (tmp / "ours.txt").write_text("ours")
            theirs_dir()
    assert [p.name for p in out.iterdir()] == ["theirs.txt"] and hidden_leftovers(tmp_path) == []

    with pytest.raises(OutputError, match=f"{run}: .* while this command ran"):
        with atomic.atomic_file(run) as tmp:
            tmp.write_text("ours\n")
            (tmp_path / "their.trec").write_text("theirs\n")
            os.replace(tmp_path / "their.trec", run)
    assert run.read_text() == "theirs\n" and hidden_leftovers(tmp_path) == []


def test_an_output_removed_meanwhile_is_written(tmp_path):
    """Nothing of anyone's is lost when the path is gone: the write goes ahead."""
    import shutil

    import sparse_adapt.atomic as atomic

    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with atomic.atomic_directory(out) as tmp:
        (tmp / "new.txt").write_text("new")
        shutil.rmtree(out)
    assert [p.name for p in out.iterdir()] == ["new.txt"]


def test_two_exports_into_one_new_out_keep_the_first_ones_output(files, tmp_path, capsys, monkeypatch):
    """The second export finishes after the first: one line, exit 2, the first's vectors kept."""
    out = tmp_path / "vectors"
    real = SpladeEncoder.encode

    def first_export_finishes_meanwhile(self, *args, **kwargs):
        if not out.exists():
            from sparse_adapt.retrieval.export import export_vectors

            monkeypatch.setattr(SpladeEncoder, "encode", real)
            export_vectors(self, files["docs"], out)
            monkeypatch.setattr(SpladeEncoder, "encode", first_export_finishes_meanwhile)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SpladeEncoder, "encode", first_export_finishes_meanwhile)
    result = cli(capsys, ["export", "--model", files["model"], "--docs", files["docs"], "--out", out])
    assert_one_line_error(result, f"{out}: appeared while this command ran")
    assert sorted(p.name for p in out.iterdir()) == ["sparse_adapt_export.json", "vectors.jsonl"]
    assert hidden_leftovers(tmp_path) == []


def test_a_path_the_system_cannot_take_is_one_line(files, tmp_path, capsys):
    """A name over 255 bytes made even Path.exists() raise: a traceback and exit 1 in every command."""
    long = tmp_path / ("x" * 300)
    for argv in (["export", "--model", files["model"], "--docs", files["docs"], "--out", long],
                 ["export", "--model", files["model"], "--docs", f"{long}.jsonl", "--out", tmp_path / "v"],
                 ["extend-vocab", "--base", files["model"], "--terms", f"{long}.json", "--out", tmp_path / "x"]):
        assert_one_line_error(cli(capsys, argv), "File name too long: ", str(long))
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    # 240 bytes: the name fits, its hidden temporary (.NAME.tmp-PID-XXXXXXXX) did not, after the work
    near = tmp_path / ("y" * 240)
    assert_one_line_error(cli(capsys, ["export", "--model", files["model"], "--docs", files["docs"], "--out", near]),
                          f"--out {near}: the name is too long (240 bytes; the hidden temporary")
    # a loop of symbolic links: Python 3.11's resolve() raised RuntimeError
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert_one_line_error(cli(capsys, ["export", "--model", files["model"], "--docs", files["docs"], "--out",
                                       tmp_path / "a"]), "a loop of symbolic links")
    assert_one_line_error(cli(capsys, ["export", "--model", files["model"], "--docs", tmp_path / "a", "--out",
                                       tmp_path / "v"]), "a symbolic link that leads nowhere")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_an_output_path_that_is_not_utf8_is_refused_before_any_work(files, tmp_path, capsys):
    """The tokenizer library could not save into it: a traceback after the work, and (train) a
    run directory left behind."""
    out = tmp_path / "xv\udcff"
    result = cli(capsys, ["extend-vocab", "--base", files["model"], "--terms", files["terms"], "--out", out])
    assert_one_line_error(result, "--out ", "xv\\udcff: the path is not valid UTF-8")
    assert list(tmp_path.iterdir()) == []


def test_a_line_break_in_a_file_name_stays_on_the_error_line(files, tmp_path, capsys):
    """A file named ``new<LF>error: forged.jsonl`` printed as two error lines, the second forged."""
    docs = tmp_path / "new\nerror: forged.jsonl"
    docs.write_text(json.dumps({"doc_id": 1, "text": "x"}) + "\n", encoding="utf-8")
    result = cli(capsys, ["export", "--model", files["model"], "--docs", docs, "--out", tmp_path / "v"])
    assert_one_line_error(result, "new\\nerror: forged.jsonl:1: field 'doc_id'")


@pytest.mark.parametrize("where, published", [
    ("mkdir", False), ("body", False), ("modes", False), ("aside", False), ("rename", True), ("old removed", True)])
def test_a_stop_landing_on_any_step_of_a_replacement_leaves_one_version_and_no_temporary(
        where, published, tmp_path, monkeypatch):
    """Python raises a Ctrl-C as the system call it came during returns: one that came during
    mkdtemp's mkdir left an empty ``.NAME.tmp-PID-*`` (the temporary was not yet named), and one
    just after the publishing rename left the old version beside the new (``.NAME.old-PID``). The
    block's own temporaries named like the target's (lucene's input folder) go too."""
    import tempfile

    import sparse_adapt.atomic as atomic

    out = tmp_path / "model"
    out.mkdir()
    (out / "a.txt").write_text("old")
    (out / "b.txt").write_text("old")
    real_mkdtemp, real_replace, real_remove = tempfile.mkdtemp, os.replace, atomic._remove

    def stop(*args):
        raise KeyboardInterrupt

    def mkdtemp(*args, **kwargs):
        real_mkdtemp(*args, **kwargs)
        raise KeyboardInterrupt

    def replace(src, dst):
        real_replace(src, dst)
        if (where == "aside" and ".old-" in str(dst)) or (where == "rename" and ".tmp-" in str(src)):
            raise KeyboardInterrupt

    def remove(path):  # stopped half-way through deleting the old version, once
        if ".old-" in path.name and (path / "a.txt").exists():
            (path / "a.txt").unlink()
            raise KeyboardInterrupt
        real_remove(path)

    patches = {"mkdir": (atomic.tempfile, "mkdtemp", mkdtemp), "modes": (atomic, "_share_like_the_user", stop),
               "aside": (atomic.os, "replace", replace), "rename": (atomic.os, "replace", replace),
               "old removed": (atomic, "_remove", remove)}
    if where in patches:
        monkeypatch.setattr(*patches[where])
    with pytest.raises(KeyboardInterrupt):
        with atomic.atomic_directory(out) as tmp:
            (tmp / "a.txt").write_text("new")
            if where == "body":  # stopped as a TemporaryDirectory beside it was made, before it could clean up
                (tmp_path / f".model.tmp-{os.getpid()}-input1234").mkdir()
                raise KeyboardInterrupt
    assert hidden_leftovers(tmp_path) == []
    assert sorted(p.name for p in out.iterdir()) == (["a.txt"] if published else ["a.txt", "b.txt"])
    assert (out / "a.txt").read_text() == ("new" if published else "old")


def test_a_stop_as_the_destination_is_probed_leaves_no_probe_file(tmp_path, monkeypatch):
    """check_writable makes and removes a probe file; a Ctrl-C raised as mkstemp returned left it."""
    import tempfile

    import sparse_adapt.destination as destination

    real = tempfile.mkstemp

    def mkstemp(*args, **kwargs):
        os.close(real(*args, **kwargs)[0])
        raise KeyboardInterrupt

    monkeypatch.setattr(destination.tempfile, "mkstemp", mkstemp)
    with pytest.raises(KeyboardInterrupt):
        destination.check_writable(tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_a_publish_that_fails_because_the_temporary_is_gone_puts_the_old_version_back(tmp_path, monkeypatch):
    """A temporary gone before the rename (another machine's cleanup on a shared volume) fails the
    rename; taken for a finished publish, it had the old version, moved aside, deleted too."""
    import shutil

    import sparse_adapt.atomic as atomic
    from sparse_adapt.errors import OutputError

    out = tmp_path / "model"
    out.mkdir()
    (out / "a.txt").write_text("old")
    real = os.replace

    def vanished(src, dst):
        if ".tmp-" in str(src):
            shutil.rmtree(src)
        return real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", vanished)
    with pytest.raises(OutputError, match="cannot be replaced .*nothing was changed"):
        with atomic.atomic_directory(out) as tmp:
            (tmp / "a.txt").write_text("new")
    assert (out / "a.txt").read_text() == "old" and hidden_leftovers(tmp_path) == []


def test_an_out_that_holds_the_working_directory_is_refused_even_with_overwrite(tmp_path, monkeypatch):
    """Replacing it would delete the folder the command runs in (``--out ..``)."""
    from sparse_adapt.destination import check_output
    from sparse_adapt.errors import OutputError

    inner = tmp_path / "project" / "work"
    inner.mkdir(parents=True)
    monkeypatch.chdir(inner)
    for target in (tmp_path / "project", tmp_path, inner):
        with pytest.raises(OutputError, match="is the working directory or holds it"):
            check_output(target, overwrite=True)
    assert inner.is_dir()


def test_an_output_is_replaced_only_when_both_its_inode_and_its_change_time_moved(tmp_path):
    # A chmod (or a new hard link) moves the change time alone; some file systems renumber an
    # untouched file's inode: neither is another command's output
    from sparse_adapt.atomic import _check_unchanged
    from sparse_adapt.errors import OutputError

    target = tmp_path / "out"
    target.mkdir()
    st = os.lstat(target)
    _check_unchanged(target, (st.st_dev, st.st_ino, st.st_ctime_ns - 1))
    _check_unchanged(target, (st.st_dev, st.st_ino + 1, st.st_ctime_ns))
    with pytest.raises(OutputError, match="was replaced while this command ran"):
        _check_unchanged(target, (st.st_dev, st.st_ino + 1, st.st_ctime_ns - 1))


def test_a_file_the_user_shares_with_the_group_alone_keeps_its_mode(tmp_path):
    # Only an owner-only file (a writer's 0600 temporary) gets the user's default mode; one
    # already readable by the group was made so on purpose
    from sparse_adapt.atomic import atomic_directory

    old = os.umask(0o022)
    try:
        with atomic_directory(tmp_path / "out") as tmp:
            (tmp / "group").write_text("x")
            (tmp / "group").chmod(0o640)
            (tmp / "owner").write_text("x")
            (tmp / "owner").chmod(0o600)
            (tmp / "run.sh").write_text("#!/bin/sh\n")
            (tmp / "run.sh").chmod(0o700)  # an owner-only program stays a program: 0755, not 0644
    finally:
        os.umask(old)
    assert stat_mode(tmp_path / "out" / "group") == 0o640 and stat_mode(tmp_path / "out" / "owner") == 0o644
    assert stat_mode(tmp_path / "out" / "run.sh") == 0o755


def test_a_file_written_again_takes_away_a_dead_writer_s_temporary_first(tmp_path):
    # The next write of the same file is the only thing that ever looks at its leftovers
    from sparse_adapt.atomic import atomic_file

    dead = tmp_path / ".run.json.tmp-999999999"  # above any pid_max
    dead.write_text("half")
    other = tmp_path / ".notes.tmp-999999999"  # another file's: left to that file's next write
    other.write_text("half")
    with atomic_file(tmp_path / "run.json") as tmp:
        tmp.write_text("{}")
    assert (tmp_path / "run.json").read_text() == "{}"
    assert not dead.exists() and other.exists()


def test_a_name_is_too_long_from_the_first_byte_its_temporary_would_not_fit(tmp_path):
    # NAME_MAX less the 40 bytes of the temporary beside it fit; one byte more does not
    from sparse_adapt.destination import TEMPORARY_EXTRA, check_writable
    from sparse_adapt.errors import OutputError

    fits = os.pathconf(tmp_path, "PC_NAME_MAX") - TEMPORARY_EXTRA
    check_writable(tmp_path / ("y" * fits))
    with pytest.raises(OutputError, match=f"the name is too long \\({fits + 1} bytes"):
        check_writable(tmp_path / ("y" * (fits + 1)))


def test_a_write_error_naming_its_own_file_keeps_that_name(tmp_path):
    # the file inside the output says more than the output folder
    import errno

    from sparse_adapt.atomic import atomic_directory

    with pytest.raises(OSError) as e:
        with atomic_directory(tmp_path / "model") as tmp:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp / "model.safetensors"))
    assert e.value.filename.endswith("model.safetensors") and e.value.errno == errno.ENOSPC
    assert not (tmp_path / "model").exists() and hidden_leftovers(tmp_path) == []


def test_a_file_that_cannot_be_flushed_is_not_published(tmp_path, monkeypatch):
    # EINVAL is excused for a folder only: a file whose data may not be on disk is an error
    import errno

    import sparse_adapt.atomic as atomic

    (tmp_path / "run.trec").write_text("old\n")

    def unsupported(fd):
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))

    monkeypatch.setattr(atomic.os, "fsync", unsupported)
    with pytest.raises(OSError, match="Invalid argument"):
        atomic.write_atomic(tmp_path / "run.trec", "new\n")
    assert (tmp_path / "run.trec").read_text() == "old\n" and hidden_leftovers(tmp_path) == []


def test_a_dead_writers_old_version_does_not_replace_a_link_at_its_target(tmp_path):
    # the target is there (a link the user made, dangling or not): the old version is the leftover
    from sparse_adapt.atomic import clean_leftovers

    (tmp_path / "model").symlink_to(tmp_path / "elsewhere")
    old = tmp_path / ".model.old-999999999"  # above any pid_max
    old.mkdir()
    assert clean_leftovers(tmp_path, "model") == [old]
    assert (tmp_path / "model").is_symlink() and not old.exists()


def test_a_temporary_named_without_a_pid_is_a_dead_writers(tmp_path):
    # no pid to ask about: no live writer can own it, and nothing else would ever remove it
    from sparse_adapt.atomic import clean_leftovers

    untagged = tmp_path / ".model.tmp-abc"
    untagged.mkdir()
    assert clean_leftovers(tmp_path, "model") == [untagged] and not untagged.exists()


def test_a_live_writers_moved_aside_old_version_is_left_alone(tmp_path):
    """Renaming a folder aside keeps its (old) mtime; only its ctime says when the live writer
    moved it, so judged by mtime it was put back over the writer's half-done replacement."""
    import time

    from sparse_adapt.atomic import clean_leftovers

    old = tmp_path / f".model.old-{os.getpid()}"
    old.mkdir()
    past = time.time() - 10 * 24 * 3600  # before this process started
    os.utime(old, (past, past))
    assert clean_leftovers(tmp_path, "model") == []
    assert old.is_dir() and not (tmp_path / "model").exists()


def test_a_failed_write_of_a_name_holding_glob_characters_leaves_no_temporary(tmp_path):
    # "[1]" read as a pattern matched ".model1.tmp-..." and not the block's own temporary
    from sparse_adapt.atomic import atomic_directory

    with pytest.raises(RuntimeError, match="stopped"):
        with atomic_directory(tmp_path / "model[1]") as tmp:
            (tmp / "f").write_text("x")
            raise RuntimeError("stopped")
    assert hidden_leftovers(tmp_path) == [] and not (tmp_path / "model[1]").exists()


def test_links_in_a_published_folder_are_kept_and_their_targets_modes_untouched(tmp_path):
    # Sharing an owner-only file must not follow a link out of the output (a user's secret)
    from sparse_adapt.atomic import atomic_directory

    secret = tmp_path / "secret"
    secret.write_text("key")
    secret.chmod(0o600)
    with atomic_directory(tmp_path / "out") as tmp:
        (tmp / "f").write_text("x")
        (tmp / "link").symlink_to(secret)
        (tmp / "dangling").symlink_to(tmp_path / "nowhere")
    out = tmp_path / "out"
    assert stat_mode(secret) == 0o600 and (out / "link").is_symlink() and (out / "dangling").is_symlink()
    assert (out / "f").read_text() == "x"


def test_an_owner_only_folder_inside_an_output_is_shared_like_the_user_s(tmp_path):
    # a writer's mkdtemp makes 0700 folders inside the output; one made 0750 on purpose keeps it
    from sparse_adapt.atomic import atomic_directory

    old = os.umask(0o022)
    try:
        with atomic_directory(tmp_path / "out") as tmp:
            (tmp / "owner" / "deeper").mkdir(parents=True)
            (tmp / "owner" / "deeper").chmod(0o700)
            (tmp / "owner").chmod(0o700)
            (tmp / "group").mkdir()
            (tmp / "group").chmod(0o750)
    finally:
        os.umask(old)
    out = tmp_path / "out"
    assert stat_mode(out / "owner") == stat_mode(out / "owner" / "deeper") == 0o755
    assert stat_mode(out / "group") == 0o750


def test_a_dangling_link_at_the_target_is_replaced_by_the_new_folder(tmp_path):
    # exists() is False for it, yet a folder cannot be renamed over a link: it is moved aside first
    from sparse_adapt.atomic import atomic_directory

    out = tmp_path / "out"
    out.symlink_to(tmp_path / "gone")
    with atomic_directory(out) as tmp:
        (tmp / "f").write_text("new")
    assert not out.is_symlink() and (out / "f").read_text() == "new" and hidden_leftovers(tmp_path) == []


def test_json_is_written_key_sorted_indented_and_ending_in_a_newline(tmp_path):
    from sparse_adapt.atomic import write_json_atomic

    write_json_atomic(tmp_path / "meta.json", {"b": 1, "a": [2]})
    assert (tmp_path / "meta.json").read_text() == '{\n  "a": [\n    2\n  ],\n  "b": 1\n}\n'


def test_an_old_version_put_back_is_not_reported_as_removed(tmp_path):
    from sparse_adapt.atomic import clean_leftovers

    old = tmp_path / ".model.old-999999999"  # above any pid_max; no "model" beside it
    old.mkdir()
    (old / "f").write_text("the user's")
    assert clean_leftovers(tmp_path, "model") == []
    assert (tmp_path / "model" / "f").read_text() == "the user's" and not old.exists()
