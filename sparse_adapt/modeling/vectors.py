"""Sparse vectors as ranked tokens: one order for every listing in sparse-adapt.

Rows of a CSR matrix of SPLADE weights are listed by descending weight; **ties are broken
by ascending token id**, so every listing (``encode``, diagnostics, export, report) shows
the same order for the same vector, independent of how scipy stored the row.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import scipy.sparse as sp
import torch

from sparse_adapt.errors import require_positive_int


def rank(ids: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ids, weights) of the positive entries, by descending weight, ties by ascending id."""
    ids, weights = np.asarray(ids, dtype=np.int64), np.asarray(weights)
    keep = weights > 0
    ids, weights = ids[keep], weights[keep]
    order = np.lexsort((ids, -weights))
    return ids[order], weights[order]


def ranked_row(matrix: sp.csr_matrix, row: int) -> tuple[np.ndarray, np.ndarray]:
    """(token ids, float64 weights) of one CSR row's non-zeros in :func:`rank` order."""
    lo, hi = matrix.indptr[row], matrix.indptr[row + 1]
    return rank(matrix.indices[lo:hi], matrix.data[lo:hi].astype(np.float64))


def check_max_active_dims(k: int | None) -> None:
    """``max_active_dims`` is None (no limit) or a positive integer; ValueError otherwise."""
    if k is not None:
        require_positive_int(k, "max_active_dims")


def keep_top(matrix: sp.csr_matrix, k: int) -> sp.csr_matrix:
    """A copy of ``matrix`` with each row cut to its first ``k`` entries in :func:`rank` order
    (the ``k`` largest weights, ties by ascending token id); shorter rows are unchanged.

    What sentence-transformers calls ``max_active_dims``: it bounds a document's postings in an
    index. Ties are broken like every listing, so the same vector is always cut the same way.
    """
    check_max_active_dims(k)
    matrix = sp.csr_matrix(matrix, copy=True)
    for r in range(matrix.shape[0]):
        lo, hi = matrix.indptr[r], matrix.indptr[r + 1]
        if hi - lo > k:
            ids, _ = rank(matrix.indices[lo:hi], matrix.data[lo:hi])
            drop = ~np.isin(matrix.indices[lo:hi], ids[:k])
            matrix.data[lo:hi][drop] = 0
    matrix.eliminate_zeros()
    return matrix


def rows_to_dicts(matrix: sp.csr_matrix, vocab: Sequence[str], top_k: int | None = None) -> list[dict[str, float]]:
    """Each row as ``{token: weight}`` in :func:`rank` order, the first ``top_k`` if given."""
    out = []
    for r in range(matrix.shape[0]):
        ids, weights = ranked_row(matrix, r)
        out.append({vocab[i]: float(w) for i, w in zip(ids[:top_k], weights[:top_k])})
    return out


def decode(
    vectors: sp.spmatrix | torch.Tensor, vocab: Sequence[str], top_k: int | None = None
) -> list[tuple[str, float]] | list[list[tuple[str, float]]]:
    """Vectors as ``[(token, weight), ...]`` in :func:`rank` order, the first ``top_k`` if given.

    ``vectors``: a (n, V) scipy sparse matrix, tensor (dense or torch sparse) or numpy array
    gives one list per row; one (V,) tensor or array gives one flat list, as
    sentence-transformers' ``decode`` does.
    """
    if top_k is not None:
        require_positive_int(top_k, "top_k")
    matrix, one_row = as_rows(vectors)
    if matrix.shape[-1] > len(vocab):
        raise ValueError(f"vectors have {matrix.shape[-1]} columns but the vocabulary has {len(vocab)} tokens")
    rows = [list(d.items()) for d in rows_to_dicts(matrix, vocab, top_k)]
    return rows[0] if one_row else rows


