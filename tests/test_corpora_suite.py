"""Data checks of the benchmark suite in corpora/ (no models): every domain in
``corpora.SPLITS`` has the files, sizes, distractor share, consistent judgements and query
groups that corpora/README.md promises.

Each check is a function returning a list of problems, so the last tests can feed it a
corrupted copy of a domain and see it complain.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

import corpora

SUITE = [name for members in corpora.SPLITS.values() for name in members]
TRAIN_GROUPS = ("control", "domain-semantic", "domain-explicit")
HELDOUT_GROUPS = ("heldout-domain-semantic", "heldout-domain-explicit", "heldout-control")


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _qrels(path: Path) -> list[tuple[str, str, str, int]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            qid, it, doc_id, g = line.split()
            rows.append((qid, it, doc_id, int(g)))
    return rows


def load(name: str) -> dict:
    files = corpora.get(name)
    return {
        "name": name,
        "docs": _jsonl(files.docs),
        "kinds": json.loads((files.docs.parent / "doc_kinds.json").read_text(encoding="utf-8")),
        "queries": _jsonl(files.queries),
        "qrels": _qrels(files.qrels),
        "train": _jsonl(files.train),
        "terms": json.loads(files.terms.read_text(encoding="utf-8")),
        "dictionary": _jsonl(files.dictionary),
        "heldout": _jsonl(files.heldout_queries),
        "heldout_qrels": _qrels(files.heldout_qrels),
        "groups": json.loads(files.query_groups.read_text(encoding="utf-8")),
    }


@pytest.fixture(scope="module", params=SUITE)
def domain(request) -> dict:
    return load(request.param)


def _grade(score: float) -> int:
    return 2 if score >= 8 else (1 if score > 0 else 0)


def _terms(d: dict) -> list[str]:
    return [t for items in d["terms"].values() for t in items]


def _term_pattern(term: str) -> re.Pattern:
    return re.compile(r"(?<![\w-])" + re.escape(term.lower()) + r"(?![\w-])")


def _names_a_term(d: dict, text: str) -> list[str]:
    return [t for t in _terms(d) if _term_pattern(t).search(text.lower())]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


# --- checks: each returns a list of problems --------------------------------------------


def check_docs(d: dict) -> list[str]:
    ids = [r["doc_id"] for r in d["docs"]]
    out = []
    if len(ids) < 30:
        out.append(f"only {len(ids)} documents")
    if len(set(ids)) != len(ids):
        out.append("duplicate doc ids")
    out += [f"{r['doc_id']}: empty text" for r in d["docs"] if not r["text"].strip()]
    return out


def check_doc_kinds(d: dict) -> list[str]:
    ids = [r["doc_id"] for r in d["docs"]]
    dom, dis = d["kinds"].get("domain", []), d["kinds"].get("distractor", [])
    out = []
    if set(d["kinds"]) != {"domain", "distractor"}:
        out.append(f"doc_kinds keys {sorted(d['kinds'])}")
    if sorted(dom + dis) != sorted(ids):
        out.append("doc_kinds does not cover every document exactly once")
    if not dom:
        out.append("no domain documents")
    if len(dis) < 0.4 * len(ids):
        out.append(f"distractor share {len(dis)}/{len(ids)} < 40%")
    return out


def check_train(d: dict) -> list[str]:
    texts = {r["doc_id"]: r["text"] for r in d["docs"]}
    out = []
    if len(d["train"]) < 8:
        out.append(f"only {len(d['train'])} training queries")
    for ex in d["train"]:
        q = ex["qid"]
        if not (len(ex["doc_ids"]) == len(ex["doc_texts"]) == len(ex["teacher_scores"])):
            out.append(f"{q}: list lengths differ")
            continue
        if len(set(ex["doc_ids"])) != len(ex["doc_ids"]):
            out.append(f"{q}: duplicate candidates")
        for doc_id, text in zip(ex["doc_ids"], ex["doc_texts"]):
            if texts.get(doc_id) != text:
                out.append(f"{q}: text of {doc_id} differs from docs.jsonl")
        scores = ex["teacher_scores"]
        if not any(s > 0 for s in scores) or not any(s <= 0 for s in scores):
            out.append(f"{q}: needs a positive and a negative candidate")
    return out


def check_queries_equal_train(d: dict) -> list[str]:
    train = [(ex["qid"], ex["query"]) for ex in d["train"]]
    queries = [(q["qid"], q["text"]) for q in d["queries"]]
    return [] if train == queries else ["queries.jsonl differs from the training queries"]


def check_qrels_rule(d: dict) -> list[str]:
    expected = {(ex["qid"], doc_id, _grade(s)) for ex in d["train"] for doc_id, s in zip(ex["doc_ids"], ex["teacher_scores"])}
    got = {(q, doc_id, g) for q, _, doc_id, g in d["qrels"]}
    out = []
    if len(got) != len(d["qrels"]):
        out.append("duplicate qrels lines")
    if got != expected:
        out.append(f"qrels.tsv differs from the score rule: {sorted(got ^ expected)[:4]}")
    out += [f"{q} {doc_id}: iteration column {it!r}" for q, it, doc_id, _ in d["qrels"] if it != "0"]
    return out


def check_heldout_qrels(d: dict) -> list[str]:
    doc_ids = {r["doc_id"] for r in d["docs"]}
    qids = [q["qid"] for q in d["heldout"]]
    out = []
    if len(set(qids)) != len(qids):
        out.append("duplicate held-out qids")
    for q, it, doc_id, g in d["heldout_qrels"]:
        if q not in qids:
            out.append(f"heldout qrels: unknown qid {q}")
        if doc_id not in doc_ids:
            out.append(f"heldout qrels {q}: unknown doc {doc_id}")
        if g not in (0, 1, 2) or it != "0":
            out.append(f"heldout qrels {q} {doc_id}: bad line")
    relevant = {q for q, _, _, g in d["heldout_qrels"] if g >= 1}
    out += [f"{q}: no relevant document" for q in qids if q not in relevant]
    return out


def check_groups(d: dict) -> list[str]:
    g = d["groups"]
    out = []
    if set(g) != set(TRAIN_GROUPS + HELDOUT_GROUPS):
        out.append(f"groups {sorted(g)}")
        return out
    train_ids = [ex["qid"] for ex in d["train"]]
    heldout_ids = [q["qid"] for q in d["heldout"]]
    in_train = [q for k in TRAIN_GROUPS for q in g[k]]
    in_heldout = [q for k in HELDOUT_GROUPS for q in g[k]]
    if sorted(in_train) != sorted(train_ids):
        out.append("training groups do not cover exactly the training queries")
    if sorted(in_heldout) != sorted(heldout_ids):
        out.append("held-out groups do not cover exactly the held-out queries")
    out += [f"empty training group {k}" for k in TRAIN_GROUPS if not g[k]]
    out += [f"{k}: {len(g[k])} < 5 queries" for k in HELDOUT_GROUPS if len(g[k]) < 5]
    if set(train_ids) & set(heldout_ids):
        out.append("a qid is both training and held-out")
    return out


def check_heldout_not_trained(d: dict) -> list[str]:
    train = {_norm(ex["query"]) for ex in d["train"]}
    return [f"{q['qid']}: same text as a training query" for q in d["heldout"] if _norm(q["text"]) in train]


def check_terms(d: dict) -> list[str]:
    texts = {r["doc_id"]: r["text"].lower() for r in d["docs"]}
    dom, dis = d["kinds"]["domain"], d["kinds"]["distractor"]
    covered = " | ".join([e["term"] for e in d["dictionary"]] + [x for e in d["dictionary"] for x in e["examples"]]).lower()
    out = []
    if not 5 <= len(_terms(d)) <= 12:
        out.append(f"{len(_terms(d))} terms")
    for t in _terms(d):
        p = _term_pattern(t)
        if not any(p.search(texts[i]) for i in dom):
            out.append(f"term {t!r} is in no domain document")
        if any(p.search(texts[i]) for i in dis):
            out.append(f"term {t!r} is in a distractor")
        if not p.search(covered):
            out.append(f"term {t!r} has no dictionary entry")
    return out


def check_query_kinds(d: dict) -> list[str]:
    """Semantic queries and controls name no term, explicit ones do; relevant documents
    are domain documents for domain queries and distractors for controls."""
    dom, dis = set(d["kinds"]["domain"]), set(d["kinds"]["distractor"])
    text = {q["qid"]: q["text"] for q in d["heldout"]} | {ex["qid"]: ex["query"] for ex in d["train"]}
    rel: dict[str, set[str]] = {}
    for q, _, doc_id, g in d["heldout_qrels"] + d["qrels"]:
        if g >= 1:
            rel.setdefault(q, set()).add(doc_id)
    out = []
    for group, qids in d["groups"].items():
        explicit = group.endswith("domain-explicit")
        wanted = dis if group.endswith("control") else dom
        for q in qids:
            named = _names_a_term(d, text[q])
            if explicit and not named:
                out.append(f"{q} ({group}) names no domain term")
            if not explicit and named:
                out.append(f"{q} ({group}) names {named}")
            if not rel.get(q, set()) <= wanted:
                out.append(f"{q} ({group}): relevant {sorted(rel[q] - wanted)} of the wrong kind")
    return out


CHECKS = [
    check_docs, check_doc_kinds, check_train, check_queries_equal_train, check_qrels_rule,
    check_heldout_qrels, check_groups, check_heldout_not_trained, check_terms, check_query_kinds,
]


# --- tests -------------------------------------------------------------------------------


def test_splits_are_disjoint_non_empty_and_registered():
    dev, test = corpora.SPLITS["dev"], corpora.SPLITS["test"]
    assert set(corpora.SPLITS) == {"dev", "test"}
    assert dev and test
    assert not set(dev) & set(test)
    assert "gatrocraptic" not in dev + test
    for name in dev + test:
        assert name in corpora.names()
    assert [corpora.split(n) for n in dev] == ["dev"] * len(dev)
    assert [corpora.split(n) for n in test] == ["test"] * len(test)
    with pytest.raises(KeyError):
        corpora.split("gatrocraptic")


def test_ids_never_clash_across_domains():
    seen: dict[str, str] = {}
    for name in SUITE + ["gatrocraptic"]:
        files = corpora.get(name)
        ids = [r["doc_id"] for r in _jsonl(files.docs)]
        ids += [q["qid"] for q in _jsonl(files.queries)] + [q["qid"] for q in _jsonl(files.heldout_queries)]
        for i in ids:
            assert seen.setdefault(i, name) == name, f"id {i} in {seen[i]} and {name}"


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_domain(domain, check):
    assert check(domain) == []


def _first_domain() -> dict:
    return load(SUITE[0])


def test_checks_catch_broken_data():
    d = _first_domain()

    broken = copy.deepcopy(d)
    broken["train"][0]["doc_texts"][0] += " changed"
    assert check_train(broken)

    broken = copy.deepcopy(d)
    q, it, doc_id, g = broken["qrels"][0]
    broken["qrels"][0] = (q, it, doc_id, 1 if g != 1 else 2)
    assert check_qrels_rule(broken)

    broken = copy.deepcopy(d)
    drop = broken["heldout"][0]["qid"]
    broken["heldout_qrels"] = [r for r in broken["heldout_qrels"] if r[0] != drop]
    assert check_heldout_qrels(broken)

    broken = copy.deepcopy(d)
    broken["kinds"]["domain"] += broken["kinds"]["distractor"]
    broken["kinds"]["distractor"] = []
    assert check_doc_kinds(broken)

    broken = copy.deepcopy(d)
    broken["heldout"][0]["text"] = broken["train"][0]["query"].upper()
    assert check_heldout_not_trained(broken)

    broken = copy.deepcopy(d)
    broken["groups"]["heldout-control"] = broken["groups"]["heldout-control"][:-1]
    assert check_groups(broken)

    broken = copy.deepcopy(d)
    semantic = broken["groups"]["heldout-domain-semantic"][0]
    for q in broken["heldout"]:
        if q["qid"] == semantic:
            q["text"] += " " + _terms(broken)[0]
    assert check_query_kinds(broken)

    broken = copy.deepcopy(d)
    broken["terms"]["extra"] = ["Nonexistentium"]
    assert check_terms(broken)

    broken = copy.deepcopy(d)
    broken["docs"] = broken["docs"][:20]
    assert check_docs(broken)


OUTSIDE = Path(__file__).resolve().parents[1] / "bench" / "outside"
# An outside domain has no hand-written inputs (it is measured from its documents alone); its
# terms, as its README names them, are given here for the query-kind check.
OUTSIDE_TERMS = {"fibre": ["Krallion", "ONX-4410", "QPRT", "Vessomark", "brennic", "Tarrowin"]}


@pytest.mark.parametrize("name", sorted(OUTSIDE_TERMS))
def test_outside_domain_data_and_loading(name):
    from sparse_adapt.report.domains import EvalSet, resolve_domain

    root = OUTSIDE / name
    assert name not in corpora.names()  # measured only: never registered, in no split
    d = {
        "name": name, "docs": _jsonl(root / "docs.jsonl"), "kinds": json.loads((root / "doc_kinds.json").read_text()),
        "queries": _jsonl(root / "queries.jsonl"), "qrels": _qrels(root / "qrels.tsv"),
        "heldout": _jsonl(root / "heldout_queries.jsonl"), "heldout_qrels": _qrels(root / "heldout_qrels.tsv"),
        "groups": json.loads((root / "query_groups.json").read_text()), "terms": {"all": OUTSIDE_TERMS[name]},
        "train": [{"qid": q["qid"], "query": q["text"]} for q in _jsonl(root / "queries.jsonl")],
    }
    problems = [p for check in (check_docs, check_doc_kinds, check_heldout_qrels, check_query_kinds) for p in check(d)]
    assert problems == []
    ev = EvalSet.load(resolve_domain(str(root), hand_written=False).files)
    assert {k: len(v) for k, v in ev.groups.items() if k.startswith("heldout")} == {
        "heldout-domain-semantic": 15, "heldout-domain-explicit": 8, "heldout-control": 12}


def test_the_desalination_walkthrough_domain_loads_and_every_query_is_judged_and_grouped():
    """bench/outside/desalination: a new user's files, read by the loaders a run reads them with."""
    from sparse_adapt.data import load_documents, load_qrels, load_queries

    root = OUTSIDE / "desalination"
    assert "desalination" not in corpora.names()
    docs = {d.doc_id for d in load_documents(root / "docs.jsonl")}
    queries = {q.qid for q in load_queries(root / "queries.jsonl")}
    qrels = load_qrels(root / "qrels.tsv")
    groups = json.loads((root / "query_groups.json").read_text())
    assert len(docs) == 52 and len(queries) == 11
    assert set(qrels) == queries and all(set(judged) <= docs and max(judged.values()) > 0 for judged in qrels.values())
    assert sorted(q for qids in groups.values() for q in qids) == sorted(queries)
