"""One order for every evaluation, listing and saved run: descending score, ties by
descending doc id (trec_eval's), whatever ranx's sort would have done with the ties."""

from __future__ import annotations

import json
import math

import numpy as np

import pytest

from sparse_adapt.data import Document, Query, load_qrels
from sparse_adapt.data.records import DataError
from sparse_adapt.data.runs import load_run
from sparse_adapt.retrieval.evaluation import (
    check_qrels, evaluate_per_query, evaluate_run, run_tag, save_run_file,
)
from sparse_adapt.retrieval.ranking import ranking, top_k

# 20 documents of one score: from 16 ties on, ranx's unstable sort put the relevant one anywhere.
TIED = {f"dup{i:02d}": 5.0 for i in range(20)}


def test_ties_are_ordered_by_descending_doc_id():
    scores = {"b": 1.0, "a": 2.0, "c": 1.0, "d": 0.5}
    assert ranking(scores) == [("a", 2.0), ("c", 1.0), ("b", 1.0), ("d", 0.5)]
    assert top_k({"q": scores}, 3) == {"q": ["a", "c", "b"]}


@pytest.mark.parametrize("relevant, rank", [("dup19", 1), ("dup15", 5), ("dup10", 10), ("dup00", 20)])
def test_metrics_of_tied_documents_are_the_hand_worked_ones_in_every_call(relevant, rank):
    """One relevant document at ``rank``: nDCG@10 = 1/log2(rank + 1), MRR@10 = 1/rank (0 past 10)."""
    qrels = {"q": {relevant: 1}}
    want_ndcg = 1 / math.log2(rank + 1) if rank <= 10 else 0.0
    want_mrr = 1 / rank if rank <= 10 else 0.0
    for _ in range(3):
        got = evaluate_run(qrels, {"q": dict(TIED)}, ["ndcg@10", "mrr@10"])
        assert got == pytest.approx({"ndcg@10": want_ndcg, "mrr@10": want_mrr}, abs=1e-6)
        assert evaluate_per_query(qrels, {"q": dict(TIED)})["q"] == pytest.approx(want_ndcg, abs=1e-6)


def test_a_saved_run_lists_that_order_and_evaluates_to_the_same_figures(tmp_path):
    run = {"q1": dict(TIED), "q2": {"x": 0.25, "y": 0.75}}
    qrels = {"q1": {"dup15": 1}, "q2": {"x": 2}}
    path = tmp_path / "run.trec"
    save_run_file(run, path, "runs/my model")
    text = path.read_text()
    assert text.endswith("\n")  # two saved runs concatenated stay one line per hit
    lines = [line.split() for line in text.splitlines()]
    assert all(len(parts) == 6 and parts[1] == "Q0" and parts[5] == "runs/my_model" for parts in lines)
    q1 = [parts for parts in lines if parts[0] == "q1"]
    assert [p[2] for p in q1[:3]] == ["dup19", "dup18", "dup17"] and [p[3] for p in q1[:3]] == ["1", "2", "3"]
    assert [(p[2], float(p[4])) for p in lines if p[0] == "q2"] == [("y", 0.75), ("x", 0.25)]
    assert load_run(path) == run  # exact scores back
    assert evaluate_run(qrels, load_run(path)) == evaluate_run(qrels, run)
    save_run_file({"q": {"a": np.float32(0.1), "b": np.float64(2.5)}}, path, "np")  # numpy scores from Python
    assert load_run(path) == {"q": {"b": 2.5, "a": float(np.float32(0.1))}}


def test_a_run_tag_is_one_field():
    assert run_tag(" my\tmodel  dir ") == "my_model_dir" and run_tag("   ") == "sparse-adapt"


