"""A content hash of a model: which weights and vocabulary produced an index.

Paths say nothing about content (a directory can be retrained in place), so exports and
indexes record :func:`model_sha256` and searching compares it with the query model's.
"""

from __future__ import annotations

import hashlib
import json

import torch

from sparse_adapt.modeling.encoder import SpladeEncoder


def model_sha256(splade: SpladeEncoder) -> str:
    """SHA-256 over every tensor of the masked-LM (name, dtype, shape, bytes) and the vocabulary."""
    h = hashlib.sha256()
    for name, tensor in sorted(splade.mlm.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    h.update(json.dumps(splade.tokenizer.get_vocab(), sort_keys=True, ensure_ascii=False).encode())
    return h.hexdigest()
