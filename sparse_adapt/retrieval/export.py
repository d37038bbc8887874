"""Streaming export of SPLADE document vectors to Pyserini's ``JsonVectorCollection``.

Each line of ``VECTORS_DIR/vectors.jsonl`` is ``{"id", "contents", "vector": {token: int}}``
with ``int = round(weight * scale)``; terms that round to 0 are dropped (Lucene cannot
store a zero impact). A query is quantised the same way (:func:`quantise`), so the
Lucene score is ``sum_t round(s*q_t) * round(s*d_t)``, i.e. ``s^2`` times the exact
score up to rounding.

Tokens are the tokenizer's own strings (``##ing`` pieces and added domain tokens such as
``gatrocraptic`` or ``max_connections`` as they are), so a query encoded by the same
model names exactly the same Lucene terms. Lucene's pretokenized analyzer splits on
whitespace, so whitespace inside a token (possible only in unusual added tokens) is
replaced by U+2581 on both sides (:func:`lucene_token`).

Documents are read, encoded and written a window of ``SORT_WINDOW_BATCHES`` batches at a
time: memory does not grow with the corpus. The directory appears only when the export is
complete.
"""

from __future__ import annotations

import hashlib
import json
import time
from array import array
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import scipy.sparse as sp

from sparse_adapt.data import DataError, Document, check_documents, iter_documents, iter_lines
from sparse_adapt.data.reading import id_problem, parse_json
from sparse_adapt.errors import ConfigError, require_positive_int
from sparse_adapt.atomic import atomic_directory
from sparse_adapt.modeling.batching import SORT_WINDOW_BATCHES
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.modeling.fingerprint import model_hashes
from sparse_adapt.modeling.truncation import truncated
from sparse_adapt.modeling.vectors import check_max_active_dims, rank
from sparse_adapt.progress import Hooks, counted

VECTORS_FILE = "vectors.jsonl"
EXPORT_META = "sparse_adapt_export.json"
EMPTY_SHOWN = 3
# Lucene's score is a float32 sum of query x document impacts, exact below 2**24: at the default
# 100 a typical SPLADE term product (weights ~1-3) is 1e4-1e5; 1000 already reaches 1e6-1e7 a
# term and is the bound, since indexing costs grow with it too (each impact is that many
# repeats of its term: 1e7 took 6 GB and 47 s to index five documents, 1e8 failed).
MAX_SCALE = 1000


@dataclass
class ExportConfig:
    # 100 keeps two decimals of SPLADE weights (typically 0-3): impacts up to ~300, and
    # rounding moves a score by at most (|q|_1 + |d|_1) / 200 + n / 40000 on the exact scale
    # (n terms shared).
    scale: int = 100
    # Documents encoded per forward pass.
    batch_size: int = 32
    # Postings per document: each vector cut to its largest weights (``keep_top``); None keeps
    # every active term. An averaged `adapt` model's documents carry ~1.5x the terms of the
    # distilled one; README, "Index size", says what a cut costs.
    max_active_dims: int | None = None

    def __post_init__(self) -> None:
        require_positive_int(self.scale, "scale", ConfigError)
        if self.scale > MAX_SCALE:
            raise ConfigError(f"scale must be at most {MAX_SCALE}, got {self.scale}: Lucene sums impacts in float32, "
                              "exactly only up to 2**24, and indexes each impact as that many repeats of its term")
        require_positive_int(self.batch_size, "batch_size", ConfigError)
        try:
            check_max_active_dims(self.max_active_dims)
        except ValueError as e:
            raise ConfigError(str(e)) from None


@dataclass
class ExportStats:
    documents: int
    postings: int  # non-zero (token, doc) impacts written
    seconds: float
    scale: int
    model: str
    truncated: int = 0  # documents longer than the model's doc_max_length, truncated
    model_sha256: str = ""  # content hash of the exporting model (modeling/fingerprint.py)
    max_active_dims: int | None = None  # the cut applied to every document, None: none
    # Documents with no impact at this scale ("." or a weight under 0.5 / scale): no query can
    # score them, and Lucene holds no document without terms.
    empty: int = 0
    empty_ids: list[str] = field(default_factory=list)  # the first EMPTY_SHOWN of them
    # The same model's hash without its document window (fingerprint.model_hashes): matches an
    # index or ONNX export written before the window counted.
    weights_sha256: str = ""

    @property
    def docs_per_second(self) -> float:
        return self.documents / self.seconds if self.seconds > 0 else float("inf")