def test_a_document_judged_twice_with_two_grades_is_refused(tmp_path):
    path = tmp_path / "qrels.tsv"
    path.write_text("q1 0 d1 2\nq1 0 d2 0\nq1 0 d1 2\n")
    assert load_qrels(path) == {"q1": {"d1": 2, "d2": 0}}  # the same grade again is one judgement
    path.write_text("q1 0 d1 2\nq1 0 d2 0\nq1 0 d1 0\n")
    with pytest.raises(DataError, match=r"qrels.tsv:3: field 'grade': q1 d1 is judged 2 on an earlier line and 0 here"):
        load_qrels(path)


def test_a_judged_query_without_a_relevant_document_is_said_to_count_as_zero():
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 0}, "q3": {"d3": 0, "d1": -1}}
    warnings = check_qrels(qrels, ["q1", "q2", "q3"], ["d1", "d2", "d3"])
    assert warnings == ["the qrels: 2 of 3 evaluated queries have no relevant document (no grade above 0) and "
                        "count as 0 in every metric (e.g. q2, q3)"]
    one = check_qrels(qrels, ["q1", "q2"], ["d1", "d2", "d3"])
    assert one[0].startswith("the qrels: 1 of 2 evaluated queries has no relevant document (no grade above 0) and counts")
    assert evaluate_run(qrels, {q: {"d1": 1.0} for q in qrels}, ["mrr@10"]) == {"mrr@10": pytest.approx(1 / 3)}


def test_a_query_without_judgements_is_said_not_to_be_evaluated():
    """ranx evaluates judged queries only: 16 queries given, "15 queries" in the title, unsaid."""
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 2}}
    assert check_qrels(qrels, ["q1", "q2", "q9"], ["d1", "d2"]) == [
        "the queries: 1 of 3 queries has no judgement in the qrels and is not evaluated (e.g. q9)"]
    assert check_qrels(qrels, ["q1", "q2"], ["d1", "d2"]) == []


def test_query_files_are_loaded_apart_each_judged_by_its_own_qrels_and_an_id_in_two_is_refused(tmp_path):
    from sparse_adapt.errors import ConfigError
    from sparse_adapt.retrieval.evaluation import load_judged

    def write(name, lines):
        (tmp_path / name).write_text("".join(lines), encoding="utf-8")
        return tmp_path / name

    main = write("queries.jsonl", ['{"qid": "q1", "text": "a"}\n', '{"qid": "q2", "text": "b"}\n'])
    held = write("heldout.jsonl", ['{"qid": "h1", "text": "c"}\n'])
    # the held-out qrels also judge q1 (with another document): that line must not replace q1's judgements
    main_r = write("qrels.tsv", ["q1 0 d1 1\n", "q2 0 d2 1\n"])
    held_r = write("heldout_qrels.tsv", ["h1 0 d3 1\n", "q1 0 d2 1\n"])
    (queries, heldout), (qrels, heldout_qrels), notes = load_judged(
        [(main, main_r), (held, held_r)], "docs.jsonl", {"d1", "d2", "d3"})
    assert [q.qid for q in queries] == ["q1", "q2"] and [q.qid for q in heldout] == ["h1"]
    assert qrels == {"q1": {"d1": 1}, "q2": {"d2": 1}} and heldout_qrels == {"h1": {"d3": 1}}
    assert notes == [f"{held_r}: 1 of 2 judged queries are not in {held} and are not evaluated (e.g. q1)"]
    clash = write("clash.jsonl", ['{"qid": "q2", "text": "another text"}\n'])
    with pytest.raises(ConfigError, match=f"^{clash}: query ids also in {main}: q2$"):
        load_judged([(main, main_r), (clash, main_r)], "docs.jsonl", {"d1", "d2"})


