"""ONNX export of a SPLADE encoder, SPLADE pooling included, and an ONNX Runtime encoder.

The graph maps ``input_ids`` (batch, length) int64 and ``attention_mask`` (batch, length)
int64 to ``weights`` (batch, vocab) float32,

    weights_{b,t} = max_i mask_{b,i} * log(1 + relu(logit_{b,i,t})),

with dynamic batch and length axes: the whole query encoder of a SPLADE retriever in one
file, which is what Anserini/Pyserini-style ONNX query encoders run. Special tokens are
excluded by the weights themselves (``encoder.EXCLUDED_BIAS``), so the graph needs no
vocabulary mask. It computes the full (batch, length, vocab) logits, which is cheap for
queries; documents are better encoded by ``SpladeEncoder`` (chunked head).

An export directory holds ``model.onnx`` (``model.onnx.data`` beside it for models over
:data:`EXTERNAL_DATA_BYTES`), the tokenizer, and ``sparse_adapt_onnx.json`` (maximum
lengths, vocabulary size, opset, the source model, the verification numbers). Every export
is checked in ONNX Runtime against the PyTorch vectors before the directory appears.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from sparse_adapt.atomic import atomic_directory
from sparse_adapt.errors import ConfigError, ModelLoadError, SparseAdaptError
from sparse_adapt.modeling.batching import encode_texts
from sparse_adapt.modeling.encoder import Kind, SpladeEncoder
from sparse_adapt.modeling.fingerprint import model_hashes
from sparse_adapt.modeling.hub import ONNX_META_FILE
from sparse_adapt.modeling.vectors import VectorMethods, ranked_row
from sparse_adapt.progress import Hooks

ONNX_FILE = "model.onnx"
META_FILE = ONNX_META_FILE  # named in hub.py, whose model check points an export here
INPUTS = ("input_ids", "attention_mask")
OUTPUT = "weights"
# torch's ONNX exporter (torch.export based) emits opset 18 natively; lower opsets go
# through ONNX's version converter, which does not cover every operator.
DEFAULT_OPSET = 18
MIN_OPSET = 18
# Protobuf caps one file at 2 GiB: weights over half of that go to model.onnx.data.
EXTERNAL_DATA_BYTES = 2**30
# The export is refused beyond this difference from PyTorch (float32 logits of a
# 12-layer encoder differ by ~1e-6 between the two runtimes).
TOLERANCE = 1e-4
TOP_K = 10

# Texts the export is verified on: a padded batch of short, long and domain-looking texts.
PROBE_TEXTS = (
    "database connection timeout",
    "how do I configure OAuth2 authentication for the API v3 endpoints",
    "x",
    "Understanding the metrics of this domain is essential for financial analysis. "
    "Expenditure impacts fiscal policy and budget allocation across departments, "
    "and the review is required for compliance by the end of each fiscal quarter.",
)


class PooledSplade(nn.Module):
    """A masked-LM and SPLADE max pooling as one module (what the ONNX graph computes)."""

    def __init__(self, mlm: nn.Module, vocab_size: int):
        super().__init__()
        self.mlm = mlm
        self.vocab_size = vocab_size

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        logits = self.mlm(input_ids=input_ids, attention_mask=attention_mask).logits[..., : self.vocab_size]  # (B, L, V)
        act = torch.log1p(torch.relu(logits)) * attention_mask.unsqueeze(-1).to(logits.dtype)  # padding -> 0
        return act.amax(dim=1)  # (B, V)


@dataclass
class OnnxMeta:
    """``sparse_adapt_onnx.json``."""

    source: str  # the model the graph was exported from
    vocab_size: int
    query_max_length: int
    doc_max_length: int
    opset: int
    max_abs_diff: float  # largest |ONNX Runtime - PyTorch| weight over the probe texts
    top10_identical: int  # probe texts whose top-10 term ids (in order) are identical
    probes: int
    seconds: float
    # The source's weights and vocabulary (fingerprint.model_sha256): what `search --onnx` checks
    # against the index's export. Empty in exports written before it was recorded.
    model_sha256: str = ""
    weights_sha256: str = ""  # the same without the document window (fingerprint.model_hashes); "" before it

    @classmethod
    def load(cls, directory: Path) -> "OnnxMeta":
        path = directory / META_FILE
        if not path.is_file():
            raise ModelLoadError(f"{directory}: no {META_FILE}; not a directory written by `sparse-adapt onnx`")
        try:
            return cls(**json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, TypeError, RecursionError) as e:  # not JSON, not an object, other fields, 10^5-deep nesting
            raise ModelLoadError(f"{path}: not the metadata `sparse-adapt onnx` writes ({type(e).__name__}: "
                                 f"{str(e).splitlines()[0] if str(e) else ''}); export the model again") from None


@dataclass
class Agreement:
    max_abs_diff: float
    top_identical: int  # rows whose top-k term ids are identical, in order
    rows: int
    same_nonzeros: bool


class OnnxExportError(SparseAdaptError):
    """The exported graph does not reproduce the PyTorch vectors (nothing was written)."""


def compare(a: sp.csr_matrix, b: sp.csr_matrix, k: int = TOP_K) -> Agreement:
    """How two (n, V) weight matrices agree: max difference, top-k ids per row, non-zero sets."""
    diff = abs(a - b)
    same_top = sum(
        np.array_equal(ranked_row(a, r)[0][:k], ranked_row(b, r)[0][:k]) for r in range(a.shape[0])
    )
    same_nz = all(
        np.array_equal(np.sort(a.indices[a.indptr[r] : a.indptr[r + 1]]), np.sort(b.indices[b.indptr[r] : b.indptr[r + 1]]))
        for r in range(a.shape[0])
    )
    return Agreement(float(diff.max()) if diff.nnz else 0.0, int(same_top), a.shape[0], same_nz)


@contextlib.contextmanager
def _converter_notes() -> Iterator[list[str]]:
    """The messages of onnxscript's opset converter, kept instead of printed: its failures
    come with a traceback on stderr, and the export's own error says what went wrong."""
    log = logging.getLogger("onnxscript.version_converter")
    notes: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.exc_info and record.exc_info[1] is not None:  # a failed conversion, not a notice
                lines = str(record.exc_info[1]).strip().splitlines()
                notes.append(lines[-1] if lines else type(record.exc_info[1]).__name__)

    handler, propagate = Keep(), log.propagate
    log.addHandler(handler)
    log.propagate = False
    try:
        yield notes
    finally:
        log.removeHandler(handler)
        log.propagate = propagate


