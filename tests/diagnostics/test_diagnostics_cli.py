"""`sparse-adapt diagnose / explain / inspect` through the real CLI entry point."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import make_tiny_bert
from diagnostics.recommend import Sources
from diagnostics.schema import DIAGNOSE_SCHEMA, EXPLAIN_SCHEMA, INSPECT_SCHEMA, validate
from sparse_adapt.modeling.base import set_bias
from sparse_adapt.modeling.calibration import calibrate_bias
from sparse_adapt.cli import main
from sparse_adapt.modeling.vocabulary import extend_vocabulary

DOCS = [
    {"doc_id": "d1", "text": "Configure the API gateway timeout."},
    {"doc_id": "d2", "text": "Gatrocraptic analysis tools help identify spending patterns."},
    {"doc_id": "d3", "text": "Reset your password from the account page."},
]
QUERIES = [{"qid": "q1", "text": "tools for monitoring expenses"}, {"qid": "q2", "text": "Gatrocraptic tools"}]
TERMS = {"jargon": ["Gatrocraptic"], "acronyms": ["API"]}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("diag")
    splade = make_tiny_bert()
    extend_vocabulary(splade, TERMS)
    # A sparse model (~30 active tokens per text, like the real base) keeps outputs small.
    set_bias(splade.mlm, calibrate_bias(splade, [d["text"] for d in DOCS], target_active=30))
    splade.save_pretrained(root / "model")
    (root / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    (root / "terms.json").write_text(json.dumps(TERMS))
    return root


def _args(files, *extra):
    return [*extra, "--model", str(files / "model"), "--docs", str(files / "docs.jsonl")]


def test_diagnose_json(files, capsys):
    rc = main(["diagnose", "Gatrocraptic", *_args(files),
               "--terms", str(files / "terms.json"), "--queries", str(files / "queries.jsonl"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    validate(out)
    assert out["schema"] == DIAGNOSE_SCHEMA and out["model"] == str(files / "model")
    assert out["vocabulary"]["single_token"] and out["vocabulary"]["categories"] == ["jargon"]
    assert out["document"]["doc_id"] == "d2"
    assert out["targets"][0]["query_expansion"]["queries"] == 2


def test_diagnose_on_another_corpus_without_terms_checks_no_terms_file(files, capsys):
    # The bundled terms file belongs to the bundled corpus: before, it was checked here and "API" failed it.
    rc = main(["diagnose", "API", *_args(files), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["vocabulary"]["terms_file"] is None and not out["vocabulary"]["in_terms_file"]
    [check] = [c for c in out["checks"] if c["name"] == "in_terms_file"]
    assert check["status"] == "n/a"
    assert not any("domain_terms.json" in r["action"] for r in out["recommendations"])


def test_diagnose_with_feedback(files, capsys):
    argv = ["diagnose", "Gatrocraptic", *_args(files), "--terms", str(files / "terms.json")]
    queries = ["--queries", str(files / "queries.jsonl")]
    rc = main([*argv, *queries, "--json", "--feedback", "--feedback-terms", "8"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    validate(out)
    fed = out["targets"][0]["query_expansion"]["feedback"]
    assert (fed["docs"], fed["weight"], fed["terms"]) == (1, 0.5, 8)
    assert main([*argv, *queries, "--feedback"]) == 0
    assert "with feedback (+ 0.5 x the mean of the best 1 document(s), 32 terms)" in " ".join(
        capsys.readouterr().out.split())
    for bad, says in (([*queries, "--feedback-docs", "2"], "add --feedback"),
                      (["--feedback"], "give --queries"),
                      ([*queries, "--feedback", "--feedback-terms", "0"],
                       "--feedback-terms must be a positive integer")):
        assert main([*argv, *bad]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert says in err and "Traceback" not in err


def test_diagnose_on_the_bundled_corpus_checks_the_bundled_queries_unless_given_others(files, capsys):
    """--docs left at the bundled corpus brings its queries (the default rule of every command)."""
    from sparse_adapt.data import load_queries
    from sparse_adapt.defaults import BUNDLED

    argv = ["diagnose", "Gatrocraptic", "--model", str(files / "model"), "--json"]
    assert main(argv) == 0
    expansion = json.loads(capsys.readouterr().out)["targets"][0]["query_expansion"]
    assert expansion is not None and expansion["queries"] == len(load_queries(BUNDLED.queries))
    assert main([*argv, "--queries", str(files / "queries.jsonl")]) == 0
    assert json.loads(capsys.readouterr().out)["targets"][0]["query_expansion"]["queries"] == len(QUERIES)


def test_diagnose_tables(files, capsys):
    rc = main(["diagnose", "Gatrocraptic", *_args(files), "--terms", str(files / "terms.json"), "--doc", "d2"])
    out = capsys.readouterr().out
    assert rc == 0
    for section in ("Token diagnostic: 'Gatrocraptic'", "[1] Vocabulary check", "[2] MLM logit analysis",
                    "[3] SPLADE weight", "[4] Ranking", "[5] Checks and recommendations", "◀ term"):
        assert section in out
    assert re.search(r"◀ (term, )?max\b", out)  # said in words too: no underline reaches a log


def test_diagnose_term_absent_everywhere_still_reports(files, capsys):
    rc = main(["diagnose", "OAuth2", *_args(files), "--terms", str(files / "terms.json")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "no document of 3 contains 'OAuth2'" in " ".join(out.split())
    assert "[3] SPLADE weight" in out


def test_diagnose_errors_are_one_line(files, capsys):
    rc = main(["diagnose", "Gatrocraptic", "--model", str(files / "missing"), "--docs", str(files / "docs.jsonl")])
    err = capsys.readouterr().err
    assert rc == 2 and "model directory not found" in err and len(err.strip().splitlines()) == 1
    # named with the documents file, and before the model loads (a missing model would say so first)
    rc = main(["diagnose", "Gatrocraptic", "--model", str(files / "missing"), "--docs", str(files / "docs.jsonl"),
               "--doc", "d9"])
    err = capsys.readouterr().err
    assert rc == 2 and f"--doc 'd9': no document with this id in {files / 'docs.jsonl'}" in err
    assert len(err.strip().splitlines()) == 1
    (files / "bad.jsonl").write_text('{"doc_id": "x"}\n')
    rc = main(["diagnose", "Gatrocraptic", "--model", str(files / "model"), "--docs", str(files / "bad.jsonl")])
    err = capsys.readouterr().err
    assert rc == 2 and "bad.jsonl:1: field 'text': missing" in err
    rc = main(["diagnose", " ", *_args(files)])
    assert rc == 2 and "term is empty" in capsys.readouterr().err


def test_explain_json_and_tables(files, capsys):
    rc = main(["explain", "gatrocraptic spending tools", *_args(files), "--k", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["query"]["feedback"] is None
    validate(out)
    assert out["schema"] == EXPLAIN_SCHEMA and len(out["results"]) == 2
    rc = main(["explain", "gatrocraptic spending tools", *_args(files), "-k", "1", "--json"])
    assert rc == 0 and len(json.loads(capsys.readouterr().out)["results"]) == 1
    for m in out["results"]:
        assert sum(s["contribution"] for s in m["shared"]) == pytest.approx(m["score"], rel=1e-5)
    rc = main(["explain", "gatrocraptic spending tools", *_args(files)])
    out = capsys.readouterr().out
    assert rc == 0 and "contribution = q × d" in out and "#3" in out
    rc = main(["explain", "gatrocraptic spending tools", *_args(files), "--k", "2", "--json", "--feedback",
               "--feedback-terms", "4"])
    fed = json.loads(capsys.readouterr().out)
    assert rc == 0
    validate(fed)
    assert fed["query"]["feedback"]["terms"] == 4 and len(fed["query"]["feedback"]["added"]) <= 4
    assert fed["query"]["feedback"]["fed_back"]
    rc = main(["explain", "gatrocraptic spending tools", *_args(files), "--feedback"])
    assert rc == 0 and "pseudo-relevance feedback: + 0.5 x the mean of" in capsys.readouterr().out
    rc = main(["explain", "gatrocraptic spending tools", *_args(files), "--feedback-docs", "2"])
    assert rc == 2 and "add --feedback" in capsys.readouterr().err


def test_explain_a_chosen_document_at_the_rank_it_takes(files, capsys):
    """Why does a relevant document rank low? --doc explains it without the documents above it."""
    query = "gatrocraptic spending tools"
    assert main(["explain", query, *_args(files), "--k", str(len(DOCS)), "--json"]) == 0
    everyone = {m["doc_id"]: m for m in json.loads(capsys.readouterr().out)["results"]}
    last = max((m for m in everyone.values() if m["doc_id"] != "d1"), key=lambda m: m["rank"])
    assert main(["explain", query, *_args(files), "--doc", last["doc_id"], "--doc", "d1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    validate(out)
    assert [m["doc_id"] for m in out["results"]] == [last["doc_id"], "d1"] and out["k"] == 2
    for m in out["results"]:  # the rank and score it takes among all the documents, and its contributions
        assert (m["rank"], m["score"], m["shared"]) == (everyone[m["doc_id"]]["rank"], everyone[m["doc_id"]]["score"],
                                                        everyone[m["doc_id"]]["shared"])
    # an unknown id is one line naming the documents file, before the model loads
    rc = main(["explain", query, "--model", str(files / "missing"), "--docs", str(files / "docs.jsonl"), "--doc", "d99"])
    err = capsys.readouterr().err
    assert rc == 2 and f"--doc 'd99': no document with this id in {files / 'docs.jsonl'}" in err


def test_explain_from_an_index_explains_its_hits_and_refuses_what_it_cannot_start_from(files, tmp_path, capsys,
                                                                                      stand_in_lucene):
    """Lucene stood in for (no JVM): the index's hits are the documents explained, a model
    mismatch is said, and hits the documents file lacks, or none, are one line each."""
    from types import SimpleNamespace

    stand_in_lucene.warning = "the index was exported with another model"
    argv = ["explain", "gatrocraptic spending tools", *_args(files), "--index", str(tmp_path / "index"), "--k", "2"]
    stand_in_lucene.hits = [SimpleNamespace(doc_id=d, score=1.0) for d in ("d3", "d1", "d2")]
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    assert {m["doc_id"] for m in json.loads(captured.out)["results"]} == {"d3", "d1"}
    assert "warning: the index was exported with another model" in captured.err
    assert "documents: the top" not in captured.err  # --json: the hits' note is for the tables only
    assert main(argv) == 0
    assert "documents: the top 2 hits of" in " ".join(capsys.readouterr().err.split())
    stand_in_lucene.hits = [SimpleNamespace(doc_id="gone", score=1.0)]
    assert main(argv) == 2
    assert f"1 of the index's 1 hits are not in {files / 'docs.jsonl'} (e.g. gone)" in capsys.readouterr().err
    stand_in_lucene.hits = []
    assert main(argv) == 2
    assert f"the query matches no document of {tmp_path / 'index'}" in " ".join(capsys.readouterr().err.split())
    for other in (["--feedback"], ["--doc", "d1"]):  # they rank every document of --docs
        assert main([*argv, *other]) == 2
        assert "cannot start from --index's hits" in capsys.readouterr().err


def test_explain_empty_query_is_an_error(files, capsys):
    for empty in ("", "\u200b \u200b"):  # a zero-width space, pasted from a web page, is no query either
        rc = main(["explain", empty, *_args(files)])
        err = capsys.readouterr().err
        assert rc == 2 and "the query is empty" in err
    rc = main(["explain", "x", *_args(files), "--k", "0"])
    assert rc == 2
    capsys.readouterr()
    # said before the model loads: a --model that is not there is not the first thing wrong
    rc = main(["explain", "x", "--model", str(files / "missing"), "--docs", str(files / "docs.jsonl"), "--k", "0"])
    assert rc == 2 and "--k must be >= 1, got 0" in capsys.readouterr().err


def test_inspect_json_and_tables(files, capsys):
    rc = main(["inspect", *_args(files), "--queries", str(files / "queries.jsonl"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    validate(out)
    assert out["schema"] == INSPECT_SCHEMA and out["documents"]["count"] == 3 and out["queries"]["count"] == 2
    assert out["model"] == str(files / "model")  # as given, not the base the model was made from
    assert {t["token"] for t in out["domain"]["tokens"]} == {"gatrocraptic", "api"}
    rc = main(["inspect", *_args(files)])
    out = capsys.readouterr().out
    assert rc == 0 and "non-zero tokens per text" in out and "no queries" in out
    assert main(["inspect", *_args(files), "--queries", str(files / "queries.jsonl"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["feedback"] is None
    rc = main(["inspect", *_args(files), "--queries", str(files / "queries.jsonl"), "--json", "--feedback",
               "--feedback-terms", "3"])
    fed = json.loads(capsys.readouterr().out)
    validate(fed)
    assert rc == 0 and fed["feedback"]["terms"] == 3 and fed["feedback"]["queries"]["count"] == 2
    assert main(["inspect", *_args(files), "--queries", str(files / "queries.jsonl"), "--feedback"]) == 0
    assert "With feedback (+ 0.5 x the mean of the best 1 document(s), 32 terms)" in " ".join(
        capsys.readouterr().out.split())
    assert main(["inspect", *_args(files), "--feedback"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "give --queries" in err and "Traceback" not in err


def test_diagnose_and_inspect_an_adapt_runs_model_use_its_mined_terms(files, tmp_path, capsys):
    import shutil

    from sparse_adapt.corpus.adapt import generated_inputs

    run = tmp_path / "run"
    shutil.copytree(files / "model", run / "final")
    shutil.copytree(files / "model", run / "training" / "final")
    (run / "adapt.json").write_text(json.dumps({"given": {"terms": None, "dictionary": None, "train": "ab12"}}))
    (run / "domain_terms.json").write_text(json.dumps({"jargon": ["Gatrocraptic", "password"]}))
    (run / "dictionary.jsonl").write_text(json.dumps({"term": "Gatrocraptic", "definition": "d", "examples": ["e"]}) + "\n")
    (run / "train.jsonl").write_text("not read: the run was given its train file, which lives elsewhere\n")
    mined = {"terms": run / "domain_terms.json", "dictionary": run / "dictionary.jsonl"}
    assert generated_inputs(run / "final") == mined == generated_inputs(run / "training" / "final")
    assert generated_inputs(files / "model") == {} and generated_inputs(run / "training") == {}
    rc = main(["diagnose", "Gatrocraptic", "--model", str(run / "final"), "--docs", str(files / "docs.jsonl"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["vocabulary"]["terms_file"] == str(run / "domain_terms.json") and out["vocabulary"]["in_terms_file"]
    # "API" is a domain token of the model but adapt did not mine it: the check says so
    rc = main(["diagnose", "API", "--model", str(run / "final"), "--docs", str(files / "docs.jsonl"), "--json"])
    out = json.loads(capsys.readouterr().out)
    [check] = [c for c in out["checks"] if c["name"] == "in_terms_file"]
    assert rc == 0 and check["status"] == "fail"
    # the remedy for an adapt run: edit its terms and rerun adapt (a `train` from the adapted model on
    # the run's dictionary and training lists, which never name the term, would teach it nothing)
    [rec] = [r for r in out["recommendations"] if r["id"] == "add_to_terms"]
    def shown(path):  # as the recommendations show a path
        return Sources("m").path(str(path), "")
    assert rec["action"].startswith(f"add 'API' to a category of {shown(run / 'domain_terms.json')} and "
                                    f"rerun the `sparse-adapt adapt` command that made {shown(run)}")
    assert not [r["commands"] for r in out["recommendations"] if r["id"] in ("add_to_terms", "extend") and r["commands"]]
    # a typo of one of the model's domain terms, in no document: the spelling is checked first
    rc = main(["diagnose", "Gatrocraptc", "--model", str(run / "final"), "--docs", str(files / "docs.jsonl"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and "did you mean 'gatrocraptic'? It is a domain term of this model" in out["warnings"]
    assert out["recommendations"] and all(
        r["action"].startswith("check the spelling first: this model has the domain term 'gatrocraptic'")
        for r in out["recommendations"] if r["id"] in ("add_to_terms", "extend", "documents"))
    # --terms still wins
    rc = main(["diagnose", "API", "--model", str(run / "final"), "--docs", str(files / "docs.jsonl"),
               "--terms", str(files / "terms.json"), "--json"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["vocabulary"]["in_terms_file"]
    rc = main(["inspect", "--model", str(run / "final"), "--docs", str(files / "docs.jsonl"), "--json"])
    domain = json.loads(capsys.readouterr().out)["domain"]
    # "password", a single token the run's terms name, counts as a domain token beside the model's own
    assert rc == 0 and domain["source"] == "model+terms" and "password" in {t["token"] for t in domain["tokens"]}


def test_diagnose_hands_the_recommendations_an_adapt_run_s_own_dictionary_and_lists(files, tmp_path, capsys,
                                                                                    monkeypatch):
    """The suggested `train` commands name the files the run generated beside its final model,
    not the placeholders (nor, for the bundled corpus, the bundled files) the run did not train on."""
    import shutil

    import diagnostics

    run = tmp_path / "run"
    shutil.copytree(files / "model", run / "final")
    (run / "adapt.json").write_text(json.dumps({"given": {"terms": None, "dictionary": None, "train": None}}))
    (run / "domain_terms.json").write_text(json.dumps(TERMS))
    (run / "dictionary.jsonl").write_text("")
    (run / "train.jsonl").write_text("")
    seen = []
    real = diagnostics.diagnose_term
    monkeypatch.setattr(diagnostics, "diagnose_term", lambda *a, **k: seen.append(k["sources"]) or real(*a, **k))
    assert main(["diagnose", "API", "--model", str(run / "final"), "--docs", str(files / "docs.jsonl"), "--json"]) == 0
    assert (seen[0].dictionary, seen[0].train) == (str(run / "dictionary.jsonl"), str(run / "train.jsonl"))


def test_an_adapt_run_on_the_bundled_corpus_is_checked_against_its_own_mined_terms(files, tmp_path, capsys):
    """The run's own terms come before the bundled ones, which it may not have mined alike."""
    import shutil

    from corpora import GATROCRAPTIC

    run = tmp_path / "run"
    shutil.copytree(files / "model", run / "final")
    (run / "adapt.json").write_text(json.dumps({"given": {"terms": None, "dictionary": None, "train": None}}))
    (run / "domain_terms.json").write_text(json.dumps({"jargon": ["Gatrocraptic"]}))
    rc = main(["diagnose", "API", "--model", str(run / "final"), "--docs", str(GATROCRAPTIC.docs), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["vocabulary"]["terms_file"] == str(run / "domain_terms.json")
    assert not out["vocabulary"]["in_terms_file"]


def _trained_on(model: Path, corpus: Path, base: str = "offline-splade-tiny") -> None:
    """What a run writes into its final: the record naming its inputs' sha256s and its base."""
    from sparse_adapt.data.reading import file_sha256

    run = {"base": base, "inputs": {"corpus": file_sha256(corpus)}, "stages": ["extend", "distill"]}
    (model / "made_from.json").write_text(json.dumps({"schema": "sparse-adapt.final/1", "run": run}))


def test_a_model_trained_on_another_corpus_needs_docs(files, tmp_path, capsys):
    """Without --docs an adapt run on fish farming was checked on the bundled Gatrocraptic
    corpus, and told to add its term to the bundled terms file and retrain on finance data."""
    import shutil

    from corpora import GATROCRAPTIC

    model = tmp_path / "final"
    shutil.copytree(files / "model", model)
    _trained_on(model, files / "docs.jsonl")
    for argv in (["diagnose", "Gatrocraptic"], ["explain", "Gatrocraptic tools"], ["inspect"]):
        assert main([*argv, "--model", str(model), "--json"]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert f"--model {model} was trained on another corpus than the bundled Gatrocraptic one" in err
        assert main([*argv, "--model", str(model), "--docs", str(files / "docs.jsonl"), "--json"]) == 0
        capsys.readouterr()
    _trained_on(model, GATROCRAPTIC.docs)  # trained on the bundled corpus itself: its default stays
    assert main(["inspect", "--model", str(model), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["documents"]["count"] == 26


def test_diagnoses_train_command_compares_with_the_base_the_run_trained_from(files, tmp_path, capsys):
    """From a run's final, `train` without --reference compared with the checkpoint itself and
    dropped the settings recommended for the base (offline-splade-tiny's pres_form: documents
    64x denser after the suggested distill)."""
    import shutil

    model = tmp_path / "final"
    shutil.copytree(files / "model", model)
    _trained_on(model, files / "docs.jsonl")
    rc = main(["diagnose", "Gatrocraptic", "--model", str(model), "--docs", str(files / "docs.jsonl"),
               "--queries", str(files / "queries.jsonl"), "--json"])
    out = json.loads(capsys.readouterr().out)
    commands = [c for r in out["recommendations"] for c in r["commands"] if c.startswith("sparse-adapt train")]
    assert rc == 0 and commands, out["recommendations"]
    assert all(c.endswith("--reference offline-splade-tiny") or "--reference offline-splade-tiny " in c for c in commands)
    assert "--reference" not in Sources("offline-minilm").train_command("distill")  # a base, not a run's model


def test_diagnose_analyses_the_document_chosen_with_doc(files, capsys):
    # "API" is first in d1: --doc d2 is analysed instead, not the default first document
    rc = main(["diagnose", "API", *_args(files), "--doc", "d2", "--json"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["document"]["doc_id"] == "d2"


def test_diagnose_on_the_bundled_corpus_hands_the_recommendations_its_dictionary_and_lists(files, capsys,
                                                                                          monkeypatch):
    """A model that is no adapt run, checked on the bundled corpus: the suggested `train` commands
    name the bundled dictionary and training lists, the companions of that corpus."""
    import diagnostics
    from sparse_adapt.defaults import BUNDLED

    seen = []
    real = diagnostics.diagnose_term
    monkeypatch.setattr(diagnostics, "diagnose_term", lambda *a, **k: seen.append(k["sources"]) or real(*a, **k))
    assert main(["diagnose", "Gatrocraptic", "--model", str(files / "model"), "--json"]) == 0
    assert (seen[0].dictionary, seen[0].train) == (str(BUNDLED.dictionary), str(BUNDLED.train))
    assert seen[0].docs == str(BUNDLED.docs)  # the default --docs, named in the `train --corpus` they suggest


@pytest.mark.parametrize("command", [["diagnose", "Gatrocraptic"], ["inspect"]])
def test_feedback_on_the_bundled_corpus_uses_its_queries_without_queries(command, files, capsys):
    # --queries is needed only where --docs has no companion queries
    assert main([*command, "--model", str(files / "model"), "--feedback", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)


def test_inspect_of_an_adapt_runs_model_counts_the_terms_given_over_its_mined_ones(files, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(files / "model", run / "final")
    (run / "adapt.json").write_text(json.dumps({"given": {"terms": None, "dictionary": None, "train": None}}))
    (run / "domain_terms.json").write_text(json.dumps({"jargon": ["Gatrocraptic", "password"]}))
    argv = ["inspect", "--model", str(run / "final"), "--docs", str(files / "docs.jsonl"), "--json"]
    assert main(argv) == 0
    assert "password" in {t["token"] for t in json.loads(capsys.readouterr().out)["domain"]["tokens"]}
    # --terms wins, as in diagnose: "password" is in the mined terms only
    assert main([*argv, "--terms", str(files / "terms.json")]) == 0
    assert "password" not in {t["token"] for t in json.loads(capsys.readouterr().out)["domain"]["tokens"]}


def test_explain_from_an_index_says_a_missing_documents_file_before_searching(files, tmp_path, capsys,
                                                                             stand_in_lucene):
    # with no hits the missing file was never read: the error blamed the query instead
    missing = tmp_path / "missing.jsonl"
    rc = main(["explain", "gatrocraptic tools", "--model", str(files / "model"), "--docs", str(missing),
               "--index", str(tmp_path / "index")])
    err = " ".join(capsys.readouterr().err.split())
    assert rc == 2 and f"{missing}" in err and "file not found" in err
    assert stand_in_lucene.searched == []


def test_json_output_keeps_non_ascii_text_as_written(files, capsys):
    # the JSON is read by people too: "café", not "caf\u00e9"
    assert main(["diagnose", "café", *_args(files), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"café"' in out and "\\u00e9" not in out


@pytest.mark.parametrize("command", [["diagnose", "Gatrocraptic"], ["explain", "gatrocraptic spending tools"],
                                     ["inspect"]])
def test_each_feedback_flag_sets_the_setting_it_names(command, files, capsys):
    # docs, weight and terms all off their defaults (1, 0.5, 32): flags handed on mixed up would show
    queries = [] if command[0] == "explain" else ["--queries", str(files / "queries.jsonl")]
    assert main([*command, *_args(files), *queries, "--json", "--feedback", "--feedback-docs", "2",
                 "--feedback-weight", "0.25", "--feedback-terms", "5"]) == 0
    out = json.loads(capsys.readouterr().out)
    fed = {"diagnose": lambda: out["targets"][0]["query_expansion"]["feedback"],
           "explain": lambda: out["query"]["feedback"], "inspect": lambda: out["feedback"]}[command[0]]()
    assert (fed["docs"], fed["weight"], fed["terms"]) == (2, 0.25, 5)


def test_explain_names_the_unknown_document_among_known_ones(files, capsys):
    rc = main(["explain", "x", "--model", str(files / "missing"), "--docs", str(files / "docs.jsonl"),
               "--doc", "d1", "--doc", "d99"])
    err = capsys.readouterr().err
    assert rc == 2 and "--doc 'd99': no document with this id" in err and "'d1'" not in err


def test_explain_json_names_the_model_as_given(files, capsys):
    # not the base the model was made from (as inspect's "model")
    assert main(["explain", "gatrocraptic tools", *_args(files), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == str(files / "model")


def test_explain_from_an_index_counts_the_hits_it_got_and_checks_every_one(files, tmp_path, capsys, stand_in_lucene):
    from types import SimpleNamespace

    argv = ["explain", "gatrocraptic spending tools", *_args(files), "--index", str(tmp_path / "index"), "--k", "3"]
    stand_in_lucene.hits = [SimpleNamespace(doc_id="d2", score=1.0)]  # fewer hits than --k
    assert main(argv) == 0
    assert "documents: the top 1 hits of" in " ".join(capsys.readouterr().err.split())
    stand_in_lucene.hits = [SimpleNamespace(doc_id=d, score=1.0) for d in ("d2", "gone")]  # the first one is there
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "1 of the index's 2 hits are not in" in err and "(e.g. gone)" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["diagnose", "Gatrocraptic"], ["explain", "gatrocraptic tools"], ["inspect"]])
def test_the_loading_spinner_is_for_the_tables_only(command, files, capsys, monkeypatch):
    # --json: stdout carries the object alone, and stderr no spinner over a terminal's prompt
    from contextlib import nullcontext

    from sparse_adapt.cli import output

    shown = []
    monkeypatch.setattr(output.err_console, "status", lambda text, **kw: shown.append(text) or nullcontext())
    assert main([*command, *_args(files), "--json"]) == 0
    assert shown == []
    assert main([*command, *_args(files)]) == 0
    assert shown == [f"loading {files / 'model'}"]
    capsys.readouterr()