def test_compare_json_is_strict_json_and_a_partial_run_is_said(tmp_path, capsys):
    from corpora import GATROCRAPTIC
    from sparse_adapt.cli import main
    from tests.conftest import make_tiny_bert

    model = str(make_tiny_bert().save_pretrained(tmp_path / "tiny"))
    files = ["--docs", str(GATROCRAPTIC.docs), "--queries", str(GATROCRAPTIC.queries),
             "--qrels", str(GATROCRAPTIC.qrels)]
    saved = tmp_path / "same.trec"
    assert main(["evaluate", "--model", model, *files, "--save-run", str(saved), "--json"]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--model", model, *files, "--compare", str(saved), "--json"]) == 0
    out = capsys.readouterr().out

    def refuse(constant):
        raise ValueError(constant)

    got = json.loads(out, parse_constant=refuse)  # identical runs: ranx's p-value is NaN, printed as null
    assert got["comparison"][model]["comparisons"][str(saved)]["ndcg@10"] is None
    lines = saved.read_text().splitlines()
    partial = tmp_path / "partial.trec"
    partial.write_text("".join(line + "\n" for line in lines if line.split()[0] == lines[0].split()[0]))
    assert main(["evaluate", "--model", model, *files, "--compare", str(partial)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "evaluated queries are not in the run and count as 0 for it" in err
    # ranx's binary runs get the checks of the text ones: a NaN score ranks arbitrarily
    from ranx import Run

    Run({"q1": {"d1": float("nan"), "d2": 1.0}}).save(str(tmp_path / "nan.lz4"), kind="lz4")
    assert main(["evaluate", "--model", model, *files, "--compare", str(tmp_path / "nan.lz4")]) == 2
    assert "field 'q1.d1': expected a finite number, got nan" in capsys.readouterr().err


def test_a_run_that_retrieved_nothing_scores_zero_instead_of_failing_in_ranx():
    """A model that activates nothing (validation after a bad epoch) retrieves no document at all."""
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    assert evaluate_run(qrels, {"q1": {}, "q2": {}}) == {"ndcg@10": 0.0, "mrr@10": 0.0, "recall@5": 0.0}
    assert evaluate_per_query(qrels, {"q1": {}, "q2": {}}) == {"q1": 0.0, "q2": 0.0}


def test_a_judged_query_the_run_lacks_counts_zero_in_the_mean():
    """It was left out of the mean, which then stood on fewer queries than were asked for."""
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}}
    run = {"q1": {"d1": 2.0, "d9": 1.0}, "q3": {}}  # q1 perfect, q2 absent, q3 retrieved nothing
    assert evaluate_run(qrels, run, ["ndcg@10"], qids=["q1", "q2", "q3"]) == {"ndcg@10": pytest.approx(1 / 3)}
    assert evaluate_run(qrels, run, ["ndcg@10"], qids=list(run)) == {"ndcg@10": pytest.approx(1 / 2)}  # the run's own


def test_without_qids_a_judged_query_the_run_lacks_is_refused_as_ranx_refuses_it():
    """A TREC file has no line for a query that retrieved nothing: saved and loaded, the run lost
    q2 and scored 1.0 where it had scored 0.5, silently (the mean stood on the run's own queries)."""
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    run = {"q1": {"d1": 2.0}, "q2": {}}
    assert evaluate_run(qrels, run, "ndcg@10") == {"ndcg@10": 0.5}
    lacks = r"the run lacks 1 of the 2 judged queries \(e\.g\. q2\): pass qids=list\(qrels\)"
    with pytest.raises(ValueError, match=lacks):
        evaluate_run(qrels, {"q1": {"d1": 2.0}})
    assert evaluate_run(qrels, {"q1": {"d1": 2.0}}, "ndcg@10", qids=list(qrels)) == {"ndcg@10": 0.5}


def test_evaluate_run_takes_one_metric_as_a_string_and_ranx_s_own_objects():
    """ranx takes "ndcg@10" alone (the string was split into characters: "Metric n not supported")
    and its Qrels and Run (a numba error before). Worked by hand: q1's one relevant document at
    rank 2 gives nDCG@10 = 1/log2(3) and MRR@10 = 1/2."""
    from ranx import Qrels, Run

    qrels, run = {"q1": {"d1": 1}}, {"q1": {"d2": 3.0, "d1": 2.0}}
    assert evaluate_run(qrels, run, "mrr@10") == {"mrr@10": 0.5}
    got = evaluate_run(Qrels(qrels), Run(run), ("ndcg@10", "mrr@10"))
    assert got == pytest.approx({"ndcg@10": 1 / math.log2(3), "mrr@10": 0.5}, abs=1e-6)


@pytest.mark.parametrize("qrels, run, message", [
    ({"q1": {"d2": 3.0, "d1": 2.0}}, {"q1": {"d1": 1}},
     r"qrels\['q1'\]\['d2'\] is 3\.0: grades are integers .*swapped"),
    ("qrels.tsv", {"q1": {"d1": 1.0}}, r"qrels must be a dict .* got str: read a file with load_qrels"),
    ({"q1": {"d1": 1}}, [("q1", "d1", 1.0)],
     r"run must be a dict \{query id: \{doc id: score\}\} or a ranx Run, got list"),
    ({"q1": {"d1": True}}, {"q1": {"d1": 1.0}}, r"qrels\['q1'\]\['d1'\] is True: grades are integers"),
])
def test_evaluate_run_refuses_what_is_no_qrels_or_run_naming_it(qrels, run, message):
    with pytest.raises((TypeError, ValueError), match=message):
        evaluate_run(qrels, run)


def test_a_run_saved_as_json_keeps_a_query_that_retrieved_nothing_and_loads_back(tmp_path):
    """The suffix decided the format on reading only: a .json name got TREC lines, which
    load_run then could not read. Now it is ranx's JSON layout, which can hold an empty query."""
    from ranx import Run

    run = {"q1": {"d1": np.float32(2.5), "d2": 3.0}, "q2": {}}
    assert save_run_file(run, tmp_path / "run.json", "mine") == []
    assert load_run(tmp_path / "run.json") == {"q1": {"d2": 3.0, "d1": 2.5}, "q2": {}}
    assert list(json.loads((tmp_path / "run.json").read_text())["q1"]) == ["d2", "d1"]  # ranking order
    assert Run.from_file(str(tmp_path / "run.json")).to_dict()["q1"] == {"d2": 3.0, "d1": 2.5}
    with pytest.raises(ValueError, match=r"\.lz4 is ranx's binary format, which sparse-adapt reads but does not write"):
        save_run_file(run, tmp_path / "run.lz4", "mine")
    Run({"q1": {"d1": 1.0, "d2": 0.5}}).save(str(tmp_path / "ranx.lz4"), kind="lz4")
    assert load_run(tmp_path / "ranx.lz4") == {"q1": {"d1": 1.0, "d2": 0.5}}
    (tmp_path / "bad.lz4").write_bytes(b"not lz4 at all")
    with pytest.raises(DataError, match="not a ranx lz4 run file"):
        load_run(tmp_path / "bad.lz4")


def test_per_query_values_cover_the_judged_queries_of_a_run_only():
    """A run holds every query a file has; one without judgements gets no value (it has no qrels)."""
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    run = {"q1": {"d9": 2.0, "d1": 1.0}, "q2": {"d3": 1.0}, "q7": {"d1": 1.0}}  # q1: relevant at rank 2
    assert evaluate_per_query(qrels, run) == {"q1": pytest.approx(1 / np.log2(3)), "q2": 0.0}


def test_a_trec_line_missing_a_column_says_how_it_was_read(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("q1 0 d1 1\nq1 0 d2\n")
    with pytest.raises(DataError, match=r"qrels.txt:2: 3 columns where the file's first judgement has 4 \(TREC's"):
        load_qrels(path)
    path.write_text("q1 0 d2\n")  # the first line: read as BEIR's 3 columns, and said so
    with pytest.raises(DataError, match=r"qrels.txt:1: field 'grade': expected an integer, got 'd2' \(read as BEIR's"):
        load_qrels(path)


def test_a_beir_folder_judging_a_document_twice_with_two_grades_is_refused(tmp_path):
    from sparse_adapt.data.records import DataError
    from sparse_adapt.retrieval.datasets import load_dataset
    from tests.retrieval.test_evaluate_cli import write_beir

    folder = write_beir(tmp_path / "beir")
    with (folder / "qrels" / "test.tsv").open("a") as f:
        f.write("q11\td21\t0\n")  # q11 d21 is judged 2 above
    with pytest.raises(DataError, match="test.tsv:122: field 'grade': q11 d21 is judged 2 on an earlier line and 0 here"):
        load_dataset(str(folder)).qrels()


def test_compare_with_a_model_that_retrieves_nothing_is_one_line(tmp_path, capsys):
    import torch

    from corpora import GATROCRAPTIC
    from sparse_adapt.cli import main
    from tests.conftest import make_tiny_bert

    dead = make_tiny_bert()
    with torch.no_grad():
        dead.mlm.get_output_embeddings().bias -= 1000.0  # no logit above 0: every vector is empty
    files = ["--docs", str(GATROCRAPTIC.docs), "--queries", str(GATROCRAPTIC.queries),
             "--qrels", str(GATROCRAPTIC.qrels)]
    argv = ["evaluate", "--model", str(make_tiny_bert().save_pretrained(tmp_path / "alive")), *files,
            "--compare", str(dead.save_pretrained(tmp_path / "dead"))]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "retrieved no document for any evaluated query" in err and "Traceback" not in err


def test_the_tie_count_from_which_ranx_reorders_is_the_one_ranking_py_names():
    """ranking.py's reason for its own order names how many tied documents ranx's unstable sort
    starts to reorder; recomputed from the ranx installed: one run per count, each query judging
    one of the tied documents relevant, so 1 / MRR is that document's rank in ranx's order."""
    import re

    from sparse_adapt.retrieval import ranking as module
    from sparse_adapt.retrieval.evaluation import import_ranx, quiet_ranx

    ranx = import_ranx()

    def given_order_kept(n: int) -> bool:
        ids = [f"dup{j:02d}" for j in range(n)]
        qrels = ranx.Qrels({f"q{i}": {d: 1} for i, d in enumerate(ids)})
        run = ranx.Run({f"q{i}": dict.fromkeys(ids, 5.0) for i in range(n)})
        with quiet_ranx():
            ranx.evaluate(qrels, run, "mrr")
        return [round(1 / run.scores["mrr"][f"q{i}"]) for i in range(n)] == list(range(1, n + 1))

    first = next((n for n in range(2, 41) if not given_order_kept(n)), None)
    assert first is not None, "ranx kept 40 tied documents in their order: ranking.py's reason is stale"
    named = re.search(r"unstable sort, so (\d+) or more\s+tied documents", module.__doc__)
    assert named and int(named[1]) == first


@pytest.mark.parametrize("docs, queries, error, message", [
    ([Document("d1", "a"), Document("d1", "b")], [Query("q1", "a")], ValueError, "documents repeat the id 'd1'"),
    ([Document("d1", "a")], [Query("q1", "a"), Query("q1", "b")], ValueError, "queries repeat the id 'q1'"),
    (["a text"], [Query("q1", "a")], TypeError, r"documents\[0\] must be a sparse_adapt\.data\.Document .* got str"),
    ([Document("d1", "a")], [("q1", "a")], TypeError, r"queries\[0\] must be a sparse_adapt\.data\.Query .* got tuple"),
])
def test_score_in_memory_refuses_repeated_ids_and_other_records_before_encoding(docs, queries, error, message):
    """A run is a dict: a repeated id kept only its last scores, silently (the file loaders refuse
    one); plain strings failed with an AttributeError after the whole corpus was encoded. The
    model is never reached (None stands for it)."""
    from sparse_adapt.retrieval.evaluation import score_in_memory

    with pytest.raises(error, match=message):
        score_in_memory(None, docs, queries)
