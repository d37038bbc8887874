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


def vector_preservation(student: torch.Tensor, reference: torch.Tensor, selected: torch.Tensor) -> torch.Tensor:
    """Mean over selected texts of ``sum_t (w^t - w_ref^t)^2`` over the student's vocabulary.

    student: (X, V) vectors; reference: (X, V_ref) frozen vectors of the same texts, V_ref <= V;
    selected: (X,) bool. Extending the vocabulary appends ids, so the first ``V_ref`` ids
    mean the same token in both; the reference never fires an added id, so its weight there
    is 0: a text the domain does not concern must not start firing the new terms either.
    """
    if not selected.any():
        return student.new_zeros(())
    s = student[selected]  # (X', V)
    n = reference.shape[1]
    near = ((s[:, :n] - reference[selected]) ** 2).sum(1)  # (X',)
    added = (s[:, n:] ** 2).sum(1)  # (X',)
    return (near + added).mean()


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

    Form ``"scores"``:

    .. math::

        \\mathcal{L}_{pres} = \\frac{1}{|P_0|} \\sum_{(q, d) \\in P_0} (s(q, d) - \\bar{s}(q, d))^2

    over ``P_0``, the candidate pairs of those queries, ``s̄`` the reference's dot products.

    Zero when the batch holds no such text. Args (forward) are given by name; each form reads
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


def _scores(i: dict) -> torch.Tensor:
    selected = i["general_queries"].unsqueeze(1) & i["mask"]  # (B, N)
    return score_preservation(i["student"], i["ref_scores"], selected)


# The forms of the term by config name (``distill.pres_form``); each reads its inputs by name.
FORMS: dict[str, Callable[[dict], torch.Tensor]] = {"vectors": _vectors, "scores": _scores}
