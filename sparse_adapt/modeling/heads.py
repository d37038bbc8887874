"""The registry of masked-LM head families: the one place that knows model internals.

A SPLADE encoder needs, for each family, how its masked-LM splits into

- the backbone: ``(input_ids, attention_mask) -> last hidden states (B, L, H)``,
- the head transform before the decoder: ``(..., H) -> (..., H)``,
- the decoder: an ``nn.Linear`` with weight ``(V, H)`` and bias ``(V,)``,

so pooling (``pooling.py``) and the MLM loss (``losses/mlm.py``) can run the vocabulary
projection on selected positions only, and, for building a head on a headless encoder
(``base.py``), which LayerNorms and dense layer make up the head.

Adding a family (ELECTRA, say) means adding one :class:`HeadFamily` to :data:`HEADS`.
Lookup walks the class hierarchy, so subclasses of a registered class use its entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn
from transformers import (
    BertForMaskedLM, DistilBertForMaskedLM, ModernBertForMaskedLM, PreTrainedModel, RobertaForMaskedLM,
    XLMRobertaForMaskedLM,
)
from transformers.activations import gelu


@dataclass(frozen=True)
class HeadParts:
    """The pieces of an MLM between the encoder and the vocabulary projection."""

    backbone: nn.Module  # (input_ids, attention_mask) -> last hidden states (B, L, H)
    transform: Callable[[torch.Tensor], torch.Tensor]  # (..., H) -> (..., H)
    decoder: nn.Linear  # weight (V_rows, H), bias (V_rows,) or None

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """(..., H) hidden states -> (..., V_rows) MLM logits."""
        return self.decoder(self.transform(hidden))


@dataclass(frozen=True)
class HeadLayers:
    """The layers ``base.py`` rewrites to give a headless encoder an identity head."""

    last_norm: nn.LayerNorm  # the backbone's last output LayerNorm
    dense: nn.Linear  # the head's dense layer (before its activation)
    head_norm: nn.LayerNorm  # the head's LayerNorm (before the decoder)


def _positions(config) -> int:
    return config.max_position_embeddings


def _roberta_positions(config) -> int:
    # RoBERTa numbers positions from pad_token_id + 1: 514 embeddings hold 512 pieces.
    return config.max_position_embeddings - config.pad_token_id - 1


@dataclass(frozen=True)
class HeadFamily:
    mlm_class: type[PreTrainedModel]
    backbone_attr: str  # attribute of the backbone inside the MLM (``mlm.bert``)
    parts: Callable[[PreTrainedModel], HeadParts]
    # None: no identity head can be built with this family's layers (``base`` refuses it)
    layers: Callable[[PreTrainedModel], HeadLayers] | None
    positions: Callable[..., int] = _positions  # config -> the most pieces one text may have

    @property
    def model_type(self) -> str:
        return self.mlm_class.config_class.model_type

    def backbone(self, mlm: PreTrainedModel) -> nn.Module:
        return getattr(mlm, self.backbone_attr)


def _bert_parts(mlm: BertForMaskedLM) -> HeadParts:
    return HeadParts(mlm.bert, mlm.cls.predictions.transform, mlm.get_output_embeddings())


def _bert_layers(mlm: BertForMaskedLM) -> HeadLayers:
    t = mlm.cls.predictions.transform
    return HeadLayers(mlm.bert.encoder.layer[-1].output.LayerNorm, t.dense, t.LayerNorm)


def _distilbert_parts(mlm: DistilBertForMaskedLM) -> HeadParts:
    def transform(h: torch.Tensor) -> torch.Tensor:
        # The order of DistilBertForMaskedLM.forward.
        return mlm.vocab_layer_norm(mlm.activation(mlm.vocab_transform(h)))

    return HeadParts(mlm.distilbert, transform, mlm.get_output_embeddings())


def _distilbert_layers(mlm: DistilBertForMaskedLM) -> HeadLayers:
    last = mlm.distilbert.transformer.layer[-1].output_layer_norm
    return HeadLayers(last, mlm.vocab_transform, mlm.vocab_layer_norm)


def _roberta_parts(mlm: RobertaForMaskedLM | XLMRobertaForMaskedLM) -> HeadParts:
    head = mlm.lm_head

    def transform(h: torch.Tensor) -> torch.Tensor:
        # The order of RobertaLMHead.forward; its decoder's bias is lm_head.bias (tied).
        return head.layer_norm(gelu(head.dense(h)))

    return HeadParts(mlm.roberta, transform, mlm.get_output_embeddings())


def _roberta_layers(mlm: RobertaForMaskedLM | XLMRobertaForMaskedLM) -> HeadLayers:
    return HeadLayers(mlm.roberta.encoder.layer[-1].output.LayerNorm, mlm.lm_head.dense, mlm.lm_head.layer_norm)


def _modernbert_parts(mlm: ModernBertForMaskedLM) -> HeadParts:
    return HeadParts(mlm.model, mlm.head, mlm.get_output_embeddings())


HEADS: dict[type[PreTrainedModel], HeadFamily] = {
    BertForMaskedLM: HeadFamily(BertForMaskedLM, "bert", _bert_parts, _bert_layers),
    DistilBertForMaskedLM: HeadFamily(DistilBertForMaskedLM, "distilbert", _distilbert_parts, _distilbert_layers),
    # Byte-level BPE (ibm-granite/granite-embedding-30m-sparse is a RobertaForMaskedLM) and
    # SentencePiece (XLM-RoBERTa, the usual multilingual backbone): one head, two tokenizers.
    RobertaForMaskedLM: HeadFamily(RobertaForMaskedLM, "roberta", _roberta_parts, _roberta_layers, _roberta_positions),
    XLMRobertaForMaskedLM: HeadFamily(XLMRobertaForMaskedLM, "roberta", _roberta_parts, _roberta_layers, _roberta_positions),
    # Rotary positions, byte-level BPE. Its head's dense layer and LayerNorms have no bias by
    # default, which the identity head of ``base.py`` needs: only trained masked-LMs are taken.
    ModernBertForMaskedLM: HeadFamily(ModernBertForMaskedLM, "model", _modernbert_parts, None),
}


def family_of(mlm: PreTrainedModel) -> HeadFamily | None:
    """The registered family of ``mlm`` (its class or a base class), or None."""
    for cls in type(mlm).__mro__:
        if cls in HEADS:
            return HEADS[cls]
    return None


def family_for_model_type(model_type: str) -> HeadFamily | None:
    """The registered family whose config ``model_type`` is ``model_type`` (``"bert"``)."""
    for family in HEADS.values():
        if family.model_type == model_type:
            return family
    return None


def max_pieces(mlm: PreTrainedModel) -> int | None:
    """The longest input ``mlm`` has position embeddings for; None when it has no such bound."""
    family = family_of(mlm)
    if family is not None:
        return family.positions(mlm.config)
    # An unregistered family (Electra, ALBERT, CamemBERT ...) loads too: its 128 positions had
    # been left at the default 256-piece document length, and a long text raised a traceback.
    n = getattr(mlm.config, "max_position_embeddings", None)
    if not isinstance(n, int) or isinstance(n, bool):
        return None
    table = next((m for name, m in mlm.named_modules() if name.endswith("position_embeddings")), None)
    if table is None:  # relative or rotary positions only (DeBERTa-v3): no table to index past
        return None
    # RoBERTa-style embeddings number positions from padding_idx + 1 (514 rows hold 512 pieces);
    # I-BERT's quantised table keeps the attribute too.
    padding = getattr(table, "padding_idx", None)
    return n - padding - 1 if isinstance(padding, int) else n


def known_families() -> str:
    return ", ".join(c.__name__ for c in HEADS)


@dataclass(frozen=True)
class HeadSupport:
    parts: HeadParts | None
    reason: str  # why the full logits are used; "" when the head can run on selected rows


def head_support(mlm: PreTrainedModel) -> HeadSupport:
    """The split of ``mlm``, or why it has to go through the model's full forward."""
    family = family_of(mlm)
    if family is None:
        return HeadSupport(
            None,
            f"{type(mlm).__name__} has no entry in sparse_adapt.modeling.heads.HEADS (known: {known_families()}); "
            "it is encoded with the full (batch x length x vocabulary) logits, which costs more memory and time",
        )
    parts = family.parts(mlm)
    if not isinstance(parts.decoder, nn.Linear):
        return HeadSupport(None, f"{type(mlm).__name__}'s output embeddings are not an nn.Linear")
    return HeadSupport(parts, "")