def as_rows(vectors: sp.spmatrix | torch.Tensor | np.ndarray, name: str = "vectors") -> tuple[sp.csr_matrix, bool]:
    """``vectors`` as (n, V) CSR (a scipy matrix keeps its dtype, a tensor or an array becomes
    float32), and whether they were one (V,) vector.

    Accepts what sentence-transformers' ``SparseEncoder`` and ours return: a scipy sparse
    matrix or 1-D array, a torch tensor (dense or sparse, (V,) or (n, V)), a numpy array.
    """
    if isinstance(vectors, np.ndarray):  # read as the tensor it holds: (V,) one flat list, (n, V) one per row
        vectors = torch.from_numpy(np.asarray(vectors, dtype=np.float32))
    one_row = (isinstance(vectors, torch.Tensor) or sp.issparse(vectors)) and len(vectors.shape) == 1
    if isinstance(vectors, torch.Tensor):
        if vectors.ndim not in (1, 2):
            raise ValueError(f"{name} must be 1-D or 2-D, got {vectors.ndim}-D")
        if vectors.is_meta:  # torch's own error ("Cannot copy out of meta tensor") was a NotImplementedError
            raise ValueError(f"{name} is a meta tensor: a shape without weights (load or compute the vectors first)")
        matrix = _tensor_to_csr(vectors.detach().cpu())
    elif not sp.issparse(vectors):
        raise TypeError(f"{name} must be a scipy sparse matrix, a torch tensor or a numpy array, got {type(vectors).__name__}")
    elif one_row:  # a 1-D scipy sparse array (csr_array(m)[0])
        matrix = sp.csr_matrix(vectors.reshape(1, -1))
    else:
        matrix = sp.csr_matrix(vectors)
    if matrix.dtype.kind in "fc" and not np.isfinite(matrix.data).all():
        # NaN decoded to no term while sparsity counted it active, inf scored inf: no weight at all
        row = int(np.searchsorted(matrix.indptr, int(np.flatnonzero(~np.isfinite(matrix.data))[0]), side="right")) - 1
        raise ValueError(f"{name}: row {row} holds a NaN or infinite weight: not a SPLADE vector")
    return matrix, one_row


def _same_width(a: sp.csr_matrix, b: sp.csr_matrix) -> None:
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"vectors over different vocabularies: {a.shape[1]} and {b.shape[1]} columns")


def similarity(a: sp.spmatrix | torch.Tensor | np.ndarray, b: sp.spmatrix | torch.Tensor | np.ndarray) -> np.ndarray:
    """SPLADE scores ``q . d`` of every row of ``a`` against every row of ``b``: a dense
    (n_a, n_b) float32 array; a (V,) input counts as one row. The dot product is the score
    SPLADE is trained for and Lucene's impact index computes (no cosine normalisation)."""
    a, _ = as_rows(a, "a")
    b, _ = as_rows(b, "b")
    _same_width(a, b)
    return np.asarray((a @ b.T).toarray(), dtype=np.float32)  # (n_a, n_b)


def intersection(query: sp.spmatrix | torch.Tensor | np.ndarray, documents: sp.spmatrix | torch.Tensor | np.ndarray) -> sp.csr_matrix:
    """Each term's contribution ``q_t * d_t`` to the score of one ``query`` against each row of
    ``documents``: (n_documents, V) float32 CSR holding only the shared terms, so its row sums
    are :func:`similarity`'s scores and :func:`decode` lists why a document matched."""
    q, _ = as_rows(query, "query")
    if q.shape[0] != 1:
        raise ValueError(f"query must be one vector, got {q.shape[0]} rows")
    d, _ = as_rows(documents, "documents")
    _same_width(q, d)
    out = sp.csr_matrix(d.multiply(q), dtype=np.float32)  # broadcast (1, V) over (n, V)
    out.eliminate_zeros()
    return out