def lucene_token(token: str) -> str:
    """The Lucene term for a tokenizer token: unchanged unless it contains whitespace."""
    return "\u2581".join(token.split()) if any(c.isspace() for c in token) else token


def lucene_vocabulary(splade: SpladeEncoder) -> list[str]:
    """Lucene term of every token id (index = id)."""
    return [lucene_token(t) for t in splade.id_to_token()]


def quantise(matrix: sp.csr_matrix, vocab: Sequence[str], scale: int) -> list[dict[str, int]]:
    """Rows of a (n, V) weight matrix as ``{term: round(w * scale)}`` without zeros, largest first."""
    out = []
    for r in range(matrix.shape[0]):
        lo, hi = matrix.indptr[r], matrix.indptr[r + 1]
        impacts = np.rint(matrix.data[lo:hi].astype(np.float64) * scale).astype(np.int64)  # (nnz_r,)
        ids, impacts = rank(matrix.indices[lo:hi], impacts)
        out.append({vocab[i]: int(v) for i, v in zip(ids, impacts)})
    return out


def _batches(docs: Iterator[Document], size: int) -> Iterator[list[Document]]:
    batch: list[Document] = []
    for d in docs:
        batch.append(d)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def export_vectors(
    splade: SpladeEncoder,
    docs: str | Path,
    out: str | Path,
    config: ExportConfig | None = None,
    model_name: str = "",
    progress: Hooks | None = None,
    *,
    overwrite: bool = False,
) -> ExportStats:
    """Encode ``docs`` (a docs.jsonl path) into ``out/vectors.jsonl`` (+ ``sparse_adapt_export.json``).

    ``out`` is replaced whole, so an existing file or non-empty directory there is refused
    (:class:`~sparse_adapt.errors.OutputError`) unless ``overwrite``, and one holding ``docs``
    always: as ``sparse-adapt export`` refuses them.
    """
    from sparse_adapt.destination import check_output

    check_output(out, overwrite, flag="out", inputs=(docs,), overwrite_flag="overwrite=True")
    config = config or ExportConfig()
    vocab = lucene_vocabulary(splade)
    # Every record checked before any encoding (a repeated id would be two Lucene documents);
    # the same pass counts them for the progress bar.
    total = check_documents(docs)
    task = progress.task("exporting", total) if progress is not None else None
    n_docs = postings = n_truncated = empty = 0
    empty_ids: list[str] = []
    digest, weights_digest = model_hashes(splade)
    start = time.perf_counter()
    with atomic_directory(Path(out)) as tmp:
        with (tmp / VECTORS_FILE).open("w", encoding="utf-8") as f:
            # Windows of many batches: encode() sorts a window by length so batches barely pad;
            # memory stays bounded by the window, not the corpus.
            for batch in _batches(iter_documents(docs), config.batch_size * SORT_WINDOW_BATCHES):
                texts = [d.text for d in batch]
                n_truncated += len(truncated(splade, texts, "document"))
                matrix = splade.encode(texts, "document", config.batch_size, max_active_dims=config.max_active_dims)  # (B, V)
                for doc, vector in zip(batch, quantise(matrix, vocab, config.scale)):
                    f.write(json.dumps({"id": doc.doc_id, "contents": doc.text, "vector": vector}, ensure_ascii=False))
                    f.write("\n")
                    postings += len(vector)
                    if not vector:
                        empty += 1
                        if len(empty_ids) < EMPTY_SHOWN:
                            empty_ids.append(doc.doc_id)
                n_docs += len(batch)
                if task is not None:
                    rate = n_docs / max(time.perf_counter() - start, 1e-9)
                    task.advance(len(batch), description=f"exporting ({rate:.1f} docs/s)")
        stats = ExportStats(
            # the model loaded (an adapted model's folder), not the base it was trained from
            n_docs, postings, time.perf_counter() - start, config.scale,
            model_name or splade.source or splade.settings.base, n_truncated, digest,
            config.max_active_dims, empty, empty_ids, weights_digest,
        )
        # absolute, as the model is (model_reference): a relative path says nothing read from elsewhere
        meta = {**asdict(stats), "docs_per_second": stats.docs_per_second, "docs": str(Path(docs).resolve())}
        (tmp / EXPORT_META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return stats


def read_export_meta(vectors_dir: str | Path) -> dict:
    path = Path(vectors_dir) / EXPORT_META
    if not path.is_file():
        raise ConfigError(f"{vectors_dir}: no {EXPORT_META}; create the directory with `sparse-adapt export`")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError):
        raise DataError(path, None, None, "not valid JSON; export the documents again") from None
    # (key, type, least value): JSON's true is an int to Python; a scale below 1 or a negative count is no export's
    for key, kind, least in (("scale", int, 1), ("model", str, None), ("documents", int, 0)):
        value = meta.get(key) if isinstance(meta, dict) else None
        if not isinstance(value, kind) or isinstance(value, bool) or (least is not None and value < least):
            raise DataError(path, None, key, f"missing or not a valid {kind.__name__}; export the documents again")
    return meta


