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
    h = hashlib.sha256()
    for name, tensor in sorted(splade.mlm.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    h.update(json.dumps(splade.tokenizer.get_vocab(), sort_keys=True, ensure_ascii=False).encode())
    if document_window:
        h.update(f"|doc_max_length={splade.settings.doc_max_length}".encode())
    return h.hexdigest()