def export_onnx(splade: SpladeEncoder, out: str | Path, opset: int = DEFAULT_OPSET, source: str = "") -> OnnxMeta:
    """Export ``splade`` to ``out`` (replaced atomically) and verify it in ONNX Runtime.

    Raises :class:`OnnxExportError` when the graph's vectors differ from PyTorch's by more
    than :data:`TOLERANCE` or in a top-10 term on the probe texts (nothing is written then).
    """
    import onnx

    if not MIN_OPSET <= opset <= onnx.defs.onnx_opset_version():
        raise ConfigError(f"--opset must be between {MIN_OPSET} (torch's ONNX exporter) and "
                          f"{onnx.defs.onnx_opset_version()} (the installed onnx), got {opset}")
    t0 = time.perf_counter()
    splade.exclude_special_tokens()  # the graph carries the exclusion in its weights
    fingerprint, weights = model_hashes(splade)  # the model as saved: what `export` recorded for the index
    if any(p.dtype != torch.float32 for p in splade.mlm.parameters()):
        # ONNX Runtime's CPU kernels run float32 (a bf16 graph has no Add kernel there, and an
        # fp16 one drifted past the tolerance): a half-precision checkpoint is exported, and
        # checked, as its float32 copy; the caller's model is left as it is.
        splade = SpladeEncoder(copy.deepcopy(splade.mlm).float(), splade.tokenizer, splade.settings)
    model = PooledSplade(splade.mlm, splade.vocab_size).eval()
    example = splade.tokenize(list(PROBE_TEXTS[:2]), "query")
    batch, length = torch.export.Dim("batch"), torch.export.Dim("length")
    big = sum(p.numel() * p.element_size() for p in splade.mlm.parameters()) > EXTERNAL_DATA_BYTES
    out = Path(out)
    with atomic_directory(out) as tmp:
        with torch.no_grad(), warnings.catch_warnings(), _converter_notes() as notes:
            # Emitted for every named dynamic axis although the names do reach the graph.
            warnings.filterwarnings("ignore", message="# The axis name", category=UserWarning)
            warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)  # torch-internal
            torch.onnx.export(
                model, (example["input_ids"], example["attention_mask"]), str(tmp / ONNX_FILE),
                input_names=list(INPUTS), output_names=[OUTPUT], opset_version=opset, dynamo=True, verbose=False,
                dynamic_shapes={name: {0: batch, 1: length} for name in INPUTS}, external_data=big,
            )
        splade.save_tokenizer(tmp)
        meta = OnnxMeta(
            source=source or splade.settings.base, vocab_size=splade.vocab_size,
            query_max_length=splade.settings.query_max_length, doc_max_length=splade.settings.doc_max_length,
            opset=opset, max_abs_diff=0.0, top10_identical=0, probes=len(PROBE_TEXTS), seconds=0.0,
            model_sha256=fingerprint, weights_sha256=weights,
        )
        _write_meta(tmp, meta)
        try:
            agreement = verify_export(splade, tmp)
        except ModelLoadError as e:  # e.g. an opset newer than the installed ONNX Runtime runs
            converted = f" (the exporter could not convert it: {notes[-1]})" if notes else ""
            other = f"; try opset {DEFAULT_OPSET}, the default" if opset != DEFAULT_OPSET else ""
            raise OnnxExportError(
                f"ONNX Runtime cannot run the exported opset-{opset} graph{converted}{other}: "
                f"{str(e).replace(str(tmp), str(out))}"
            ) from None
        meta.max_abs_diff, meta.top10_identical = agreement.max_abs_diff, agreement.top_identical
        meta.seconds = round(time.perf_counter() - t0, 2)
        _write_meta(tmp, meta)
    return meta