# Above this, Lucene's float32 sum of impact products rounds (24-bit significand).
EXACT_SCORES = 2**24


@dataclass
class VectorsCheck:
    empty: int  # documents without a term (Anserini skips them)
    self_score: int  # the largest document's score against itself: what a query like it scores
    empty_ids: list[str] = field(default_factory=list)  # the first EMPTY_SHOWN of them, named as export does


def validate_vectors(vectors_dir: str | Path, documents: int) -> VectorsCheck:
    """Check every line of an export before Lucene reads it: Anserini skips a line it cannot
    parse and still succeeds, which would silently drop that document from the index."""
    path = Path(vectors_dir) / VECTORS_FILE
    seen = empty = self_score = 0
    # 8 bytes per id, not a set of strings (~1 GB for 8.8M ids): a repeat is found among the
    # sorted hashes, then named by a second pass over the few ids that share one.
    hashes = array("Q")
    empty_ids: list[str] = []
    for n, raw in iter_lines(path):
        if not raw.strip():
            continue
        try:  # parse_json: a token written twice in one vector is refused, not its last impact kept
            record = parse_json(path, n, raw)
        except DataError as e:
            said = e.message if e.field is not None else "not valid JSON"  # a repeated key names itself
            raise DataError(path, n, e.field, f"{said} (the file was changed after export)") from None
        if not isinstance(record, dict) or not isinstance(record.get("id"), str) or not record["id"]:
            raise DataError(path, n, "id", "missing or not a non-empty string")
        if (problem := id_problem(record["id"])) is not None:
            raise DataError(path, n, "id", problem)
        hashes.append(_id_hash(record["id"]))
        vector = record.get("vector")
        # Lucene stores an impact as a 32-bit int; an empty token is no term a query can hold.
        if not isinstance(vector, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 < v < 2**31 and t.strip() for t, v in vector.items()
        ):
            raise DataError(path, n, "vector", "expected an object of token -> positive integer impact below 2^31")
        seen += 1
        empty += not vector
        if not vector and len(empty_ids) < EMPTY_SHOWN:
            empty_ids.append(record["id"])
        self_score = max(self_score, sum(v * v for v in vector.values()))
    if seen != documents:
        raise DataError(path, None, None, f"holds {seen} documents but the export wrote {documents}")
    _refuse_repeated_ids(path, hashes)
    return VectorsCheck(empty, self_score, empty_ids)


def _id_hash(doc_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(doc_id.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def _refuse_repeated_ids(path: Path, hashes: array) -> None:
    """A repeated id (Lucene would index two documents under it), named with both lines."""
    ordered = np.sort(np.frombuffer(hashes, dtype=np.uint64))
    shared = set(ordered[1:][ordered[1:] == ordered[:-1]].tolist())
    if not shared:
        return
    first: dict[str, int] = {}
    for n, raw in iter_lines(path):
        if raw.strip() and (doc_id := json.loads(raw)["id"]) and _id_hash(doc_id) in shared:
            if doc_id in first:
                raise DataError(path, n, "id", f"duplicate id {doc_id!r:.60} (first on line {first[doc_id]})")
            first[doc_id] = n


def inexact_sentence(check: VectorsCheck, scale: int) -> str | None:
    """A warning when scores can pass :data:`EXACT_SCORES` (a large ``--scale``), else None."""
    if check.self_score <= EXACT_SCORES:
        return None
    return (f"at scale {scale} a query like its document scores up to {check.self_score:,}, above 2^24, where "
            "Lucene's float32 sums round: near ties may rank otherwise than the exact integer scores "
            "(a lower --scale keeps them exact)")


def empty_sentence(empty: int, documents: int, scale: int, examples: Sequence[str] = ()) -> str:
    """Why ``empty`` documents are not in the index (export's warning, index's note)."""
    e_g = f" (e.g. {', '.join(examples)})" if examples else ""
    return (f"{empty} of {counted(documents, 'document')} {'has' if empty == 1 else 'have'} no term at scale {scale}{e_g}: "
            "no query can score them, and Lucene indexes no document without terms")
