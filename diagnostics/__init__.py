"""Diagnostics for SPLADE models: why a domain term gets (no) weight, why a query
retrieves what it retrieves, and how sparse a model is on a corpus.

Computation returns plain dataclasses (``.to_dict()`` is the ``--json`` output, schemas in
``diagnostics.schema``); ``diagnostics.render`` draws them with rich. Python callers get
the same numbers the CLI prints::

    from diagnostics import diagnose_term, explain_query, inspect_corpus
    report = diagnose_term(splade, "Gatrocraptic", docs, terms=terms, queries=queries)
"""

from diagnostics.explain import QueryExplanation, explain_query
from diagnostics.recommend import Recommendation, Sources
from diagnostics.sparsity import CorpusStats, inspect_corpus
from diagnostics.term import TermDiagnosis, diagnose_term

__all__ = [
    "CorpusStats",
    "QueryExplanation",
    "Recommendation",
    "Sources",
    "TermDiagnosis",
    "diagnose_term",
    "explain_query",
    "inspect_corpus",
]
