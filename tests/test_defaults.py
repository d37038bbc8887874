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


def test_the_commands_the_docs_call_corpus_optional_or_required_are_so_in_the_cli():
    # The docs say which commands fall back on the bundled corpus: a command that changed either way
    # would run on Gatrocraptic unasked, or refuse what the docs promise works on a fresh install.
    import re

    import typer

    import sparse_adapt.defaults as defaults
    from sparse_adapt.cli import app

    doc = " ".join(defaults.__doc__.split())
    optional = re.findall(r"``(\w[\w-]*)``", re.search(r"corpus is optional \(([^)]*)\)", doc)[1])
    required = re.findall(r"``(\w[\w-]*)``", re.search(r";((?: ``[\w-]+``,?| and)+) require", doc)[1])
    assert optional and required
    commands = typer.main.get_command(app).commands
    for name, wanted in [*((n, False) for n in optional), *((n, True) for n in required)]:
        corpus = [p for p in commands[name].params if {"--docs", "--corpus", "--calibration-docs"} & set(p.opts)]
        assert len(corpus) == 1 and corpus[0].required is wanted, (name, corpus)
