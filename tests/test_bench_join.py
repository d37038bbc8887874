"""bench.join: registered domains written as one corpus directory the benchmark reads."""

import json

import pytest

import corpora
from bench.join import join, main
from sparse_adapt.report.domains import EvalSet, resolve_domain


def test_joined_domains_keep_every_document_query_judgement_and_group(tmp_path):
    out = tmp_path / "joined"
    assert main(["--out", str(out), "pharma,hardware"]) == 0
    parts = [EvalSet.load(corpora.get(d)) for d in ("pharma", "hardware")]
    joined = EvalSet.load(resolve_domain(str(out)).files)  # every bundled file is there, hand-written ones too
    assert [d.doc_id for d in joined.documents] == [d.doc_id for p in parts for d in p.documents]
    assert joined.qrels == {**parts[0].qrels, **parts[1].qrels}
    assert joined.groups == {g: parts[0].groups[g] + parts[1].groups[g] for g in parts[0].groups}
    # Pooled with every registered domain, its parts' documents are not there a second time.
    texts = [d.text for d in joined.pooled(None).documents]
    assert len(texts) == len(set(texts))
    assert resolve_domain(str(corpora.get("legal").docs.parent)).split == "test"  # by folder: the registered domain
    terms = json.loads((out / "domain_terms.json").read_text())
    assert "Velotraxin" in terms["drugs"]  # pharma's categories kept beside hardware's
    with pytest.raises(SystemExit):  # never into an existing directory
        main(["--out", str(out), "pharma"])


def test_a_clashing_id_stops_the_join(tmp_path):
    pharma = corpora.get("pharma")
    twin = pharma._replace(name="twin")  # the same files: every document id clashes
    with pytest.raises(SystemExit, match="docs doc_id 'p1' is in both pharma and twin"):
        join([pharma, twin], tmp_path / "joined")
