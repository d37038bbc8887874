"""Bundled defaults: which bundled file stands in for an input the user did not give.

The commands whose corpus is optional (``diagnose``, ``explain``, ``inspect``, ``base``'s
calibration, ``report``) work on a fresh install with the bundled Gatrocraptic corpus;
``train`` and ``tune`` require their inputs. The rule,
for every command alike: a missing **documents** file means the bundled corpus; a missing
companion file (queries, qrels, terms, dictionary, train, held-out queries, groups) means
the bundled one **only when the documents are the bundled ones**, so a user's corpus is
never checked against Gatrocraptic queries by accident. Inputs whose command needs them
whatever the corpus (training's terms, dictionary, train file) use :func:`bundled`.
"""

from __future__ import annotations

from pathlib import Path

from corpora import GATROCRAPTIC, CorpusFiles

BUNDLED: CorpusFiles = GATROCRAPTIC


def docs_or_bundled(docs: str | Path | None) -> Path:
    """``docs``, or the bundled corpus's documents."""
    return Path(docs) if docs is not None else BUNDLED.docs


def is_bundled(docs: str | Path) -> bool:
    return Path(docs).resolve() == BUNDLED.docs.resolve()


def companion(docs: str | Path, given: str | Path | None, field: str) -> Path | None:
    """``given``, else the bundled file ``field`` when ``docs`` is the bundled corpus, else None."""
    if given is not None:
        return Path(given)
    return getattr(BUNDLED, field) if is_bundled(docs) else None


def bundled(given: str | Path | None, field: str) -> Path:
    """``given``, else the bundled file ``field`` (whatever the documents are)."""
    return Path(given) if given is not None else getattr(BUNDLED, field)
