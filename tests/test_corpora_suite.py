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


# --- the corpora READMEs say what the files hold ------------------------------------------
# The counts, ranges and lists in corpora/README.md and the domain READMEs are written by hand
# when a domain is added; these tests recompute them from the files, so that a README that
# drifts from its data (or data changed under its README) fails here.

def _joined_readme(path: Path) -> str:
    """The README with its hard line breaks joined, so a phrase reflowed over two lines still matches."""
    return " ".join(path.read_text(encoding="utf-8").split())


def _doc_sentences(text: str) -> int:
    # a stop followed by a capital or a digit ends a sentence; the "O." of an abbreviated genus does not
    text = re.sub(r"\b[A-Z]\.(?= [a-z])", "", text)
    return len(re.split(r"(?<=[.!?])\s+(?=[A-Z0-9])", text.strip()))


def _expand_id_span(first: str, last: str) -> list[str]:
    prefix = re.match(r"\D*", first)[0]
    return [f"{prefix}{i}" for i in range(int(first[len(prefix):]), int(last[len(prefix):]) + 1)]


def _heldout_group_sizes(d: dict) -> list[int]:
    return [len(d["groups"].get(k, [])) for k in HELDOUT_GROUPS]


def test_sentence_count_splits_on_stops_but_not_on_an_abbreviated_genus():
    assert _doc_sentences("One; still one.") == 1
    assert _doc_sentences("First one. Second one, 24 V. 3 more.") == 3
    assert _doc_sentences("O. lucidula shells clog screens.") == 1


