"""Knowledge preservation: where the domain is not concerned, stay where the reference model was.

Adapting the whole encoder to a few dozen domain texts moves general-vocabulary weights
too (catastrophic forgetting, McCloskey & Cohen, 1989): a control query that shares a
polysemous word with the domain ("relay", "trial") starts matching domain documents. This
term is the "Learning without Forgetting" recipe (Li & Hoiem, 2016, ECCV) applied to
SPLADE vectors: the frozen reference model's outputs on the batch's *non-domain* texts are
the targets, so no extra data and no extra encoding is needed.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn


def distances(student: torch.Tensor, reference: torch.Tensor, columns: torch.Tensor | None = None) -> torch.Tensor:
    """(X,) ``sum_t c^t (w^t - w_ref^t)^2`` per text over the student's vocabulary.

    student: (X, V) vectors; reference: (X, V_ref) frozen vectors of the same texts, V_ref <= V;
    columns: optional (V,) 0/1 mask ``c``. Extending the vocabulary appends ids, so the first
    ``V_ref`` ids mean the same token in both; the reference never fires an added id, so its
    weight there is 0: a text the domain does not concern must not start firing the new terms.
    """
    ref = nn.functional.pad(reference, (0, student.shape[1] - reference.shape[1]))  # (X, V)
    sq = (student - ref) ** 2
    return (sq if columns is None else sq * columns).sum(1)


def vector_preservation(student: torch.Tensor, reference: torch.Tensor, selected: torch.Tensor) -> torch.Tensor:
    """Mean over the selected texts ((X,) bool) of their :func:`distances` over all ids."""
    if not selected.any():
        return student.new_zeros(())
    return distances(student[selected], reference[selected]).mean()


def score_preservation(student: torch.Tensor, reference: torch.Tensor, selected: torch.Tensor) -> torch.Tensor:
    """Mean over the selected (query, candidate) pairs of ``(s - s_ref)^2``.

    student, reference: (B, N) scores; selected: (B, N) bool.
    """
    if not selected.any():
        return student.new_zeros(())
    return ((student - reference) ** 2)[selected].mean()


class PreservationLoss(nn.Module):
    """Self-distillation from the frozen reference model on the texts the domain does not concern.

    Form ``"vectors"`` (default):

    .. math::

        \\mathcal{L}_{pres} = \\frac{1}{|X_0|} \\sum_{x \\in X_0} \\sum_{t \\in V} (w_x^t - \\bar{w}_x^t)^2

    where ``X_0`` are the batch's texts the domain does not concern (documents containing no
    domain token; queries containing none whose positives contain none either), ``w̄`` the
    reference model's vectors of the same texts, 0 on the ids the reference lacks (the added
    domain tokens: a control query must not start firing them).

    Form ``"all-texts"``: the same on ``X_0``, and on every other text of the batch too,
    there over the general vocabulary only:

    .. math::

        \\mathcal{L}_{pres} = \\frac{1}{|X|} \\Big( \\sum_{x \\in X_0} \\sum_{t \\in V} (w_x^t - \\bar{w}_x^t)^2
            + \\sum_{x \\in X \\setminus X_0} \\sum_{t \\in V_{ref} \\setminus F} (w_x^t - \\bar{w}_x^t)^2 \\Big)

    with ``F`` the domain ids and the reference's pieces of the domain terms (``free_ids``):
    a domain text may gain its terms, but not lose or gain general words (e.g. a domain
    query must not learn to drop a polysemous word it shares with the controls).

    Form ``"scores"``:

    .. math::

        \\mathcal{L}_{pres} = \\frac{1}{|P_0|} \\sum_{(q, d) \\in P_0} (s(q, d) - \\bar{s}(q, d))^2

    over ``P_0``, the candidate pairs of those queries, ``s̄`` the reference's dot products.

    Forms ``"vectors"`` and ``"scores"`` are zero when the batch holds no such text (``"all-texts"``
    then still anchors the domain texts). Args (forward) are given by name; each form reads
    what it needs (see :data:`FORMS`).
    """

    def __init__(self, form: str = "vectors"):
        super().__init__()
        if form not in FORMS:
            raise ValueError(f"unknown preservation form {form!r}; valid: {', '.join(FORMS)}")
        self.form = form

    def forward(self, **inputs) -> torch.Tensor:
        return FORMS[self.form](inputs)


def _vectors(i: dict) -> torch.Tensor:
    q, d = i["query_weights"], i["doc_weights"]
    lq = vector_preservation(q, i["ref_query_weights"], i["general_queries"])
    ld = vector_preservation(d, i["ref_doc_weights"], i["general_docs"])
    # Weight each side by its number of selected texts: the mean over all of X_0.
    cq, cd = float(i["general_queries"].sum()), float(i["general_docs"].sum())
    if cq + cd == 0:
        return q.new_zeros(())
    return (lq * cq + ld * cd) / (cq + cd)


def _all_texts(i: dict) -> torch.Tensor:
    q, d = i["query_weights"], i["doc_weights"]
    n_ref = i["ref_query_weights"].shape[1]
    general_columns = torch.zeros(q.shape[1], device=q.device)  # (V,)
    general_columns[:n_ref] = 1.0
    if len(i["free_ids"]):
        general_columns[torch.as_tensor(list(i["free_ids"]), device=q.device)] = 0.0
    total = q.new_zeros(())
    for w, ref, general in ((q, i["ref_query_weights"], i["general_queries"]), (d, i["ref_doc_weights"], i["general_docs"])):
        everything = distances(w, ref)  # (X,)
        known = distances(w, ref, general_columns)  # (X,)
        total = total + torch.where(general, everything, known).sum()
    return total / (q.shape[0] + d.shape[0])


def _scores(i: dict) -> torch.Tensor:
    selected = i["general_queries"].unsqueeze(1) & i["mask"]  # (B, N)
    return score_preservation(i["student"], i["ref_scores"], selected)


# The forms of the term by config name (``distill.pres_form``); each reads its inputs by name.
FORMS: dict[str, Callable[[dict], torch.Tensor]] = {"vectors": _vectors, "all-texts": _all_texts, "scores": _scores}