def sparsity(vectors: sp.spmatrix | torch.Tensor | np.ndarray) -> dict[str, float]:
    """Mean active terms per row (``active_dims``) and mean share of zero weights
    (``sparsity_ratio``), the two numbers sentence-transformers' ``sparsity`` reports."""
    matrix, _ = as_rows(vectors)
    n, width = matrix.shape
    if n == 0 or width == 0:
        return {"active_dims": 0.0, "sparsity_ratio": 1.0}
    matrix = matrix.copy()
    matrix.eliminate_zeros()  # a stored zero is not an active term
    active = np.diff(matrix.indptr)  # (n,)
    return {"active_dims": float(active.mean()), "sparsity_ratio": float(1.0 - active.mean() / width)}


def _tensor_to_csr(t: torch.Tensor) -> sp.csr_matrix:
    """A (V,) or (n, V) tensor as (1 or n, V) CSR, without the dense matrix for a sparse one:
    sentence-transformers' corpus output (100k x 30k) densified to ~12 GB."""
    if t.layout == torch.strided:
        return sp.csr_matrix(t.float().numpy().reshape(1, -1) if t.ndim == 1 else t.float().numpy())
    coo = t.to_sparse_coo().coalesce()
    values = coo.values().float().numpy()
    if t.ndim == 1:
        (cols,) = coo.indices().numpy()
        return sp.csr_matrix((values, (np.zeros_like(cols), cols)), shape=(1, t.shape[0]))
    rows, cols = coo.indices().numpy()
    return sp.csr_matrix((values, (rows, cols)), shape=tuple(t.shape))


def dicts_to_rows(vectors: Sequence[dict[str, float]], term_id: dict[str, int]) -> sp.csr_matrix:
    """The inverse of :func:`rows_to_dicts`: ``{token: weight}`` rows as a (len(vectors),
    len(term_id)) CSR matrix; a token missing from ``term_id`` raises KeyError naming it."""
    rows, cols, vals = [], [], []
    for r, vector in enumerate(vectors):
        for token, w in vector.items():
            cols.append(term_id[token])
            rows.append(r)
            vals.append(float(w))
    return sp.csr_matrix((vals, (rows, cols)), shape=(len(vectors), len(term_id)))


class VectorMethods:
    """The sentence-transformers ``SparseEncoder`` methods both of our encoders offer
    (:class:`~sparse_adapt.modeling.encoder.SpladeEncoder` in PyTorch,
    :class:`~sparse_adapt.modeling.onnx.OnnxSpladeEncoder` in ONNX Runtime), written once
    over each one's own ``encode(texts, kind, batch_size, progress=, max_active_dims=)`` and
    ``id_to_token()``. Vectors are scipy CSR rows, not torch tensors.
    """

    def encode_query(self, texts: Sequence[str], batch_size: int = 32, max_active_dims: int | None = None,
                     progress=None) -> sp.csr_matrix:
        """Queries -> (n, V) CSR weights (query maximum length)."""
        return self.encode(texts, "query", batch_size, progress=progress, max_active_dims=max_active_dims)

    def encode_document(self, texts: Sequence[str], batch_size: int = 32, max_active_dims: int | None = None,
                        progress=None) -> sp.csr_matrix:
        """Documents -> (n, V) CSR weights (document maximum length)."""
        return self.encode(texts, "document", batch_size, progress=progress, max_active_dims=max_active_dims)

    def decode(
        self, vectors: sp.spmatrix | torch.Tensor | np.ndarray, top_k: int | None = None
    ) -> list[tuple[str, float]] | list[list[tuple[str, float]]]:
        """``vectors`` as ``(token, weight)`` lists, largest first: see :func:`decode`."""
        return decode(vectors, self.id_to_token(), top_k)

    def encode_to_dicts(self, texts: Sequence[str], kind: str = "document", batch_size: int = 32,
                        top_k: int | None = None) -> list[dict[str, float]]:
        """Encode texts to ``{token: weight}`` dicts sorted by descending weight, the first
        ``top_k`` terms of each if given."""
        if top_k is not None:
            require_positive_int(top_k, "top_k")  # before any encoding
        return rows_to_dicts(self.encode(texts, kind, batch_size), self.id_to_token(), top_k)

    similarity = staticmethod(similarity)
    intersection = staticmethod(intersection)
    sparsity = staticmethod(sparsity)
