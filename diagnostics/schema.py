"""The stable ``--json`` schemas of ``diagnose``, ``explain`` and ``inspect``.

Each output carries its schema id in ``"schema"``. A shape is a dict of key -> shape
(exactly these keys), ``[shape]`` for a list of items, a type (or tuple of types) for a
leaf, and ``Nullable(shape)`` for a value that may be ``null``. ``validate`` checks an
object against a shape; the tests run it on real outputs, so changing a dataclass
without changing (and versioning) the shape here fails the suite. The README documents
the same trees.
"""

from __future__ import annotations

from typing import Any, NamedTuple

DIAGNOSE_SCHEMA = "sparse-adapt.diagnose/6"
EXPLAIN_SCHEMA = "sparse-adapt.explain/4"
INSPECT_SCHEMA = "sparse-adapt.inspect/2"

NUM = (int, float)


class Nullable(NamedTuple):
    shape: Any


_RECOMMENDATION = {"id": str, "finding": str, "action": str, "commands": [str]}

DIAGNOSE = {
    "schema": str,
    "term": str,
    "model": str,
    "vocabulary": {
        "term": str,
        "normalized": str,
        "token_ids": [int],
        "pieces": [str],
        "decoded": [str],
        "single_token": bool,
        "in_vocabulary": bool,
        "base_pieces": Nullable([str]),
        "added_token": bool,
        "domain_token": bool,
        "terms_file": Nullable(str),
        "in_terms_file": bool,
        "categories": [str],
        "model_category": Nullable(str),
    },
    "document": {
        "source": str,
        "doc_id": Nullable(str),
        "text": str,
        "num_tokens": int,
        "term_spans": [[int]],
        "docs_searched": int,
        "docs_containing": [str],
        "docs_beyond_window": [str],
    },
    "targets": [
        {
            "token_id": int,
            "token": str,
            "logits": {
                "positions": [{"position": int, "token": str, "logit": NUM, "occurrence": bool}],
                "occurrences": [int],
                "min_logit": NUM,
                "max_logit": NUM,
                "max_position": int,
                "occurrence_min": Nullable(NUM),
                "occurrence_max": Nullable(NUM),
                "occurrence_mean": Nullable(NUM),
                "verdict": str,
            },
            "weight": {
                "max_logit": NUM,
                "max_position": int,
                "after_relu": NUM,
                "after_log1p": NUM,
                "special_token": bool,
                "expected": NUM,
                "actual": NUM,
                "abs_diff": NUM,
                "tolerance": NUM,
                "matches": bool,
            },
            "ranking": {
                "weight": NUM,
                "rank": Nullable(int),
                "nonzero": int,
                "top": [
                    {"rank": int, "token": str, "token_id": int, "weight": NUM, "in_text": bool, "target": bool,
                     "piece_of": Nullable(str)}
                ],
            },
            "query_expansion": Nullable(
                {
                    "queries": int,
                    "without_term": int,
                    "expanding": [{"qid": str, "text": str, "weight": NUM}],
                    "with_term": int,
                    "with_term_active": int,
                    "with_term_qids": [str],
                    "feedback": Nullable(
                        {"docs": int, "weight": NUM, "terms": int,
                         "expanding": [{"qid": str, "text": str, "weight": NUM}]}
                    ),
                }
            ),
        }
    ],
    "checks": [{"name": str, "status": str, "expected": str, "actual": str, "target": Nullable(str),
                "reason": Nullable(str)}],
    "recommendations": [_RECOMMENDATION],
    "warnings": [str],
}

_WEIGHTED = {"token": str, "token_id": int, "weight": NUM, "in_text": bool, "piece_of": Nullable(str)}

EXPLAIN = {
    "schema": str,
    "model": str,
    "documents_scored": int,
    "k": int,
    "query": {
        "text": str,
        "nonzero": int,
        "max_weight": NUM,
        "sparsity": NUM,
        "vocab_size": int,
        "expansion_count": int,
        "piece_count": int,
        "tokens": [_WEIGHTED],
        "feedback": Nullable({
            "docs": int, "weight": NUM, "terms": int, "fed_back": [str],
            "added": [{"token": str, "token_id": int, "added": NUM, "new": bool}],
        }),
    },
    "results": [
        {
            "rank": int,
            "doc_id": str,
            "text": str,
            "score": NUM,
            "contributions_sum": NUM,
            "nonzero": int,
            "shared": [
                {"token": str, "token_id": int, "query_weight": NUM, "doc_weight": NUM, "contribution": NUM}
            ],
            "top_tokens": [_WEIGHTED],
        }
    ],
    "warnings": [str],
}

_TEXT_STATS = {
    "count": int,
    "nonzero": {"mean": NUM, "median": NUM, "min": int, "max": int},
    "sparsity_mean": NUM,
}

INSPECT = {
    "schema": str,
    "model": str,
    "vocab_size": int,
    "documents": _TEXT_STATS,
    "queries": Nullable(_TEXT_STATS),
    "flops": Nullable({"definition": str, "value": NUM, "value_excluding_domain": NUM, "regularizer": NUM}),
    "domain": {
        "count": int,
        "source": str,
        "mean_weight_occurring": Nullable(NUM),
        "mean_weight_not_occurring": Nullable(NUM),
        "tokens": [
            {
                "token": str,
                "token_id": int,
                "docs_occurring": int,
                "mean_weight_occurring": Nullable(NUM),
                "docs_not_occurring": int,
                "mean_weight_not_occurring": Nullable(NUM),
                "activated_without_occurrence": int,
            }
        ],
    },
    "warnings": [str],
    "feedback": Nullable({"docs": int, "weight": NUM, "terms": int, "queries": _TEXT_STATS, "flops": NUM}),
}

SHAPES = {DIAGNOSE_SCHEMA: DIAGNOSE, EXPLAIN_SCHEMA: EXPLAIN, INSPECT_SCHEMA: INSPECT}


class SchemaError(ValueError):
    pass


def validate(obj: Any, shape: Any = None, path: str = "$") -> None:
    """Raise SchemaError at the first place ``obj`` differs from ``shape``.

    Without ``shape`` the one named by ``obj["schema"]`` is used.
    """
    if shape is None:
        shape = SHAPES[obj["schema"]]
    if isinstance(shape, Nullable):
        if obj is not None:
            validate(obj, shape.shape, path)
        return
    if isinstance(shape, dict):
        if not isinstance(obj, dict):
            raise SchemaError(f"{path}: expected an object, got {type(obj).__name__}")
        if set(obj) != set(shape):
            raise SchemaError(f"{path}: keys differ: missing {sorted(set(shape) - set(obj))}, extra {sorted(set(obj) - set(shape))}")
        for key, sub in shape.items():
            validate(obj[key], sub, f"{path}.{key}")
        return
    if isinstance(shape, list):
        if not isinstance(obj, list):
            raise SchemaError(f"{path}: expected a list, got {type(obj).__name__}")
        for i, item in enumerate(obj):
            validate(item, shape[0], f"{path}[{i}]")
        return
    types = shape if isinstance(shape, tuple) else (shape,)
    # bool is an int subclass: a flag where a number belongs (or vice versa) is a schema change.
    if isinstance(obj, bool) != (bool in types) or not isinstance(obj, types):
        raise SchemaError(f"{path}: expected {'/'.join(t.__name__ for t in types)}, got {type(obj).__name__}")
