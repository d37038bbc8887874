"""Train only the domain tokens' rows: ``train_rows = "domain"`` in a stage's config.

Within :func:`domain_rows_only` every parameter of the model is frozen except the rows of
the domain token ids ``D`` in the three tensors that hold a token's identity: the input
embedding matrix (V, H), the MLM decoder weight (V, H) and the decoder bias (V,). A
gradient hook zeroes the gradient of every other row, so Adam's moments of those rows stay
zero and their update is exactly zero; the stages train with ``weight_decay = 0``
(:func:`stage_weight_decay`) because AdamW's decoupled decay would otherwise shrink the
frozen rows too.

Why: a base that already is a trained SPLADE model (``offline-splade-tiny``) keeps its
retrieval behaviour exactly for every text whose vector does not involve a domain token;
what the stage learns is where the new tokens fire (their decoder rows: a linear read-out
of the frozen contextual states) and what they mean as input (their embedding rows). The
base's general vocabulary cannot be forgotten, only outvoted by a domain weight.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Iterator, Sequence

import torch
from torch import nn

from sparse_adapt.errors import ConfigError

ROWS = ("all", "domain")  # the values of a stage's ``train_rows``


def _row_tensors(mlm: nn.Module) -> list[torch.Tensor]:
    """The distinct tensors indexed by vocabulary id (tied embeddings count once)."""
    out: dict[int, torch.Tensor] = {}
    emb = mlm.get_input_embeddings()
    dec = mlm.get_output_embeddings()
    for t in (emb.weight, getattr(dec, "weight", None), getattr(dec, "bias", None)):
        if t is not None:
            out.setdefault(id(t), t)
    return list(out.values())


@contextmanager
def domain_rows_only(mlm: nn.Module, domain_ids: Sequence[int]) -> Iterator[None]:
    """Freeze ``mlm`` except the rows ``domain_ids`` of its vocabulary tensors (restored on exit)."""
    if not len(domain_ids):
        raise ConfigError("train_rows = \"domain\" needs domain tokens, and this model has none (run the extend stage)")
    saved = [(p, p.requires_grad) for p in mlm.parameters()]
    hooks = []
    try:
        for p, _ in saved:
            p.requires_grad_(False)
        for t in _row_tensors(mlm):
            keep = torch.zeros(t.shape[0], dtype=t.dtype, device=t.device)  # (V,)
            keep[list(domain_ids)] = 1
            shape = (-1,) + (1,) * (t.ndim - 1)
            t.requires_grad_(True)
            hooks.append(t.register_hook(lambda g, k=keep.view(shape): g * k))
        yield
    finally:
        for h in hooks:
            h.remove()
        for p, flag in saved:
            p.requires_grad_(flag)


def trainable_rows(mlm: nn.Module, train_rows: str, domain_ids: Sequence[int]) -> AbstractContextManager:
    """A stage's ``train_rows``: "all" changes nothing, "domain" is :func:`domain_rows_only`."""
    if train_rows == "domain":
        return domain_rows_only(mlm, domain_ids)
    return nullcontext()


def stage_weight_decay(train_rows: str, weight_decay: float) -> float:
    """The decay a stage trains with: 0 for "domain", as AdamW's decoupled decay would shrink the frozen rows."""
    return 0.0 if train_rows == "domain" else weight_decay
