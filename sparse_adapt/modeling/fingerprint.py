"""A content hash of a model: which weights, vocabulary and document window produced an index.

Paths say nothing about content (a directory can be retrained in place), so exports and
indexes record :func:`model_sha256` and searching compares it with the query model's.
"""

from __future__ import annotations

import hashlib
import json

import torch

from sparse_adapt.modeling.encoder import SpladeEncoder


def model_sha256(splade: SpladeEncoder, document_window: bool = True) -> str:
    """SHA-256 over every tensor of the masked-LM (name, dtype, shape, bytes), the vocabulary and
    ``doc_max_length``.

    The document window is part of what encoded an index: an edited ``sparse_adapt.json`` that
    cuts documents at 64 pieces instead of 256 gives other document vectors from the same
    weights. ``query_max_length`` is not: it changes no indexed vector, and a user may lengthen
    it for long questions against the same index. ``document_window=False``: the hash of
    exports made before it counted (2026-11-26), which a search still accepts for them.
    """
    return model_hashes(splade)[0 if document_window else 1]


def _weights_and_vocabulary(splade: SpladeEncoder) -> "hashlib._Hash":
    h = hashlib.sha256()
    for name, tensor in sorted(splade.mlm.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    h.update(json.dumps(splade.tokenizer.get_vocab(), sort_keys=True, ensure_ascii=False).encode())
    return h


def model_hashes(splade: SpladeEncoder) -> tuple[str, str]:
    """``(model_sha256(splade), model_sha256(splade, False))`` in one pass over the weights: what
    an export, an index and an ONNX export record, so that one written before the window
    counted (holding only the second) can still be matched with one written since."""
    h = _weights_and_vocabulary(splade)
    weights = h.hexdigest()
    h.update(f"|doc_max_length={splade.settings.doc_max_length}".encode())
    return h.hexdigest(), weights


def same_model(recorded: tuple[str, str], other: tuple[str, str]) -> bool:
    """Whether two recorded ``(model_sha256, weights_sha256)`` pairs name one model: the same full
    hash, or, where either side was written before the full hash counted the document window
    (its weights hash is ""), a shared hash of any kind (the same weights: all it can say)."""
    if recorded[0] and other[0] and recorded[1] and other[1]:
        return recorded[0] == other[0]
    return bool({recorded[0], recorded[1]} & {other[0], other[1]} - {""})
