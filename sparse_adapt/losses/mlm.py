"""Masked-LM cross-entropy, the objective of the warmup and dictionary stages.

    L_mlm = - mean_{i : label_i != -100} log softmax(h_i W^T + c)_{label_i}

(Devlin et al., 2019, "BERT", section 3.1). For families in the head registry the
vocabulary projection runs on the target positions only: computing the (L, V) logits of
every position costs ~1/0.15 = 7x the head work of the targets alone, and with a 30k
vocabulary the head dominates a small encoder's step.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedModel

from sparse_adapt.modeling.heads import head_support


def mlm_loss(mlm: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Masked-LM cross-entropy over the positions with ``labels != -100``; (B, L) inputs.

    Same value as ``mlm(..., labels=labels).loss``; unregistered families use that forward.
    """
    parts = head_support(mlm).parts
    if parts is None:
        return mlm(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
    hidden = parts.backbone(input_ids=input_ids, attention_mask=attention_mask)[0]  # (B, L, H)
    targets = labels != -100  # (B, L)
    logits = parts.logits(hidden[targets])  # (T, V)
    return nn.functional.cross_entropy(logits, labels[targets])
