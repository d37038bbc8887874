"""What sparse-adapt stores beside the Hugging Face files of a model: ``sparse_adapt.json``.

The file is hand-editable, so loading checks every field's type and range and names the
field of a bad one (one line through :class:`~sparse_adapt.errors.ModelLoadError`) instead of
failing later, deep in tokenization, on the first query.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sparse_adapt.errors import ModelLoadError

SETTINGS_FILE = "sparse_adapt.json"


@dataclass
class SpladeSettings:
    """What sparse-adapt stores beside the Hugging Face files (``sparse_adapt.json``)."""

    # Queries are short; 64 pieces keeps long questions whole while bounding cost.
    query_max_length: int = 64
    # 256 pieces covers a passage of ~180 words, the usual SPLADE document window.
    doc_max_length: int = 256
    # Token ids of the user's domain terms: excluded from FLOPS, targeted by the hinge.
    domain_token_ids: list[int] = field(default_factory=list)
    # Normalised term -> category from domain_terms.json.
    domain_terms: dict[str, str] = field(default_factory=dict)
    # Where the weights came from, for humans reading the directory.
    base: str = ""
    # The model as it was before its first domain token was added (extend-vocab, train's extend
    # stage), as records name a model: the reference a later `train --base THIS` compares with,
    # since this model's own head already fires its domain tokens. "" when unknown or never extended.
    extended_from: str = ""

    @classmethod
    def load(cls, directory: Path) -> "SpladeSettings":
        path = Path(directory) / SETTINGS_FILE
        if not path.is_file():
            return cls()
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, RecursionError) as e:  # also a 5000-digit number, 10^5-deep nesting
            raise ModelLoadError(f"{path}: not valid JSON ({type(e).__name__}: {str(e)[:120]})") from None
        if not isinstance(raw, dict):
            raise ModelLoadError(f"{path}: expected a JSON object of settings, got {type(raw).__name__}")
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(raw) - known
        if unknown:
            raise ModelLoadError(f"{path}: unknown settings {sorted(unknown, key=str)}")
        for name in ("query_max_length", "doc_max_length"):
            value = raw.get(name, 1)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ModelLoadError(f"{path}: field {name!r}: expected a positive integer, got {value!r}")
        ids = raw.get("domain_token_ids", [])
        if not isinstance(ids, list) or any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ids):
            raise ModelLoadError(f"{path}: field 'domain_token_ids': expected a list of token ids (integers >= 0)")
        terms = raw.get("domain_terms", {})
        if not isinstance(terms, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in terms.items()):
            raise ModelLoadError(f"{path}: field 'domain_terms': expected an object of term -> category (strings)")
        for name in ("base", "extended_from"):
            if not isinstance(raw.get(name, ""), str):
                raise ModelLoadError(f"{path}: field {name!r}: expected a string, got {raw[name]!r}")
        return cls(**raw)

    def check_token_ids(self, directory: Path, vocabulary: int) -> None:
        """Every domain token id names a token of the model's ``vocabulary``, once: an id beyond
        it loaded and then failed deep in training (a token without a string)."""
        path = Path(directory) / SETTINGS_FILE
        beyond = [i for i in self.domain_token_ids if i >= vocabulary]
        if beyond:
            raise ModelLoadError(f"{path}: field 'domain_token_ids': {beyond[0]} is beyond the tokenizer's "
                                 f"{vocabulary} tokens")
        if len(set(self.domain_token_ids)) != len(self.domain_token_ids):
            raise ModelLoadError(f"{path}: field 'domain_token_ids': an id is listed twice")

    def save(self, directory: Path) -> None:
        (Path(directory) / SETTINGS_FILE).write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")