def test_suite_readme_domain_table_matches_the_files():
    text = (corpora.ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Domains\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| `")]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    assert sorted(cells[0].strip("`") for cells in rows) == sorted(SUITE)
    mix = re.search(r"Each domain's (\d+) training queries are (\d+) controls \([^)]*\), (\d+) domain-semantic\s+and "
                    r"(\d+) domain-explicit", section)
    for cells in rows:
        name = cells[0].strip("`")
        d = load(name)
        assert [int(x) for x in mix.groups()] == [len(d["train"]), *(len(d["groups"][k]) for k in TRAIN_GROUPS)], name
        n_docs, n_dis = len(d["docs"]), len(d["kinds"]["distractor"])
        expected = [corpora.split(name), str(n_docs), f"{n_dis} ({round(100 * n_dis / n_docs)}%)", str(len(_terms(d))),
                    str(len(d["train"])), " / ".join(map(str, _heldout_group_sizes(d)))]
        assert [cells[1], *cells[3:7], cells[7].replace("**", "")] == expected, name


def test_suite_readme_file_table_matches_the_files():
    text = (corpora.ROOT / "README.md").read_text(encoding="utf-8")
    docs_row = next(line for line in text.splitlines() if line.startswith("| `docs.jsonl` |"))
    domains = [load(name) for name in SUITE]
    counts = [_doc_sentences(r["text"]) for d in domains for r in d["docs"]]
    m = re.search(r"(\d+)-(\d+) sentences per document", docs_row)
    assert (int(m[1]), int(m[2])) == (min(counts), max(counts))
    prefixes = {name: {re.match(r"[a-z]+", r["doc_id"])[0] for r in d["docs"]} for name, d in zip(SUITE, domains)}
    assert all(len(p) == 1 for p in prefixes.values()), prefixes
    listed = re.findall(r"`(\w+)`", re.search(r"domain prefix \(([^)]*)\)", docs_row)[1])
    assert sorted(listed) == sorted(p for ps in prefixes.values() for p in ps)

    train_row = next(line for line in text.splitlines() if line.startswith("| `train.jsonl` |"))
    m = re.search(r"positives ([\d.]+)-([\d.]+), hard negatives (-?[\d.]+); the bundled corpus's go down to ([\d.]+)",
                  train_row)
    scores = [s for d in domains for ex in d["train"] for s in ex["teacher_scores"]]
    bundled = [s for ex in _jsonl(corpora.get("gatrocraptic").train) for s in ex["teacher_scores"]]
    positives = [s for s in scores if s > 0]
    assert (float(m[1]), float(m[2])) == (min(positives), max(positives))
    assert {float(m[3])} == {s for s in scores if s <= 0}
    assert float(m[4]) == min(s for s in bundled if s > 0)


def test_suite_readme_splits_block_is_corpora_splits():
    import ast

    text = (corpora.ROOT / "README.md").read_text(encoding="utf-8")
    assert ast.literal_eval(re.search(r"corpora\.SPLITS == (\{.*\})", text)[1]) == corpora.SPLITS


def test_gatrocraptic_readme_counts_and_id_ranges_match_the_files():
    files = corpora.get("gatrocraptic")
    docs, groups = _jsonl(files.docs), json.loads(files.query_groups.read_text(encoding="utf-8"))
    train, heldout = _jsonl(files.train), _jsonl(files.heldout_queries)
    text = _joined_readme(files.docs.parent / "README.md")
    m = re.search(r"(\d+) technical documents, (\w+) of which \((\w+)-(\w+)\) use the made-up domain term", text)
    naming = [r["doc_id"] for r in docs if "gatrocraptic" in r["text"].lower()]
    assert (int(m[1]), _number(m[2]), _expand_id_span(m[3], m[4])) == (len(docs), len(naming), naming)
    assert int(re.search(r"\| `docs.jsonl` \| (\d+) documents", text)[1]) == len(docs)
    m = re.search(r"\| `queries.jsonl` \| (\d+) queries, `qid`, `text`: (\w+)-(\w+) control, (\w+) domain-semantic "
                  r"\(no term\), (\w+)-(\w+) domain-explicit", text)
    assert int(m[1]) == len(_jsonl(files.queries)) == len(train)
    assert [_expand_id_span(m[2], m[3]), [m[4]], _expand_id_span(m[5], m[6])] == [groups[k] for k in TRAIN_GROUPS]
    assert int(re.search(r"\| `train.jsonl` \| (\d+) teacher-scored candidate lists", text)[1]) == len(train)
    m = re.search(r"(\d+) queries written for this project and never trained on: (\w+)-(\w+) describe the domain "
                  r"without naming the term, (\w+)-(\w+) are controls \((\w+) targets (\w+),", text)
    assert int(m[1]) == len(heldout)
    said = [_expand_id_span(m[2], m[3]), _expand_id_span(m[4], m[5])]
    assert said == [groups["heldout-domain-semantic"], groups["heldout-control"]]
    targets = {doc_id for q, _, doc_id, g in _qrels(files.heldout_qrels) if q == m[6] and g > 0}
    assert targets == {m[7]}
    scores = [s for ex in train for s in ex["teacher_scores"]]
    m = re.search(r"positives ([\d.]+)-([\d.]+), negatives (-?[\d.]+)\)", text)
    assert (float(m[1]), float(m[2]), {float(m[3])}) == (min(s for s in scores if s > 0), max(scores),
                                                          {s for s in scores if s <= 0})


# --- what the domain READMEs say, computed from the files (fifty-sixth session) ------------
# Their counts, ranges and lists were written by hand and drifted (sentence counts, score ranges
# copied from gatrocraptic). Every suite README's numbers are checked; the query spread and the
# tokenizer splits are read with patterns written for these six READMEs' wording (aircraft's
# "Skelbrin limit" answers a "Skelbrin check" query, forestry's "S. piceovorax" its full name).
DOMAIN_README_NAMES = SUITE
SPREAD_README_NAMES = ["insurance", "legal", "maritime", "payments", "pharma", "software"]
REPO_ROOT = OUTSIDE.parents[1]


def _domain_readme(name: str) -> str:
    return (corpora.get(name).docs.parent / "README.md").read_text(encoding="utf-8")


def _readme_problems(name: str, text: str) -> list[str]:
    """Each hand-written number of a domain README against the domain's files."""
    d = load(name)
    n_docs, out = len(d["docs"]), []

    def need(pattern: str) -> re.Match | None:
        m = re.search(pattern, text)
        if not m:
            out.append(f"no sentence matches {pattern!r}")
        return m

    if m := need(r"\*\*Split: (\w+)\.\*\*"):
        if m[1] != corpora.split(name):
            out.append(f"split {m[1]} != {corpora.split(name)}")
    if m := need(r"(\d+) documents \(`docs\.jsonl`\), (?:one sentence|(\d+)-(\d+) sentences) each"):
        counts = [_doc_sentences(r["text"]) for r in d["docs"]]
        said = (1, 1) if m[2] is None else (int(m[2]), int(m[3]))
        if int(m[1]) != n_docs or said != (min(counts), max(counts)):
            out.append(f"documents: said {m[0]!r}; {n_docs} with {min(counts)}-{max(counts)} sentences")
    for kind in ("domain", "distractor"):
        if m := need(rf"\*\*{kind}\*\* ([a-z]+)(\d+)-[a-z]+(\d+)\s+\((\d+), (\d+)%\)"):
            ids = d["kinds"][kind]
            share = round(100 * len(ids) / n_docs)
            if ids != _expand_id_span(m[1] + m[2], m[1] + m[3]) or int(m[4]) != len(ids) or int(m[5]) != share:
                out.append(f"{kind}: said {m[0]!r}; {ids[0]}-{ids[-1]} ({len(ids)}, {100 * len(ids) / n_docs:.1f}%)")
    sizes = {k: len(v) for k, v in d["groups"].items()}
    if m := need(r"(\d+) teacher-scored candidate lists \((\d+) control, (\d+) domain-semantic, "
                 r"(\d+) domain-explicit\): "
                 r"relevant candidates ([\d.]+)-([\d.]+) graded by relevance, hard negatives (-?[\d.]+)"):
        scores = [s for ex in d["train"] for s in ex["teacher_scores"]]
        got = (len(d["train"]), *(sizes[k] for k in TRAIN_GROUPS), min(s for s in scores if s > 0),
               max(scores), *sorted({s for s in scores if s <= 0}))
        if tuple(float(x) for x in m.groups()) != tuple(float(x) for x in got):
            out.append(f"train.jsonl: said {m.groups()}; {got}")
        # "distractors sharing words for domain queries": a domain document among their negatives is named
        row = text[m.start():].split("\n")[0]
        domain_qids = d["groups"]["domain-semantic"] + d["groups"]["domain-explicit"]
        out += [f"{ex['qid']}: a domain document is a hard negative" for ex in d["train"] if ex["qid"] in domain_qids
                and any(s <= 0 and i in d["kinds"]["domain"] for i, s in zip(ex["doc_ids"], ex["teacher_scores"]))
                and f"`{ex['qid']}`" not in row]
    if m := need(r"(\d+) queries never trained on: (\d+) domain-semantic, (\d+) domain-explicit, "
                 r"(\d+) adversarial controls"):
        got = (len(d["heldout"]), *(sizes[k] for k in HELDOUT_GROUPS))
        if tuple(map(int, m.groups())) != got:
            out.append(f"held-out: said {m.groups()}; {got}")
    if m := need(r"(?s)Terms \(`domain_terms\.json`, with the case variants users type\): (.*?)\.?\nDictionary"):
        cats = re.findall(r"(\w+): ([^;]+)", m[1].replace("\n", " "))
        said = {cat: re.findall(r"`([^`]+)`", terms) for cat, terms in cats}
        if said != d["terms"]:
            out.append(f"terms: said {said}; {d['terms']}")
    if m := need(r"Dictionary entries \(`dictionary\.jsonl`\): (.*)\.\n"):
        if m[1].split(", ") != [e["term"] for e in d["dictionary"]]:
            out.append(f"dictionary: said {m[1]!r}")
    return out


def _query_spread_problems(name: str, text: str) -> list[str]:
    """"in-h1-h4 Pellingrove rider", "in-h20 on i15": the held-out queries a README assigns to a term
    (or a document) are answered (grade 2) by documents that name it (or by that document)."""
    d = load(name)
    docs = {r["doc_id"]: r["text"].lower() for r in d["docs"]}
    answers: dict[str, set[str]] = {}
    for q, _, doc_id, g in d["heldout_qrels"]:
        if g == 2:
            answers.setdefault(q, set()).add(doc_id)
    out = []
    for m in re.finditer(r"\b([a-z]{2}-h)(\d+)(?:-h(\d+))?\s+(?:on\s+([a-z]+\d+)|([^,;()]+))", text):
        qids = _expand_id_span(m[1] + m[2], m[1] + (m[3] or m[2]))
        if m[4]:
            out += [f"{q}: {m[4]} does not answer it" for q in qids if m[4] not in answers.get(q, set())]
            continue
        named = [e["term"] for e in d["dictionary"] if e["term"].lower() in " ".join(m[5].lower().split())]
        if not named:
            out.append(f"{m[0]!r} names no dictionary term")
        for q in qids:
            texts = " ".join(docs[i] for i in answers.get(q, set()))
            out += [f"{q}: no answer names {t}" for t in named if t.lower() not in texts]
    how = text[text.index("How the queries were written"):].split("\n\n")[0]
    queries = {_norm(q["text"]) for q in d["heldout"]} | {_norm(ex["query"]) for ex in d["train"]}
    out += [f"quoted {q!r} is no query" for q in re.findall(r'"([^"]+)"', how) if _norm(q) not in queries]
    semantic = " ".join(_norm(q["text"]) for q in d["heldout"] + d["queries"]
                        if q["qid"] in d["groups"]["domain-semantic"] + d["groups"]["heldout-domain-semantic"])
    for m in re.finditer(r"Some\s+use [^(]*\(([^)]*)\)", how):
        out += [f"no domain-semantic query uses {w!r}" for w in re.findall(r"\*([^*]+)\*", m[1])
                if not re.search(rf"\b{re.escape(w)}\b", semantic)]
    return out


@pytest.mark.parametrize("name", DOMAIN_README_NAMES)
def test_domain_readme_numbers_are_the_files(name):
    assert _readme_problems(name, _domain_readme(name)) == []


@pytest.mark.parametrize("name", SPREAD_README_NAMES)
def test_domain_readme_query_spread_is_the_qrels(name):
    assert _query_spread_problems(name, _domain_readme(name)) == []


def test_domain_readme_checks_catch_wrong_numbers():
    text = _domain_readme("insurance")
    for old, new in [("37 documents", "36 documents"), ("1-2 sentences", "1-3 sentences"), ("(15, 41%)", "(15, 40%)"),
                     ("candidates 2-10", "candidates 0.5-10"), ("42 queries never", "21 queries never"),
                     ("`drellick`,\n`Drellick`", "`drellick`,\n`drellicks`"), ("**Split: dev.**", "**Split: test.**")]:
        assert old in text
        assert _readme_problems("insurance", text.replace(old, new, 1)), new
    for old, new in [("in-h6-h10", "in-h6-h11"), ("on i15", "on i14"), ("lowest the deductible", "lowest the excess"),
                     ("(*excess*, *premium*)", "(*excess*, *bond*)")]:
        assert old in text
        assert _query_spread_problems("insurance", text.replace(old, new, 1)), new


def _split_problems(tokenizer, text: str) -> list[str]:
    """`pe ##lling ##rove`: each split a README shows is the tokenizer's, and "into N(-M) pieces" says
    how many pieces those splits have."""
    out, lengths = [], []
    for split in re.findall(r"`([^`\s]+(?: ##[^`\s]+)+)`", text):
        pieces = split.split()
        word = "".join(p.removeprefix("##") for p in pieces)
        got = tokenizer.tokenize(word)
        lengths.append(len(got))
        if got != pieces:
            out.append(f"{word}: said {split!r}, the tokenizer gives {' '.join(got)!r}")
    m = re.search(r"into (\d+)(?:-(\d+))? pieces", text)
    if m and lengths and (int(m[1]), int(m[2] or m[1])) != (min(lengths), max(lengths)):
        out.append(f"said {m[0]!r}; the splits shown have {min(lengths)}-{max(lengths)}")
    return out


def test_domain_readme_tokenizer_splits():
    from sparse_adapt.modeling.builtin import load_tokenizer

    tokenizer = load_tokenizer("offline-splade-tiny")  # bert-base-uncased's; offline-minilm's splits the same
    for name in SPREAD_README_NAMES:
        assert _split_problems(tokenizer, _domain_readme(name)) == [], name
    assert _split_problems(tokenizer, "splits into 3 pieces (`pe ##ll ##ingrove`)")
    assert _split_problems(tokenizer, "splits into 4 pieces (`pe ##lling ##rove`)")


_NUMBER_WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven".split())}


def _number(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBER_WORDS[word.lower()]


def _outside_readme_problems(name: str, text: str) -> list[str]:
    """An outside README's counts, id ranges, groups and citations against its folder and bench/."""
    root = OUTSIDE / name
    docs = {r["doc_id"]: r["text"].lower() for r in _jsonl(root / "docs.jsonl")}
    groups = json.loads((root / "query_groups.json").read_text(encoding="utf-8"))
    kinds_file = root / "doc_kinds.json"
    kinds = json.loads(kinds_file.read_text(encoding="utf-8")) if kinds_file.exists() else {}
    flat = " ".join(text.split())
    out = []
    for m in re.finditer(r"(\d+) documents \(`docs\.jsonl`\)", flat):
        out += [f"said {m[0]!r}; {len(docs)}"] if int(m[1]) != len(docs) else []
    # "`Krallion splice` (a sleeved fusion joint, documents f1-f3)": exactly those documents name it
    for m in re.finditer(r"`([^`]+)` \([^()]*?\b([a-z]+)(\d+)-[a-z]+(\d+)\)", flat):
        naming = sorted((i for i, t in docs.items() if m[1].lower() in t), key=lambda i: int(i[len(m[2]):]))
        if naming != _expand_id_span(m[2] + m[3], m[2] + m[4]):
            out.append(f"{m[1]}: said {m[2]}{m[3]}-{m[4]}; named by {naming}")
    if m := re.search(r"distractors ([a-z]+)(\d+)-[a-z]+(\d+) use the everyday senses of ([^(]+)\(", flat):
        if kinds.get("distractor") != _expand_id_span(m[1] + m[2], m[1] + m[3]):
            out.append(f"said distractors {m[1]}{m[2]}-{m[3]}")
        texts = " ".join(docs[i] for i in kinds.get("distractor", []))
        out += [f"no distractor uses {w!r}" for w in re.split(r", | and ", m[4].strip()) if w not in texts]
    # "Eight made-up terms are used by 38 of them: `Brinevault` (...), ... The other 14 documents"
    if m := re.search(r"(\w+) made-up terms are used by (\d+) of them: (.*?)\. The other (\d+) documents", flat):
        terms = re.findall(r"`([^`]+)`", m[3])
        using = [i for i, t in docs.items() if any(x.lower() in t for x in terms)]
        if (_number(m[1]), int(m[2]), int(m[4])) != (len(terms), len(using), len(docs) - len(using)):
            out.append(f"said {m[1]} terms in {m[2]} documents, {m[4]} others; {len(terms)}, {len(using)}")
    for m in re.finditer(r"\b([a-z]{2}-h)(\d+)-h(\d+) (domain-semantic|domain-explicit|adversarial controls)", flat):
        group = "heldout-" + ("control" if m[4] == "adversarial controls" else m[4])
        if groups.get(group) != _expand_id_span(m[1] + m[2], m[1] + m[3]):
            out.append(f"said {m[0]!r}; {group} is {groups.get(group)}")
    if m := re.search(r"\b([a-z]{2}-q)(\d+)-q(\d+) \((\d+) controls, (\d+) semantic, (\d+) explicit\)", flat):
        said = (_expand_id_span(m[1] + m[2], m[1] + m[3]), int(m[4]), int(m[5]), int(m[6]))
        got = (groups["control"] + groups["domain-semantic"] + groups["domain-explicit"],
               *(len(groups[k]) for k in TRAIN_GROUPS))
        out += [f"said {m[0]!r}; {got}"] if said != got else []
    for m in re.finditer(r"\b(\d+) `(\w+)`", flat):
        out += [f"said {m[0]!r}; {len(groups.get(m[2], []))}"] if int(m[1]) != len(groups.get(m[2], [])) else []
    for m in re.finditer(r"The (\d+) held-out queries", flat):
        n = len(_jsonl(root / "queries.jsonl"))
        out += [f"said {m[0]!r}; {n}"] if int(m[1]) != n else []
    if "no hand-written" in flat:  # measured from its documents alone: no file a user would write by hand
        hand_written = ("domain_terms.json", "dictionary.jsonl", "train.jsonl")
        out += [f"{f} is there" for f in hand_written if (root / f).exists()]
    if "no `doc_kinds.json`" in flat and kinds:
        out.append("doc_kinds.json is there")
    # "`sparse-adapt adapt --corpus docs.jsonl ...`": each option is one the command's function declares
    for command, args in re.findall(r"`(?:sparse-adapt )?(adapt|benchmark) (--[^`]+)`", flat):
        source = (REPO_ROOT / "sparse_adapt" / "cli" / f"{command}.py").read_text(encoding="utf-8")
        body = source[source.index(f"\ndef {command}("):].split("\ndef ")[1]
        out += [f"{command} has no {o}" for o in re.findall(r"--[\w-]+", args) if f'"{o}"' not in body]
    cited = re.findall(r"`(bench/results/[^`]+)`", flat)
    out += [f"{f} does not exist" for f in cited if not (REPO_ROOT / f).is_file()]
    results = (REPO_ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    out += [f"no RESULTS.md section {s!r}" for s in re.findall(r'"(\w+-\w+ session)"', flat)
            if not re.search(rf"^## {s} \(", results, re.M)]
    return out


@pytest.mark.parametrize("name", ["desalination", "fibre"])
def test_outside_readme_numbers_are_the_files(name):
    text = (OUTSIDE / name / "README.md").read_text(encoding="utf-8")
    assert _outside_readme_problems(name, text) == []


def test_outside_readme_checks_catch_wrong_numbers():
    desalination = [("52 documents", "51 documents"), ("by 38 of", "by 37 of"), ("5 `semantic`", "6 `semantic`"),
                    ("1 `control`", "2 `control`"), ("11 held-out", "12 held-out"),
                    ("outside-desalination.json", "outside-desal.json"),
                    ("Forty-second session", "Forty-first session"), ("--groups", "--group")]
    fibre = [("f1-f3", "f1-f4"), ("fb-h16-h23", "fb-h16-h22"), ("(6 controls", "(5 controls"),
             ("router and", "rooter and"), ("--pipeline", "--pipe")]
    for name, old, new in [("desalination", *c) for c in desalination] + [("fibre", *c) for c in fibre]:
        text = (OUTSIDE / name / "README.md").read_text(encoding="utf-8")
        assert old in text
        assert _outside_readme_problems(name, text.replace(old, new, 1)), (name, new)


def _stored_base_scores() -> dict[tuple[str, str], set[tuple[str, ...]]]:
    """(domain, base) -> every (semantic, explicit, control) zero-shot nDCG@10 the stored
    `bench.byoc` rows give, as printed (three decimals)."""
    seen: dict[tuple[str, str], set[tuple[str, ...]]] = {}
    for path in sorted((REPO_ROOT / "bench" / "results").glob("byoc*.json")):
        rows = json.loads(path.read_text(encoding="utf-8"))
        for row in rows if isinstance(rows, list) else []:
            groups = row.get("groups") or {}
            if all(isinstance(groups.get(g), dict) and "base" in groups[g] for g in HELDOUT_GROUPS):
                seen.setdefault((row["domain"], row["base"]), set()).add(
                    tuple(f"{groups[g]['base']:.3f}" for g in HELDOUT_GROUPS))
    return seen


def _reference_point_problems(name: str, text: str, stored: dict) -> list[str]:
    """"`offline-minilm` 0.758 / 0.803 / 0.969": a base's zero-shot scores are ones a stored run measured
    (software's paragraph gives the semantic scores first, then "explicit a / b / c, controls a / b / c")."""
    flat = " ".join(text.split())
    triples = re.finditer(r"`(offline-[\w-]+)` (\d\.\d{3}) / (\d\.\d{3}) / (\d\.\d{3})", flat)
    said = {m[1]: m.groups()[1:] for m in triples}
    singles = re.findall(r"`(offline-[\w-]+)` (\d\.\d{3}),", flat)
    rest = re.search(r"explicit (\d\.\d{3}) / (\d\.\d{3}) / \S+, controls (\d\.\d{3}) / (\d\.\d{3}) / ", flat)
    if singles and rest:
        for i, (base, semantic) in enumerate(singles):
            said[base] = (semantic, rest[1 + i], rest[3 + i])
    return [f"{base}: {scores} is in no stored run {sorted(stored.get((name, base), set()))}"
            for base, scores in said.items() if scores not in stored.get((name, base), set())]


def test_domain_readme_reference_points_are_stored_runs():
    stored = _stored_base_scores()
    said = 0
    for name in SPREAD_README_NAMES:
        text = _domain_readme(name)
        assert _reference_point_problems(name, text, stored) == [], name
        said += "`offline-minilm` 0." in text
    assert said >= 3  # insurance, maritime, software
    text = _domain_readme("software")
    assert _reference_point_problems("software", text.replace("0.815", "0.816"), stored)
    assert _reference_point_problems("software", text.replace("0.804 / 0.968", "0.804 / 0.969"), stored)
    text = _domain_readme("maritime")
    assert _reference_point_problems("maritime", text.replace("0.747 / 0.981", "0.747 / 0.982"), stored)


def test_the_brewery_walkthrough_domain_is_what_its_readme_says():
    """bench/outside/brewery: a new user's files, read by the loaders a run reads them with; the
    README's counts and id ranges are counted here, not copied."""
    from sparse_adapt.data import load_documents, load_qrels, load_queries

    root = OUTSIDE / "brewery"
    assert "brewery" not in corpora.names()
    docs = {d.doc_id: d.text for d in load_documents(root / "docs.jsonl")}
    queries = {q.qid for q in load_queries(root / "queries.jsonl")}
    qrels = load_qrels(root / "qrels.tsv")
    groups = json.loads((root / "query_groups.json").read_text())
    readme = _joined_readme(root / "README.md")
    terms = re.findall(r"`([^`]+)` \([^)]*?, ([a-z]\d[^)]*)\)", readme)
    assert len(terms) == 8
    using = {d for d, text in docs.items() if any(re.search(rf"\b{re.escape(t)}\b", text) for t, _ in terms)}
    for term, span in terms:  # "q1-q5 and v4": the documents naming the term
        named = {d for d, text in docs.items() if re.search(rf"\b{re.escape(term)}\b", text)}
        ranges = [part.partition("-") for part in span.split(" and ")]
        assert named == {i for first, _, last in ranges for i in _expand_id_span(first, last or first)}, term
    assert f"{len(docs)} documents" in readme and f"used by {len(using)} of them" in readme
    assert f"The {len(docs) - len(using)} distractors" in readme
    assert f"The {len(queries)} held-out queries" in readme
    assert {g: len(q) for g, q in groups.items()} == {
        g: int(n) for n, g in re.findall(r"(\d+) `(semantic|explicit|control)`", readme)}
    assert set(qrels) == queries and all(set(judged) <= set(docs) and max(judged.values()) > 0
                                         for judged in qrels.values())
    assert sorted(q for qids in groups.values() for q in qids) == sorted(queries)
