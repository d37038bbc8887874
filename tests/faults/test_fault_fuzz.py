"""Property-based fuzzing of every loader of ``sparse_adapt/data`` and of the config
loader: whatever the bytes, the result is a clear error (a ``SparseAdaptError`` naming
the file) or records that are valid, never a traceback from somewhere inside."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparse_adapt import data
from sparse_adapt.errors import SparseAdaptError
from sparse_adapt.training.config import TrainConfig
from sparse_adapt.training.config_files import load_config

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """Where each example's file is written (module-scoped: hypothesis reruns a test many times)."""
    return tmp_path_factory.mktemp("fuzz")


# JSON values as they come out of real files: NaN, huge and tiny numbers, nesting, odd text.
scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=10**300, max_value=10**400)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
           | st.sampled_from(["", " ", "\ud800", "\u200b", "[CLS]", "a b", "\u65e5\u672c"]))
values = st.recursive(scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids,
                                                                                         max_size=4), max_leaves=12)


def _text_field(value: str) -> None:
    assert isinstance(value, str) and value.strip()
    value.encode("utf-8")  # no lone surrogate reaches a tokenizer


def _check_document(d) -> None:
    _text_field(d.doc_id), _text_field(d.text)


def _check_query(q) -> None:
    _text_field(q.qid), _text_field(q.text)


def _check_train(t) -> None:
    for s in (t.qid, t.query, *t.doc_ids, *t.doc_texts):
        _text_field(s)
    assert len(t.doc_ids) == len(t.doc_texts) == len(t.teacher_scores) >= 2
    assert all(isinstance(x, float) and math.isfinite(x) for x in t.teacher_scores)


def _check_entry(e) -> None:
    for s in (e.term, e.definition, *e.examples):
        _text_field(s)


def _check_qrels(out) -> None:
    assert out and all(isinstance(g, int) and not isinstance(g, bool) for d in out.values() for g in d.values())


def _check_terms(out) -> None:
    assert any(out.values())
    for terms in out.values():
        for t in terms:
            _text_field(t)
            assert not any(c.isspace() for c in t)


def _check_groups(out) -> None:
    assert isinstance(out, dict) and all(isinstance(q, str) for qs in out.values() for q in qs)


LOADERS = {
    "documents": (data.load_documents, lambda out: [_check_document(d) for d in out]),
    "iter_documents": (lambda p: list(data.iter_documents(p)), lambda out: [_check_document(d) for d in out]),
    "queries": (data.load_queries, lambda out: [_check_query(q) for q in out]),
    "train": (data.load_train, lambda out: [_check_train(t) for t in out]),
    "dictionary": (data.load_dictionary, lambda out: [_check_entry(e) for e in out]),
    "qrels": (data.load_qrels, lambda out: _check_qrels(out)),
    "domain terms": (data.load_domain_terms, lambda out: _check_terms(out)),
    "query groups": (data.load_query_groups, lambda out: _check_groups(out)),
    "documents tsv": (data.load_documents, lambda out: [_check_document(d) for d in out]),
    "iter_documents tsv": (lambda p: list(data.iter_documents(p)), lambda out: [_check_document(d) for d in out]),
    "queries tsv": (data.load_queries, lambda out: [_check_query(q) for q in out]),
}

# Lines that are almost right: the fields each loader wants, with values drawn from ``values``.
FIELDS = {
    "documents": ["doc_id", "text"], "iter_documents": ["doc_id", "text"], "queries": ["qid", "text"],
    "train": ["qid", "query", "doc_ids", "doc_texts", "teacher_scores"], "dictionary": ["term", "definition", "examples"],
}


def _load(work: Path, kind: str, raw: bytes):
    loader, check = LOADERS[kind]
    # the name chooses the format of documents and queries: 'x.tsv' is read as TSV
    path = work / (f"{kind.split()[0]}.tsv" if kind.endswith(" tsv") else f"{kind.replace(' ', '_')}.input")
    path.write_bytes(raw)
    try:
        out = loader(path)
    except SparseAdaptError as e:
        assert str(path) in str(e)
        return
    check(out)


@pytest.mark.parametrize("kind", sorted(LOADERS))
@SETTINGS
@given(raw=st.binary(max_size=400))
def test_any_bytes(work, kind, raw):
    _load(work, kind, raw)


@pytest.mark.parametrize("kind", sorted(LOADERS))
@SETTINGS
@given(lines=st.lists(values, max_size=4), bom=st.booleans(), crlf=st.booleans())
def test_any_json_lines(work, kind, lines, bom, crlf):
    text = ("\r\n" if crlf else "\n").join(json.dumps(v, ensure_ascii=bool(bom)) for v in lines)
    _load(work, kind, (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("kind", sorted(FIELDS))
@SETTINGS
@given(data_=st.data())
def test_records_with_the_right_fields_and_any_values(work, kind, data_):
    rows = data_.draw(st.lists(st.fixed_dictionaries({f: values for f in FIELDS[kind]}), min_size=1, max_size=3))
    _load(work, kind, "\n".join(json.dumps(r) for r in rows).encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("kind", ["domain terms", "query groups"])
@SETTINGS
@given(obj=st.dictionaries(st.text(max_size=6), values, max_size=4))
def test_objects_of_lists(work, kind, obj):
    _load(work, kind, json.dumps(obj).encode("utf-8", "surrogatepass"))


@SETTINGS
@given(lines=st.lists(st.tuples(values, values, values, values), max_size=4))
def test_qrels_of_any_columns(work, lines):
    _load(work, "qrels", "\n".join(" ".join(json.dumps(c) for c in row) for row in lines).encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("kind", ["documents tsv", "iter_documents tsv", "queries tsv"])
@SETTINGS
@given(rows=st.lists(st.lists(st.text(max_size=8) | st.sampled_from(["", " ", "\u200b", "\r"]), max_size=4), max_size=4),
       bom=st.booleans(), crlf=st.booleans())
def test_tsv_lines_of_any_cells(work, kind, rows, bom, crlf):
    text = ("\r\n" if crlf else "\n").join("\t".join(cells) for cells in rows)
    _load(work, kind, (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", "surrogatepass"))


CONFIG_KEYS = {
    section: list(getattr(TrainConfig(), section).__dataclass_fields__) for section in ("warmup", "dictionary", "distill")
}


def _load_config(work: Path, name: str, raw: bytes) -> None:
    path = work / name
    path.write_bytes(raw)
    try:
        cfg = load_config(path)
    except SparseAdaptError as e:
        assert str(path) in str(e)
        return
    cfg.validate()
    for section in CONFIG_KEYS:
        for key, value in vars(getattr(cfg, section)).items():
            assert not isinstance(value, float) or math.isfinite(value), (section, key, value)


@SETTINGS
@given(raw=st.binary(max_size=300), toml=st.booleans())
def test_config_any_bytes(work, raw, toml):
    _load_config(work, "c.toml" if toml else "c.json", raw)


@SETTINGS
@given(data_=st.data())
def test_config_known_keys_with_any_values(work, data_):
    section = data_.draw(st.sampled_from(sorted(CONFIG_KEYS)))
    keys = data_.draw(st.lists(st.sampled_from(CONFIG_KEYS[section]), min_size=1, max_size=4, unique=True))
    obj = {section: {k: data_.draw(values) for k in keys}}
    _load_config(work, "c.json", json.dumps(obj).encode("utf-8", "surrogatepass"))
