"""Bundled data sets, in the style of ir_datasets: named records and a registry.

``get("gatrocraptic")`` returns the file paths of the spec's corpus;
``create_dataset(name, root, ...)`` registers a user's local files under a new name
and refuses names that are already taken.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent


class CorpusFiles(NamedTuple):
    name: str
    docs: Path
    queries: Path
    qrels: Path
    train: Path | None = None
    terms: Path | None = None
    dictionary: Path | None = None
    heldout_queries: Path | None = None
    heldout_qrels: Path | None = None
    query_groups: Path | None = None


_REGISTRY: dict[str, CorpusFiles] = {}


def create_dataset(name: str, root: str | Path, **files: str | Path | None) -> CorpusFiles:
    """Register a data set from local files (paths relative to ``root``); names are unique."""
    if name in _REGISTRY:
        raise ValueError(f"a data set named {name!r} is already registered")
    base = Path(root)
    resolved = {k: (None if v is None else base / v) for k, v in files.items()}
    missing = [str(p) for p in resolved.values() if p is not None and not p.is_file()]
    if missing:
        raise FileNotFoundError(f"data set {name!r}: missing files: {', '.join(missing)}")
    corpus = CorpusFiles(name=name, **resolved)
    _REGISTRY[name] = corpus
    return corpus


def get(name: str) -> CorpusFiles:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown data set {name!r}; registered: {', '.join(sorted(_REGISTRY))}") from None


def names() -> list[str]:
    return sorted(_REGISTRY)


def _standard(name: str) -> CorpusFiles:
    """A bundled data set in the standard layout: ``corpora/<name>/`` with the usual file names
    (the suite domains also carry ``doc_kinds.json``: domain vs distractor documents)."""
    return create_dataset(
        name,
        ROOT / name,
        docs="docs.jsonl",
        queries="queries.jsonl",
        qrels="qrels.tsv",
        train="train.jsonl",
        terms="domain_terms.json",
        dictionary="dictionary.jsonl",
        heldout_queries="heldout_queries.jsonl",
        heldout_qrels="heldout_qrels.tsv",
        query_groups="query_groups.json",
    )


GATROCRAPTIC = _standard("gatrocraptic")

# The benchmark suite (corpora/README.md): fabricated domains of different kinds.
PHARMA = _standard("pharma")
HARDWARE = _standard("hardware")
LEGAL = _standard("legal")
ECOLOGY = _standard("ecology")
SOFTWARE = _standard("software")
MARITIME = _standard("maritime")
INSURANCE = _standard("insurance")
FORESTRY = _standard("forestry")
AIRCRAFT = _standard("aircraft")
PAYMENTS = _standard("payments")
HVAC = _standard("hvac")

# Defaults and methods are chosen on dev domains only; test domains are only measured.
# The bundled gatrocraptic corpus belongs to neither split.
SPLITS: dict[str, list[str]] = {
    "dev": ["pharma", "hardware", "software", "insurance", "forestry", "aircraft", "payments"],
    "test": ["legal", "ecology", "maritime", "hvac"],
}
# What `sparse-adapt benchmark` measures by default: the test domains and the bundled corpus.
MEASURED: tuple[str, ...] = (*SPLITS["test"], "gatrocraptic")


def split(name: str) -> str:
    """``"dev"`` or ``"test"`` for a suite domain; KeyError for any other data set."""
    for which, members in SPLITS.items():
        if name in members:
            return which
    raise KeyError(f"{name!r} is in no split; dev: {', '.join(SPLITS['dev'])}; test: {', '.join(SPLITS['test'])}")
