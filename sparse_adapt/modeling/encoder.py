"""SPLADE encoder over any Hugging Face masked-LM checkpoint.

A text becomes a vector over the vocabulary:

    w_t = max_{i : mask_i = 1} log(1 + relu(logit_{i,t}))

where ``logit_{i,t}`` is the MLM head's score of token ``t`` at position ``i``.
Special tokens ([CLS], [SEP], [PAD], [MASK], [UNK]) are never part of a vector: with
tied decoders they fire in every text and carry no meaning, so a match on them would
add the same constant to every score and make diagnostics misleading.

The exclusion is baked into the weights (:data:`EXCLUDED_BIAS` on those decoder-bias
rows), not only applied by our own code: every SPLADE implementation that loads a saved
directory (sentence-transformers' ``SparseEncoder``, Pyserini, naver/splade, an ONNX
export) computes ``log(1 + relu(.))`` of the same logits and so drops them too.
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path
from typing import Literal, Sequence

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn
from transformers import AutoModelForMaskedLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from sparse_adapt.atomic import atomic_directory
from sparse_adapt.destination import empty_or_model_directory
from sparse_adapt.device import resolve_device
from sparse_adapt.errors import ModelLoadError, OutputError, SparseAdaptWarning, first_line
from sparse_adapt.modeling import pooling
from sparse_adapt.modeling.batching import encode_texts
from sparse_adapt.modeling.base import OFFLINE_MINILM, eval_mode, require_finite_weights
from sparse_adapt.modeling.builtin import BUILTIN_BASES, builtin_hint
from sparse_adapt.modeling.heads import head_support, max_pieces
from sparse_adapt.modeling.hub import (
    check_model_directory, model_directory, model_reference, quiet_transformers, warn_unused_weights,
)
from sparse_adapt.modeling.interop import (
    sentence_transformers_lengths, sentence_transformers_mismatch, write_sentence_transformers_files,
)
from sparse_adapt.modeling.saved import keep_beside
from sparse_adapt.modeling.settings import SETTINGS_FILE, SpladeSettings
from sparse_adapt.modeling.tokenization import check_head_fits
from sparse_adapt.modeling.vectors import VectorMethods
from sparse_adapt.progress import Hooks

__all__ = ["OFFLINE_MINILM", "ModelLoadError", "SETTINGS_FILE", "SpladeEncoder", "SpladeSettings", "Kind"]

# Decoder bias of excluded rows (special tokens, head rows beyond the tokenizer). Logits of
# trained encoders are within a few tens, so h . W_t - 1e4 is below 0 for any text: relu
# makes the weight 0 and passes no gradient, softmax gives the row exactly 0 probability in
# float32 (so no MLM gradient either), and biases get no weight decay (training/loop.py).
# Finite on purpose: -1e4 fits float16 and bfloat16, and -inf would turn 0 * inf into NaN.
EXCLUDED_BIAS = -1.0e4


class PositionLimitWarning(SparseAdaptWarning):
    """The saved query or document length is longer than the model has positions for."""


class SpecialTokensNotExcludedWarning(UserWarning):
    """The MLM head has no decoder bias: other SPLADE implementations will keep special tokens."""

Kind = Literal["query", "document"]


def _from_bad_json(e: BaseException) -> bool:
    """Whether ``e`` was raised while decoding a file that is not JSON (or not UTF-8)."""
    for _ in range(8):  # a loader's chain is short; a cycle must not loop
        if isinstance(e, (json.JSONDecodeError, UnicodeDecodeError)):
            return True
        if (e := e.__cause__ or e.__context__) is None:
            return False
    return False


class SpladeEncoder(VectorMethods, nn.Module):
    """A masked-LM + tokenizer + settings, producing SPLADE vectors."""

    def __init__(self, mlm: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, settings: SpladeSettings | None = None):
        super().__init__()
        self.mlm = mlm
        self.tokenizer = tokenizer
        # Padding goes on the right: no position ids are passed, so on the left it shifted the
        # absolute positions of a BERT's text by its batch's longest (a vector then depended
        # on the texts it was encoded with). SPLADE's pooling reads the mask, whatever the side.
        # Set on the tokenizer itself, which the model owns from here on like ``mlm``: the saved
        # tokenizer then pads on the right in sentence-transformers and transformers too.
        if getattr(tokenizer, "padding_side", "right") == "left":
            tokenizer.padding_side = "right"
        # A copy: lengths are cut to this model's positions, which must not change a caller's object.
        self.settings = copy.deepcopy(settings) if settings is not None else SpladeSettings()
        # What from_pretrained loaded (a folder's absolute path, or a built-in or Hub name); None for
        # a model built in memory. An export names it: settings.base names the base it came from.
        self.source: str | None = None
        rows = self.mlm.get_output_embeddings().weight.shape[0]
        if rows < len(tokenizer):
            raise ModelLoadError(f"the MLM head has {rows} rows but the tokenizer has {len(tokenizer)} tokens")
        self._fit_lengths()
        self.refresh_vocabulary()

    def _fit_lengths(self) -> None:
        """Cut the query and document lengths to the model's position embeddings.

        A longer window would index past them (an IndexError deep in the model at the first
        long text). A default length is lowered quietly: it was never a choice; a saved one,
        with a warning.
        """
        limit = max_pieces(self.mlm)
        if limit is None:
            return
        for name in ("query_max_length", "doc_max_length"):
            value = getattr(self.settings, name)
            if value > limit and value != SpladeSettings.__dataclass_fields__[name].default:
                warnings.warn(
                    f"{name} {value} is more than the {limit} pieces {type(self.mlm).__name__} has positions for; "
                    f"using {limit}", PositionLimitWarning, stacklevel=3,
                )
            setattr(self.settings, name, min(value, limit))

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_pretrained(
        cls, name_or_path: str | Path, *, trust_remote_code: bool = False, device: str | torch.device | None = None
    ) -> "SpladeEncoder":
        """Load a built-in base (``offline-minilm``, ``offline-splade-tiny``), a local directory or
        a hub id (safetensors only).

        ``device`` None: the process default (``sparse_adapt.device``; CUDA when present).
        """
        if not isinstance(name_or_path, (str, Path)):  # None was looked up on the Hub as 'None'
            raise TypeError(f"name_or_path must be a str or Path, got {type(name_or_path).__name__}")
        target = resolve_device(device)  # a typo'd or absent device fails before the weights are read
        name = str(name_or_path)
        if name in BUILTIN_BASES:  # offline-minilm, offline-splade-tiny (modeling/builtin.py)
            mlm, tokenizer = BUILTIN_BASES[name].load()
            enc = cls(mlm, tokenizer, SpladeSettings(base=name))
        else:
            path = model_directory(name, trust_remote_code, hint=builtin_hint(name))
            check_model_directory(path, name, trust_remote_code)
            mismatch = sentence_transformers_mismatch(path, name)
            if mismatch:
                raise ModelLoadError(f"{name} is a sentence-transformers model that sparse-adapt would encode "
                                     f"differently: {mismatch}")
            settings = SpladeSettings.load(path)
            try:
                tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
                with quiet_transformers():
                    mlm, loading = AutoModelForMaskedLM.from_pretrained(
                        path, trust_remote_code=trust_remote_code, use_safetensors=True, output_loading_info=True,
                        dtype=torch.float32)
            except Exception as e:  # the files are here: whatever the loaders raise is their fault
                first = first_line(e).rstrip(".")
                # a safetensors header, JSON, a tokenizer.json key; transformers wraps a config.json
                # that is not JSON in an OSError, whose advice below would not apply
                if not isinstance(e, (OSError, ValueError)) or _from_bad_json(e):
                    raise ModelLoadError(f"cannot load {name!r}: a file of it is damaged or edited by hand "
                                         f"({type(e).__name__}: {first})") from None
                raise ModelLoadError(
                    f"cannot load {name!r} as a masked-LM with safetensors weights: {first}. "
                    f"For an encoder without an MLM head run `sparse-adapt base --from-encoder {name}`."
                ) from None
            # transformers 5 starts weights the checkpoint lacks at random and goes on: an encoder
            # saved without its MLM head encoded 29,500 random terms, different on every load.
            missing = sorted(loading.get("missing_keys") or [])
            if missing:
                raise ModelLoadError(
                    f"{name} has no weights for {len(missing)} tensors of a masked-LM ({', '.join(missing[:3])}"
                    f"{', ...' if len(missing) > 3 else ''}), which would start at random. For an encoder without "
                    f"an MLM head run `sparse-adapt base --from-encoder {name}`.")
            warn_unused_weights(name, loading.get("unexpected_keys"))
            require_finite_weights(mlm, name)
            settings.check_token_ids(path, len(tokenizer))
            check_head_fits(mlm.get_output_embeddings().weight.shape[0], tokenizer, name)
            lengths = None if (path / SETTINGS_FILE).is_file() else sentence_transformers_lengths(path, tokenizer)
            if lengths is not None:  # saved by sentence-transformers: encode as it does
                settings.query_max_length, settings.doc_max_length = lengths
            if not settings.base:
                settings.base = name
            enc = cls(mlm, tokenizer, settings)
        enc.source = model_reference(name)
        enc.eval()
        enc.to(target)
        enc._own_storage()
        return enc

    def _own_storage(self) -> None:
        """Give every parameter storage of its own, allocated by torch.

        Weights read from safetensors may live in buffers of the loader's alignment; CPU
        GEMM kernels pick code paths by alignment, so the same weights could give gradients
        differing in the last bit from a run whose weights torch allocated, and a resumed
        run would then drift from an uninterrupted one.
        """
        with torch.no_grad():
            for p in self.mlm.parameters():
                p.data = p.data.clone()

    def save_pretrained(self, directory: str | Path, overwrite: bool = False, keep_others: bool = True,
                        beside: dict[str, str] | None = None) -> Path:
        """Write HF model + tokenizer + ``sparse_adapt.json`` + sentence-transformers module
        files (those only where the head has a decoder bias: see below); replaces ``directory``
        atomically. An earlier saved model there is replaced, and
        what else it held stays (a model card, ``recommended_training.json``, a user's notes:
        :func:`keep_beside`), unless ``keep_others`` is False (a training run's own directories,
        whose other files describe the model they replace); a file, or a non-empty directory
        holding no model (``config.json``), only with ``overwrite``. ``beside``: name -> text of
        files saved with the model, in the same atomic rename.

        The special-token exclusion is re-applied first (a shared-bias change such as
        ``base.set_bias`` overwrites it in memory), so every saved directory whose head has a
        decoder bias carries it; without one, no sentence-transformers files are written (their
        SparseEncoder would keep the special tokens).
        """
        target = Path(directory)
        if not overwrite and (target.is_file() or (target.is_dir() and not empty_or_model_directory(target))):
            raise OutputError(f"{target} is {'a file' if target.is_file() else 'a directory of other files'}, not a saved "
                              "model; saving would replace it: choose another path or pass overwrite=True")
        baked = self.exclude_special_tokens()
        with atomic_directory(target) as tmp:
            with quiet_transformers():
                self.mlm.save_pretrained(tmp)
            self.save_tokenizer(tmp)
            self.settings.save(tmp)
            if baked:  # without the baked exclusion SparseEncoder would give different vectors
                rows = self.mlm.get_output_embeddings().weight.shape[0]
                write_sentence_transformers_files(tmp, self.settings.query_max_length, self.settings.doc_max_length, rows)
            if keep_others:
                keep_beside(target, tmp)
            for name, text in (beside or {}).items():
                (tmp / name).write_text(text, encoding="utf-8")
        return target

    def save_tokenizer(self, directory: str | Path) -> None:
        """The tokenizer's files without the truncation and padding of its last call: transformers
        sets them on the fast backend per call, and ``tokenizer.json`` would keep them for
        readers that apply them (the ``tokenizers`` library in Rust, JS, Java pipelines)."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is not None:
            backend.no_truncation()
            backend.no_padding()
        self.tokenizer.save_pretrained(directory)

    # ------------------------------------------------------------------ vocabulary
    @property
    def device(self) -> torch.device:
        return next(self.mlm.parameters()).device

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    @property
    def domain_token_ids(self) -> list[int]:
        return list(self.settings.domain_token_ids)

    def id_to_token(self) -> list[str]:
        """Token string of every id; added tokens as written (e.g. ``gatrocraptic``)."""
        # Rebuilding it took 13 ms at 30k ids on every decode; tokens are only ever added,
        # so the vocabulary size says whether the cached list is still the tokenizer's.
        cached = getattr(self, "_id_to_token", None)
        if cached is None or len(cached) != self.vocab_size:
            cached = self.tokenizer.convert_ids_to_tokens(list(range(self.vocab_size)))
            self._id_to_token = cached
        return list(cached)

    def refresh_vocabulary(self) -> None:
        """Rebuild the (V,) 0/1 mask of ids allowed in vectors and bake it into the decoder
        bias (after vocabulary changes)."""
        mask = torch.ones(self.vocab_size)
        mask[self.excluded_ids()] = 0.0
        self.register_buffer("output_mask", mask.to(self._bias_device()), persistent=False)
        self.exclude_special_tokens()

    def excluded_ids(self) -> list[int]:
        """Token ids that never enter a vector: the tokenizer's special tokens."""
        return sorted(i for i in set(self.tokenizer.all_special_ids) if i < self.vocab_size)

    def _bias_device(self) -> torch.device:
        return self.mlm.get_output_embeddings().weight.device

    def exclude_special_tokens(self) -> bool:
        """Set the decoder bias of special tokens (and of head rows past the tokenizer) to
        :data:`EXCLUDED_BIAS`; False, with a warning, when the head has no decoder bias."""
        out = self.mlm.get_output_embeddings()
        bias = getattr(out, "bias", None)
        if bias is None:
            warnings.warn(
                f"{type(self.mlm).__name__} has no decoder bias: special tokens are excluded by sparse-adapt "
                "only, other SPLADE implementations (sentence-transformers, ONNX) will include them",
                SpecialTokensNotExcludedWarning, stacklevel=2,
            )
            return False
        with torch.no_grad():
            bias[self.excluded_ids()] = EXCLUDED_BIAS
            bias[self.vocab_size :] = EXCLUDED_BIAS
        return True

    # ------------------------------------------------------------------ encoding
    def max_length(self, kind: Kind) -> int:
        if kind == "query":
            return self.settings.query_max_length
        if kind == "document":
            return self.settings.doc_max_length
        raise ValueError(f"kind must be 'query' or 'document', got {kind!r}")

    def tokenize(self, texts: Sequence[str], kind: Kind) -> dict[str, torch.Tensor]:
        batch = self.tokenizer(
            list(texts), padding=True, padding_side="right", truncation=True, max_length=self.max_length(kind),
            return_tensors="pt",
        )
        return {k: v.to(self.device) for k, v in batch.items() if k in ("input_ids", "attention_mask")}

    def logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """MLM logits (B, L, V) restricted to the tokenizer's vocabulary."""
        out = self.mlm(input_ids=input_ids, attention_mask=attention_mask).logits
        return out[..., : self.vocab_size]

    def max_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, V) max over non-padding positions of each token's MLM logit (special tokens included).

        Families in the head registry (``heads.py``) run chunked (``pooling.py``): the
        (B, L, V) logits never exist, in training either. Other families use the full
        logits, with a ``FullLogitsWarning`` naming the reason.
        """
        support = head_support(self.mlm)
        if support.parts is None:
            pooling.warn_full_logits(support.reason)
            return pooling.masked_max(self.logits(input_ids, attention_mask), attention_mask)  # (B, V)
        return pooling.chunked_max_logits(support.parts, input_ids, attention_mask, self.vocab_size)  # (B, V)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Differentiable SPLADE weights (B, V) with special tokens zeroed."""
        return pooling.activate(self.max_logits(input_ids, attention_mask)) * self.output_mask

    @torch.inference_mode()
    def encode(
        self,
        texts: Sequence[str],
        kind: Kind = "document",
        batch_size: int = 32,
        progress: Hooks | None = None,
        max_active_dims: int | None = None,
    ) -> sp.csr_matrix:
        """Encode texts to a (len(texts), V) float32 CSR matrix in input order; one string is one
        text (one row), not a sequence of characters.

        Texts are batched by token length (longest first, within windows of
        ``batching.SORT_WINDOW_BATCHES`` batches), so a batch pads to about its own length.
        ``max_active_dims``: keep only each row's that many largest weights
        (:func:`~sparse_adapt.modeling.vectors.keep_top`); None keeps every active term.
        """
        max_length = self.max_length(kind)

        def weigh(input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:  # (B, L), (B, L) -> (B, V)
            ids, mask = torch.from_numpy(input_ids).to(self.device), torch.from_numpy(attention_mask).to(self.device)
            return self(ids, mask).float().cpu().numpy()

        with eval_mode(self):
            return encode_texts(texts, kind=kind, tokenizer=self.tokenizer, max_length=max_length,
                                vocab_size=self.vocab_size, weigh=weigh, batch_size=batch_size, progress=progress,
                                max_active_dims=max_active_dims)
