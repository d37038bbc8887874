"""The frozen reference model of the distill stage: its vectors of the training texts
(targets of the preservation term) and its validation scores (the selection baseline).

The reference is the model the pipeline started from (``--base``, or ``--reference``),
before any stage changed it. Its vectors of the training texts never change, so they are
computed once, kept sparse, and densified per batch; no second model runs during training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import scipy.sparse as sp
import torch

from sparse_adapt.data import TrainExample
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.modeling.tokenization import running_text_ids


def load_reference(reference: str | Path | SpladeEncoder, device: torch.device) -> SpladeEncoder:
    if isinstance(reference, SpladeEncoder):
        return reference
    return SpladeEncoder.from_pretrained(reference, device=device)


class ReferenceVectors:
    """Reference vectors of every query and candidate text the distill stage trains on
    (``train.jsonl``'s and the definition queries'), by text."""

    def __init__(
        self, queries: sp.csr_matrix, documents: sp.csr_matrix, query_rows: dict[str, int], doc_rows: dict[str, int],
        free_ids: Sequence[int] = (),
    ):
        self._q, self._d = queries, documents
        self._q_rows, self._d_rows = query_rows, doc_rows
        # Ids whose weight in a domain text may move: the domain ids and the pieces the
        # reference splits the terms into (it fires those where the student has the term).
        self.free_ids = sorted(set(free_ids))

    @classmethod
    def encode(
        cls, reference: SpladeEncoder, examples: Sequence[TrainExample], terms: Sequence[str] = (),
        domain_ids: Sequence[int] = (),
    ) -> "ReferenceVectors":
        queries = list(dict.fromkeys(ex.query for ex in examples))
        docs = list(dict.fromkeys(t for ex in examples for t in ex.doc_texts))
        tok = reference.tokenizer  # a term's pieces at a text's start and inside it (other ones for byte-level BPE)
        pieces = {i for t in terms for form in (tok(t, add_special_tokens=False)["input_ids"], running_text_ids(tok, t))
                  for i in form}
        return cls(
            reference.encode(queries, "query"), reference.encode(docs, "document"),
            {t: i for i, t in enumerate(queries)}, {t: i for i, t in enumerate(docs)}, [*domain_ids, *pieces],
        )

    @property
    def vocab_size(self) -> int:
        return self._q.shape[1]

    @staticmethod
    def _dense(matrix: sp.csr_matrix, rows: list[int], device) -> torch.Tensor:
        return torch.from_numpy(matrix[rows].toarray()).to(device)  # (len(rows), V_ref)

    def queries(self, texts: Sequence[str], device) -> torch.Tensor:
        return self._dense(self._q, [self._q_rows[t] for t in texts], device)

    def documents(self, texts: Sequence[str], device) -> torch.Tensor:
        return self._dense(self._d, [self._d_rows[t] for t in texts], device)