def verify_export(splade: SpladeEncoder, directory: str | Path, texts: Sequence[str] = PROBE_TEXTS) -> Agreement:
    """ONNX Runtime's vectors of ``texts`` against ``splade``'s; raises :class:`OnnxExportError`
    beyond :data:`TOLERANCE` or on any differing top-10."""
    agreement = compare(OnnxSpladeEncoder(directory).encode(texts, "document"), splade.encode(texts, "document"))
    if agreement.max_abs_diff > TOLERANCE or agreement.top_identical < agreement.rows:
        raise OnnxExportError(
            f"the ONNX graph disagrees with PyTorch: max |diff| {agreement.max_abs_diff:.2e} "
            f"(tolerance {TOLERANCE:.0e}), top-{TOP_K} identical for {agreement.top_identical}/{agreement.rows} texts"
        )
    return agreement


def _write_meta(directory: Path, meta: OnnxMeta) -> None:
    (directory / META_FILE).write_text(json.dumps(asdict(meta), indent=2) + "\n", encoding="utf-8")


class OnnxSpladeEncoder(VectorMethods):
    """SPLADE vectors from an export directory, in ONNX Runtime (no torch model needed).

    Same tokenisation and maximum lengths as the :class:`SpladeEncoder` it came from, so
    ``encode`` returns its vectors (within :data:`TOLERANCE`).
    """

    def __init__(self, directory: str | Path, threads: int | None = None):
        self.directory = Path(directory)
        if self.directory.is_file():  # the graph's own path: its tokenizer and metadata lie beside it
            raise ModelLoadError(f"{directory} is a file; give the folder `sparse-adapt onnx --out` wrote "
                                 f"({self.directory.parent})")
        if not (self.directory / ONNX_FILE).is_file():
            raise ModelLoadError(f"{directory}: no {ONNX_FILE}; write one with `sparse-adapt onnx --model M --out DIR`")
        self.meta = OnnxMeta.load(self.directory)
        self._id_to_token: list[str] | None = None
        # ONNX Runtime (1.32) queues telemetry events in $XDG_CACHE_HOME (else ~/.cache)/Microsoft/DeveloperTools: a
        # write outside every --out, by a tool meant to run offline. This variable, read when its
        # environment starts, turns that off; a user who set it keeps their value.
        os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
        try:
            import onnxruntime as ort
        except ImportError:
            raise ModelLoadError("ONNX Runtime is not installed (pip install onnxruntime)") from None
        from transformers import AutoTokenizer

        options = ort.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        try:  # a truncated or hand-edited file: whatever the loaders raise is the directory's fault
            self.tokenizer = AutoTokenizer.from_pretrained(self.directory)
            self.session = ort.InferenceSession(str(self.directory / ONNX_FILE), options,
                                                providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise ModelLoadError(f"{directory}: cannot load the ONNX export ({type(e).__name__}: {first})") from None
        if len(self.tokenizer) != self.meta.vocab_size:  # a tokenizer copied in from another model
            raise ModelLoadError(f"{directory}: its tokenizer has {len(self.tokenizer)} tokens but the graph scores "
                                 f"{self.meta.vocab_size}: the tokenizer is not the exported model's; export again")

    @property
    def vocab_size(self) -> int:
        return self.meta.vocab_size

    def id_to_token(self) -> list[str]:
        if self._id_to_token is None:  # the export's vocabulary never changes
            self._id_to_token = self.tokenizer.convert_ids_to_tokens(list(range(self.vocab_size)))
        return list(self._id_to_token)

    def max_length(self, kind: Kind) -> int:
        lengths = {"query": self.meta.query_max_length, "document": self.meta.doc_max_length}
        if kind not in lengths:
            raise ValueError(f"kind must be 'query' or 'document', got {kind!r}")
        return lengths[kind]

    def encode(
        self, texts: Sequence[str], kind: Kind = "document", batch_size: int = 32, max_active_dims: int | None = None,
        progress: Hooks | None = None,
    ) -> sp.csr_matrix:
        """Texts -> (n, V) float32 CSR weights, in input order; documents by default, one
        string as one text; batched by length, with ``max_active_dims`` and ``progress``, as
        :meth:`SpladeEncoder.encode`."""
        max_length = self.max_length(kind)

        def weigh(input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:  # (B, L), (B, L) -> (B, V)
            return self.session.run([OUTPUT], dict(zip(INPUTS, (input_ids, attention_mask))))[0]

        return encode_texts(texts, kind=kind, tokenizer=self.tokenizer, max_length=max_length,
                            vocab_size=self.vocab_size, weigh=weigh, batch_size=batch_size, progress=progress,
                            max_active_dims=max_active_dims)

