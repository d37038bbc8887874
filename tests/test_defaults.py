"""Which bundled file stands in for an input the user did not give."""

from __future__ import annotations

from sparse_adapt.defaults import BUNDLED, companion


def test_the_bundled_documents_named_another_way_still_bring_their_companions(tmp_path, monkeypatch):
    # `--docs docs.jsonl` typed in the corpus's folder, or a link to it, is the bundled corpus all the same
    link = tmp_path / "link.jsonl"
    link.symlink_to(BUNDLED.docs)
    assert companion(link, None, "queries") == BUNDLED.queries
    monkeypatch.chdir(BUNDLED.docs.parent)
    assert companion(BUNDLED.docs.name, None, "terms") == BUNDLED.terms
    # a copy is the user's corpus: never checked against the bundled queries
    copy = tmp_path / "docs.jsonl"
    copy.write_bytes(BUNDLED.docs.read_bytes())
    assert companion(copy, None, "queries") is None
    assert companion(copy, tmp_path / "q.tsv", "queries") == tmp_path / "q.tsv"
