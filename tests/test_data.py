import json
import re

import pytest

import corpora
from corpora import GATROCRAPTIC
from sparse_adapt.data import (
    DataError, check_documents, iter_documents, load_dictionary, load_documents, load_domain_terms, load_qrels, load_queries, load_train,
)


def test_bundled_corpus_matches_the_spec():
    docs = load_documents(GATROCRAPTIC.docs)
    assert len(docs) == 26 and docs[20].doc_id == "d21" and "Gatrocraptic" in docs[20].text
    assert len(load_queries(GATROCRAPTIC.queries)) == 15
    train = load_train(GATROCRAPTIC.train)
    assert len(train) == 15 and all(len(t.doc_ids) == len(t.teacher_scores) == 8 for t in train)
    by_id = {d.doc_id: d.text for d in docs}
    assert all(by_id[i] == t for ex in train for i, t in zip(ex.doc_ids, ex.doc_texts))
    qrels = load_qrels(GATROCRAPTIC.qrels)
    # rule from corpora/gatrocraptic/README.md: >= 8 -> 2, > 0 -> 1, else 0
    assert qrels["q11"] == {"d23": 2, "d22": 2, "d21": 2, "d25": 2, "d24": 2, "d18": 0, "d6": 0, "d19": 0}
    assert qrels["q3"]["d6"] == 1  # teacher 0.5
    entries = load_dictionary(GATROCRAPTIC.dictionary)
    assert {e.term for e in entries} >= {"Gatrocraptic", "API", "LDAP", "OAuth2", "SAML", "SSL"}


def _write(tmp_path, name, lines):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def test_train_length_mismatch_names_file_line_field(tmp_path):
    good = {"qid": "q1", "query": "x", "doc_ids": ["a", "b"], "doc_texts": ["A", "B"], "teacher_scores": [1, 0]}
    bad = dict(good, teacher_scores=[1.0])
    p = _write(tmp_path, "train.jsonl", [json.dumps(good), json.dumps(bad)])
    with pytest.raises(DataError) as e:
        load_train(p)
    assert (e.value.path, e.value.line, e.value.field) == (str(p), 2, "teacher_scores")
    assert str(e.value).startswith(f"{p}:2: field 'teacher_scores'")


@pytest.mark.parametrize(
    "line, field",
    [
        ('{"doc_id": "d1"}', "text"),
        ('{"doc_id": 3, "text": "x"}', "doc_id"),
        ('{"doc_id": "d1", "text": ""}', "text"),
        ("not json", None),
        ('["d1", "x"]', None),
    ],
)
def test_bad_document_lines(tmp_path, line, field):
    p = _write(tmp_path, "docs.jsonl", ['{"doc_id": "d0", "text": "fine"}', line])
    with pytest.raises(DataError) as e:
        load_documents(p)
    assert e.value.line == 2 and e.value.field == field


def test_duplicate_ids_and_missing_files(tmp_path):
    p = _write(tmp_path, "q.jsonl", ['{"qid": "q1", "text": "a"}', '{"qid": "q1", "text": "b"}'])
    with pytest.raises(DataError, match="duplicate id 'q1' \\(first on line 1\\)") as e:
        load_queries(p)
    assert (e.value.line, e.value.field) == (2, "qid")
    # a blank line between them: the error names lines, not record numbers; a BEIR file's own field
    p = _write(tmp_path, "corpus.jsonl", ['{"_id": "a", "title": "", "text": "x"}', "", '{"_id": "a", "text": "y"}'])
    with pytest.raises(DataError, match="duplicate id 'a' \\(first on line 1\\)") as e:
        load_documents(p)
    assert (e.value.line, e.value.field) == (3, "_id")
    with pytest.raises(DataError, match="file not found"):
        load_documents(tmp_path / "missing.jsonl")


def test_streamed_check_finds_a_repeated_id_like_the_loader(tmp_path):
    """export and the warmup stream the corpus; a repeated id is still the loader's error."""
    p = _write(tmp_path, "corpus.jsonl", ['{"_id": "a", "text": "x"}', '{"_id": "b", "text": "y"}', "",
                                          '{"_id": "a", "text": "z"}'])
    with pytest.raises(DataError, match="duplicate id 'a' \\(first on line 1\\)") as e:
        check_documents(p)
    assert (e.value.line, e.value.field) == (4, "_id")
    tsv = tmp_path / "docs.tsv"
    tsv.write_text("d1\tone\nd2\ttwo\nd3\tthree\n")
    assert check_documents(tsv) == 3


def test_repeats_inside_training_lists_and_json_objects_are_errors(tmp_path):
    rec = {"qid": "q1", "query": "a", "doc_ids": ["d1", "d2"], "doc_texts": ["x", "y"], "teacher_scores": [1.0, 0.0]}
    p = _write(tmp_path, "train.jsonl", [json.dumps(rec), json.dumps({**rec, "query": "b"})])
    with pytest.raises(DataError, match="duplicate id 'q1' \\(first on line 1\\)") as e:
        load_train(p)
    assert (e.value.line, e.value.field) == (2, "qid")
    p = _write(tmp_path, "train2.jsonl", [json.dumps({**rec, "doc_ids": ["d1", "d1"]})])
    with pytest.raises(DataError, match="lists 'd1' twice") as e:
        load_train(p)
    assert (e.value.line, e.value.field) == (1, "doc_ids")
    # one id, two texts: the second list would have been trained on the first list's text
    second = {**rec, "qid": "q2", "doc_ids": ["d3", "d2"], "doc_texts": ["z", "y, edited"]}
    p = _write(tmp_path, "train3.jsonl", [json.dumps(rec), json.dumps(second)])
    with pytest.raises(DataError, match="differs from the text of 'd2' on line 1") as e:
        load_train(p)
    assert (e.value.line, e.value.field) == (2, "doc_texts[1]")
    p = _write(tmp_path, "train4.jsonl", [json.dumps(rec), json.dumps({**second, "doc_texts": ["z", "y"]})])
    assert [ex.doc_texts for ex in load_train(p)] == [("x", "y"), ("z", "y")]
    # a category written twice: json keeps the last, and the first one's terms would vanish
    terms = tmp_path / "terms.json"
    terms.write_text('{"drugs": ["Kelquidone"], "codes": ["XR-7200"], "drugs": ["Ombrine"]}')
    with pytest.raises(DataError, match="'drugs': appears twice in one JSON object"):
        load_domain_terms(terms)
    p = _write(tmp_path, "docs.jsonl", ['{"doc_id": "a", "text": "x", "text": "y"}'])
    with pytest.raises(DataError, match="docs.jsonl:1: field 'text': appears twice") as e:
        load_documents(p)


def test_bad_scores_dictionary_qrels_and_terms(tmp_path):
    ex = {"qid": "q1", "query": "x", "doc_ids": ["a", "b"], "doc_texts": ["A", "B"], "teacher_scores": [1, "hi"]}
    with pytest.raises(DataError) as e:
        load_train(_write(tmp_path, "t.jsonl", [json.dumps(ex)]))
    assert e.value.field == "teacher_scores[1]"
    with pytest.raises(DataError) as e:
        load_dictionary(_write(tmp_path, "d.jsonl", ['{"term": "X", "definition": "y", "examples": []}']))
    assert e.value.field == "examples"
    with pytest.raises(DataError) as e:
        load_qrels(_write(tmp_path, "qrels.tsv", ["q1 0 d1 1", "q1 0 d2 high"]))
    assert (e.value.line, e.value.field) == (2, "grade")
    (tmp_path / "terms.json").write_text('{"jargon": [], "acronyms": []}')
    with pytest.raises(DataError, match="no terms"):
        load_domain_terms(tmp_path / "terms.json")
    (tmp_path / "terms2.json").write_text('{"jargon": ["two words"]}')
    with pytest.raises(DataError) as e:
        load_domain_terms(tmp_path / "terms2.json")
    assert e.value.field == "jargon[0]"


def test_registry_refuses_duplicates_and_creates_from_local_files(tmp_path):
    with pytest.raises(ValueError, match="already registered"):
        corpora.create_dataset("gatrocraptic", tmp_path, docs="docs.jsonl", queries="q.jsonl", qrels="r.tsv")
    _write(tmp_path, "docs.jsonl", ['{"doc_id": "a", "text": "x"}'])
    _write(tmp_path, "q.jsonl", ['{"qid": "q", "text": "x"}'])
    _write(tmp_path, "r.tsv", ["q 0 a 1"])
    name = f"local-{tmp_path.name}"
    ds = corpora.create_dataset(name, tmp_path, docs="docs.jsonl", queries="q.jsonl", qrels="r.tsv")
    assert corpora.get(name) == ds and ds.train is None
    with pytest.raises(KeyError, match="unknown data set"):
        corpora.get("nope")


def test_pyserini_and_beir_records_read_as_documents(tmp_path):
    """The id field names the format: a JsonCollection's 'contents' is the text; BEIR's title
    goes in front of its text, an empty one adds nothing."""
    from sparse_adapt.training.mlm_data import CorpusTexts

    ours = load_documents(GATROCRAPTIC.docs)
    pyserini = _write(tmp_path, "collection.jsonl", [json.dumps({"id": d.doc_id, "contents": d.text}) for d in ours])
    assert load_documents(pyserini) == ours
    beir = _write(tmp_path, "corpus.jsonl", [
        json.dumps({"_id": "a", "title": "Relief valves", "text": "They open at set pressure."}),
        json.dumps({"_id": "b", "title": "", "text": "No title here."}),
        json.dumps({"_id": "c", "title": "Only a title"}),
    ])
    expected = [("a", "Relief valves They open at set pressure."), ("b", "No title here."), ("c", "Only a title")]
    assert [tuple(d) for d in load_documents(beir)] == expected
    # warmup reads texts by byte offset, not through load_documents: it must read the same
    texts = CorpusTexts(beir)
    assert [texts.text(i) for i in range(len(texts))] == [t for _, t in expected]
    texts.close()


def test_tsv_documents_and_queries_read_like_jsonl(tmp_path):
    """A file named .tsv is 'id<TAB>text' (MS MARCO's collection.tsv and queries.tsv): the same
    records as our JSONL, a byte-order mark and CRLF accepted, text kept as written."""
    from sparse_adapt.training.mlm_data import CorpusTexts

    ours = load_documents(GATROCRAPTIC.docs)
    tsv = tmp_path / "collection.tsv"
    tsv.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(f"{d.doc_id}\t{d.text}" for d in ours).encode() + b"\r\n\r\n")
    assert load_documents(tsv) == ours == list(iter_documents(tsv))
    texts = CorpusTexts(tsv)  # warmup's reader, by byte offset
    assert [texts.text(i) for i in range(len(texts))] == [d.text for d in ours]
    texts.close()
    queries = _write(tmp_path, "queries.dev.tsv", ["1048585\twhat is paula deen's brother", "2\t  two  spaces  kept "])
    assert [tuple(q) for q in load_queries(queries)] == [("1048585", "what is paula deen's brother"),
                                                          ("2", "  two  spaces  kept ")]


@pytest.mark.parametrize("line, where", [
    ("d2\ttitle\tbody", "docs.tsv:2: expected 2 tab-separated columns 'doc_id<TAB>text', got 3"),
    ("d2 no tab", "docs.tsv:2: expected 2 tab-separated columns 'doc_id<TAB>text', got 1"),
    ("d2\t ", "docs.tsv:2: field 'text': expected a non-empty string"),
    ("\tsome text", "docs.tsv:2: field 'doc_id': expected a non-empty string"),
    ("d1\tagain", "docs.tsv:2: field 'doc_id': duplicate id 'd1' (first on line 1)"),
])
def test_tsv_errors_name_file_line_and_column(tmp_path, line, where):
    path = _write(tmp_path, "docs.tsv", ["d1\tfirst", line])
    with pytest.raises(DataError) as e:
        load_documents(path)
    assert str(e.value).startswith(f"{path.parent}/{where}")


def test_a_tab_separated_file_named_jsonl_says_how_tsv_is_read(tmp_path):
    path = _write(tmp_path, "docs.jsonl", ["d1\tfirst document"])
    with pytest.raises(DataError, match=r"docs.jsonl:1: invalid JSON .*; a tab-separated 'id<TAB>text' file is read "
                                        r"as such when its name ends in .tsv"):
        load_documents(path)
    plain = _write(tmp_path, "plain.jsonl", ["not json"])
    with pytest.raises(DataError) as e:
        load_queries(plain)
    assert "tab-separated" not in str(e.value)


def test_beir_queries_and_three_column_qrels(tmp_path):
    queries = _write(tmp_path, "queries.jsonl", [json.dumps({"_id": "q1", "text": "valve", "metadata": {}})])
    assert [tuple(q) for q in load_queries(queries)] == [("q1", "valve")]
    beir = _write(tmp_path, "test.tsv", ["query-id\tcorpus-id\tscore", "q1\td1\t2", "q1\td2\t0"])
    trec = _write(tmp_path, "qrels.tsv", ["q1 0 d1 2", "q1 0 d2 0"])
    assert load_qrels(beir) == load_qrels(trec) == {"q1": {"d1": 2, "d2": 0}}
    # the header is BEIR's first line only; elsewhere it is a bad grade
    late = _write(tmp_path, "late.tsv", ["q1\td1\t2", "query-id\tcorpus-id\tscore"])
    with pytest.raises(DataError) as e:
        load_qrels(late)
    assert (e.value.line, e.value.field) == (2, "grade")


@pytest.mark.parametrize("name, line, field", [
    ("docs.jsonl", '{"doc_id": "manual page 1", "text": "x"}', "doc_id"),
    ("corpus.jsonl", '{"_id": "manual\\tpage", "text": "x"}', "_id"),
    ("docs.tsv", "manual page 1\tx", "doc_id"),
    ("collection.jsonl", '{"id": "manual page 1", "contents": "x"}', "id"),
])
def test_a_document_id_holding_whitespace_is_refused(tmp_path, name, line, field):
    """TREC qrels and runs separate fields by whitespace: `adapt` trained, then failed reading back
    its own held-out qrels ("got 8 columns")."""
    p = tmp_path / name
    p.write_text(line + "\n")
    with pytest.raises(DataError, match="holds whitespace, which qrels and run files cannot") as e:
        load_documents(p)
    assert (e.value.line, e.value.field) == (1, field)


def test_an_id_longer_than_lucene_keeps_is_refused(tmp_path):
    """Anserini lost such a document, and every one after it, and said all were indexed."""
    p = tmp_path / "docs.jsonl"
    p.write_text('{"doc_id": "a", "text": "x"}\n' + json.dumps({"doc_id": "é" * 16384, "text": "y"}) + "\n")
    with pytest.raises(DataError, match="is 32,768 bytes long; a Lucene index keeps ids of up to 32,766") as e:
        load_documents(p)
    assert (e.value.line, e.value.field) == (2, "doc_id")
    p.write_text(json.dumps({"doc_id": "x" * 32766, "text": "y"}) + "\n")
    assert len(load_documents(p)[0].doc_id) == 32766


@pytest.mark.parametrize("text", ["\u200b", "\u0000", " \u200b\t\u2060 ", "\u0301\u0302", "\ufe0f"])
def test_a_text_of_invisible_characters_alone_is_refused(tmp_path, text):
    """It encoded to the model's empty-input vector, which matched generic queries."""
    p = tmp_path / "docs.jsonl"
    p.write_text(json.dumps({"doc_id": "a", "text": text}) + "\n")
    with pytest.raises(DataError, match="expected a non-empty string") as e:
        load_documents(p)
    assert (e.value.line, e.value.field) == (1, "text")


def test_a_query_id_holding_whitespace_is_refused(tmp_path):
    p = tmp_path / "queries.jsonl"
    p.write_text('{"qid": "q 1", "text": "reset"}\n')
    with pytest.raises(DataError, match="holds whitespace") as e:
        load_queries(p)
    assert (e.value.line, e.value.field) == (1, "qid")


def test_a_title_is_read_in_front_of_the_text_as_in_beir(tmp_path):
    p = tmp_path / "docs.jsonl"
    p.write_text('{"doc_id": "a", "title": "Zorblatt valve", "text": "It regulates pressure."}\n'
                 '{"doc_id": "b", "title": "", "text": "No title.", "url": "https://x"}\n')
    assert [d.text for d in load_documents(p)] == ["Zorblatt valve It regulates pressure.", "No title."]
    p.write_text('{"doc_id": "a", "title": 7, "text": "x"}\n')
    with pytest.raises(DataError, match="expected a string") as e:
        load_documents(p)
    assert (e.value.line, e.value.field) == (1, "title")


def test_a_title_s_surrounding_whitespace_is_not_kept_in_the_text(tmp_path):
    p = tmp_path / "docs.jsonl"
    p.write_text('{"doc_id": "a", "title": "  Zorblatt valve ", "text": "It regulates pressure."}\n'
                 '{"doc_id": "b", "title": "   ", "text": "No title."}\n')
    assert [d.text for d in load_documents(p)] == ["Zorblatt valve It regulates pressure.", "No title."]


def test_an_upper_case_tsv_suffix_is_read_as_tsv(tmp_path):
    """COLLECTION.TSV (a Windows-made name) is the same id<TAB>text file, not JSON lines."""
    p = _write(tmp_path, "COLLECTION.TSV", ["d1\tfirst text", "d2\tsecond text"])
    assert [tuple(d) for d in load_documents(p)] == [("d1", "first text"), ("d2", "second text")]
    q = _write(tmp_path, "QUERIES.Tsv", ["1\ta question"])
    assert [tuple(x) for x in load_queries(q)] == [("1", "a question")]


@pytest.mark.parametrize("header", ["doc_id\ttext", "id\tcontents", "QID\tquery"])
def test_a_tsv_header_line_is_refused_not_read_as_a_record(tmp_path, header):
    p = tmp_path / "docs.tsv"
    p.write_text(f"\n{header}\nd1\tfirst text\n")
    with pytest.raises(DataError, match="looks like a header line") as e:
        load_documents(p)
    assert e.value.line == 2
    p.write_text("d1\tid text\nid\ttext of the document called id\n")  # a header only on the first line
    assert [d.doc_id for d in load_documents(p)] == ["d1", "id"]


@pytest.mark.parametrize("name, text, line, field, says", [
    # int() read "1_0" as 10 and Arabic-Indic digits as numbers; float() too
    ("qrels.txt", "q1 0 d1 1_0\n", 1, "grade", "expected an integer, got '1_0'"),
    ("qrels.txt", "q1 0 d1 \u0661\n", 1, "grade", "expected an integer"),
    # a TREC line missing its doc id was read as BEIR's 3 columns, judging a document "0"
    ("qrels.txt", "q1 0 d1 1\nq1 0 2\n", 2, None, "3 columns where the file's first judgement has 4"),
    ("run.trec", "q1 Q0 d1 1 1_0 tag\n", 1, "score", "expected a number, got '1_0'"),
    ("run.trec", "q1 Q0 d1 1 \u0663 tag\n", 1, "score", "expected a number"),
    # a 400-digit integer score overflowed float() with a traceback
    ("run.json", '{"q1": {"d1": 1' + "0" * 400 + "}}", None, "q1.d1", "expected a finite number"),
    # shown as written, not as the "inf" it converts to
    ("run.trec", "q1 Q0 d1 1 1e400 tag\n", 1, "score", "expected a finite number, got 1e400"),
    ("run.json", '{"q1": {"d1": -1.5e400}}', None, "q1.d1", "expected a finite number, got -1.5e400"),
    # ranx's JSON layout holds numbers: a quoted score is another format
    ("run.json", '{"q1": {"d1": "1.0"}}', None, "q1.d1", "expected a JSON number, got the string '1.0'"),
])
def test_numbers_in_qrels_and_runs_are_plain_ascii_numbers(tmp_path, name, text, line, field, says):
    from sparse_adapt.data.runs import load_run

    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(says)) as e:
        (load_qrels if name.startswith("qrels") else load_run)(p)
    assert (e.value.line, e.value.field) == (line, field)


@pytest.mark.parametrize("name, text, line, field", [
    # `cat a.tsv b.tsv` of two files written with a byte-order mark: the second's is in an id
    ("docs.tsv", "d1\tfirst\n\ufeffd2\tsecond\n", 2, "doc_id"),
    ("queries.jsonl", '{"qid": "q\\u200b1", "text": "x"}\n', 1, "qid"),
    ("qrels.txt", "q1 0 d\u00001 1\n", 1, "doc_id"),
    ("run.trec", "q1 Q0 d\u001b[31m 1 2.0 tag\n", 1, "doc_id"),
    ("run.json", '{"q1": {"d\\u200b1": 2.0}}', None, "q1.d\u200b1"),
    ("run.json", '{"": {"d1": 2.0}}', None, ""),
])
def test_an_id_holding_an_invisible_or_control_character_is_refused(tmp_path, name, text, line, field):
    """It is invisible where the id is shown, and never equals the id another file spells without it."""
    from sparse_adapt.data.runs import load_run

    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    read = {"docs": load_documents, "queries": load_queries, "qrels": load_qrels, "run": load_run}[name.split(".")[0]]
    with pytest.raises(DataError, match="invisible or control character|an empty query id") as e:
        read(p)
    assert (e.value.line, e.value.field) == (line, field)


@pytest.mark.parametrize("doc_id", ["\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", "\U0001f469\u200d\U0001f52c", "co\u00adop"])
def test_ids_with_joiners_and_soft_hyphens_are_text_not_hidden_characters(tmp_path, doc_id):
    """ZWNJ spells Persian words, ZWJ joins emoji, a soft hyphen is part of a word: all format
    characters (Cf), none of them only hiding in an id."""
    p = tmp_path / "docs.jsonl"
    p.write_text(json.dumps({"doc_id": doc_id, "text": "x"}) + "\n", encoding="utf-8")
    assert load_documents(p)[0].doc_id == doc_id


def test_a_teacher_score_beyond_float32_is_refused_when_read(tmp_path):
    """It passed as finite, became inf in the float32 tensor, and stopped the run at distill."""
    good = {"qid": "q1", "query": "x", "doc_ids": ["a", "b"], "doc_texts": ["A", "B"], "teacher_scores": [1e38, -2.0]}
    p = _write(tmp_path, "train.jsonl", [json.dumps(good), json.dumps(dict(good, qid="q2", teacher_scores=[1e39, -2.0]))])
    with pytest.raises(DataError, match="within float32's range") as e:
        load_train(p)
    assert (e.value.line, e.value.field) == (2, "teacher_scores[0]")


@pytest.mark.parametrize("groups, field, says", [
    ({"g": ["q1", "q2", "q1"]}, "g", "lists 'q1' twice"),  # counted twice in the group's size, averaged once
    ({"g": ["q1"], "h": "q2"}, "h", "expected a list of query ids"),
    ({"g": ["q1", 2]}, "g", "expected a list of query ids"),
])
def test_a_query_group_lists_each_query_id_once(tmp_path, groups, field, says):
    from sparse_adapt.data import load_query_groups

    p = tmp_path / "groups.json"
    p.write_text(json.dumps(groups))
    with pytest.raises(DataError, match=re.escape(says)) as e:
        load_query_groups(p)
    assert e.value.field == field


@pytest.mark.parametrize("name", ["", "  ", "a\nb", "x\u001b[2J"])
def test_a_query_group_name_is_a_printable_name(tmp_path, name):
    from sparse_adapt.data import load_query_groups

    p = tmp_path / "groups.json"
    p.write_text(json.dumps({"control": ["q1"], name: ["q2"]}))
    with pytest.raises(DataError, match="a group name must be a printable name"):
        load_query_groups(p)


@pytest.mark.parametrize("change, field", [
    ({"doc_texts": ["\u200b", "B"]}, "doc_texts[0]"),  # encoded as [CLS] [SEP]: that candidate trained as nothing
    ({"qid": "q 1"}, "qid"),
    ({"doc_ids": ["a", "b c"]}, "doc_ids[1]"),
    ({"doc_texts": ["A", "B \ud800"]}, "doc_texts[1]"),  # JSON's escaped lone surrogate: no tokenizer takes it
])
def test_train_ids_are_ids_and_texts_are_visible(tmp_path, change, field):
    good = {"qid": "q1", "query": "x", "doc_ids": ["a", "b"], "doc_texts": ["A", "B"], "teacher_scores": [1, 0]}
    p = _write(tmp_path, "train.jsonl", [json.dumps({**good, **change})])
    with pytest.raises(DataError) as e:
        load_train(p)
    assert (e.value.line, e.value.field) == (1, field)


def test_a_dictionary_example_of_invisible_characters_is_refused(tmp_path):
    entry = {"term": "Zorblatt", "definition": "a valve", "examples": ["fine example", "\u001b"]}
    p = _write(tmp_path, "dictionary.jsonl", [json.dumps(entry)])
    with pytest.raises(DataError) as e:
        load_dictionary(p)
    assert (e.value.line, e.value.field) == (1, "examples[1]")


def test_a_missing_field_names_the_fields_the_record_has(tmp_path):
    """A docs line with 'body', a queries line with train.jsonl's 'query': "missing" alone named neither."""
    docs, queries = tmp_path / "docs.jsonl", tmp_path / "queries.jsonl"
    docs.write_text('{"doc_id": "d1", "body": "x"}\n', encoding="utf-8")
    queries.write_text('{"qid": "q1", "query": "x"}\n{}\n', encoding="utf-8")
    with pytest.raises(DataError, match=re.escape("field 'text': missing (there: 'doc_id', 'body')")):
        load_documents(docs)
    with pytest.raises(DataError, match=re.escape("field 'text': missing (there: 'qid', 'query')")):
        load_queries(queries)
    many = json.dumps({"doc_id": "d1", **{f"k{i}": i for i in range(8)}})
    docs.write_text(many + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=re.escape("missing (there: 'doc_id', 'k0', 'k1', 'k2', 'k3', 'k4', ...)")):
        load_documents(docs)


@pytest.mark.parametrize("text, says", [
    ('[\n  {"doc_id": "d1", "text": "x"}\n]\n', "JSONL holds one whole JSON object per line (this looks like one JSON "
                                                 "document spread over lines)"),
    ('{\n  "doc_id": "d1", "text": "x"\n}\n', "this looks like one JSON document spread over lines"),
    ('[{"doc_id": "d1", "text": "x"}]\n', "expected a JSON object, got list; JSONL holds one JSON object per line, "
                                          "not an array of them"),
])
def test_a_json_document_given_as_jsonl_is_said_to_be_one(tmp_path, text, says):
    docs = tmp_path / "docs.jsonl"
    docs.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(says)) as e:
        load_documents(docs)
    assert e.value.line == 1


def test_a_broken_jsonl_line_gets_no_hint_about_json_documents(tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"doc_id": "d1", "text": "x"}\n{"doc_id": "d2", "text": "y"\n', encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_documents(docs)
    assert e.value.line == 2 and "JSONL holds" not in str(e.value)


# ---------------------------------------------------------------------------- validations each on their own
def _read_error(tmp_path, name, text, read):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as e:
        read(p)
    return e.value


def _train_line(**change):
    return json.dumps({"qid": "q1", "query": "x", "doc_ids": ["a", "b"], "doc_texts": ["A", "B"],
                       "teacher_scores": [1.0, 0.0], **change}) + "\n"


@pytest.mark.parametrize("change, field, says", [
    ({"doc_ids": ["a"], "doc_texts": ["A"], "teacher_scores": [1.0]}, "doc_ids", "needs at least 2 candidates"),
    ({"doc_texts": ["A"]}, "doc_texts", "has 1 entries but doc_ids has 2"),
    ({"teacher_scores": [True, 0.0]}, "teacher_scores[0]", "expected a number, got True"),  # not a 1
    ({"teacher_scores": [1.0, -1e39]}, "teacher_scores[1]", "within float32's range"),  # -inf in the tensor
])
def test_each_train_line_check_names_its_field(tmp_path, change, field, says):
    e = _read_error(tmp_path, "train.jsonl", _train_line(**change), load_train)
    assert (e.line, e.field) == (1, field) and says in e.message


@pytest.mark.parametrize("name, text, read", [
    ("docs.jsonl", "", load_documents),
    ("docs.jsonl", "\n  \n", load_documents),
    ("queries.tsv", "\n", load_queries),
    ("train.jsonl", "\n", load_train),
])
def test_a_file_of_no_records_is_an_error(tmp_path, name, text, read):
    e = _read_error(tmp_path, name, text, read)
    assert (e.line, e.message) == (None, "no records in file")


def test_a_json_error_in_a_whole_file_names_the_line_it_is_on(tmp_path):
    e = _read_error(tmp_path, "terms.json", '{\n  "jargon": [\n    "Zorblatt",\n  ]\n}\n', load_domain_terms)
    assert e.line == 4 and e.message.startswith("invalid JSON")
    assert str(e).startswith(f"{tmp_path / 'terms.json'}:4: invalid JSON")


def test_a_field_holding_a_line_break_is_shown_escaped_on_one_line(tmp_path):
    e = _read_error(tmp_path, "docs.jsonl", '{"doc_id": "a", "text": "x", "a\\nerror": 1, "a\\nerror": 2}\n',
                    load_documents)
    assert e.field == "a\nerror" and str(e) == (f"{tmp_path / 'docs.jsonl'}:1: field 'a\\nerror': appears twice in one "
                                                "JSON object (only the last would count)")


@pytest.mark.parametrize("obj, field, says", [
    ({"jargon": ["co\u00adop"]}, "jargon[0]", "a term must be printable"),  # a soft hyphen: visible, not printable
    ({"jargon\nx": ["Zorblatt"]}, None, "a category must be a printable name"),
    ({"jargon": "Zorblatt"}, "jargon", "expected a list of terms"),  # not three one-letter terms
    # Printable, yet no name: a blank category would head a table column of nothing.
    ({"": ["Zorblatt"]}, None, "a category must be a printable name"),
    ({"  ": ["Zorblatt"]}, None, "a category must be a printable name"),
    # Any Unicode space splits a term, not only " ": the message says why, not "printable".
    ({"jargon": ["two words"]}, "jargon[0]", "a term must be one word without spaces"),
    ({"jargon": ["two\u2003words"]}, "jargon[0]", "a term must be one word without spaces"),
    ({"jargon": ["two\twords"]}, "jargon[0]", "a term must be one word without spaces"),
    # a lone surrogate is no text: said so, not only "not printable"
    ({"jargon": ["x\ud800"]}, "jargon[0]", "contains an unpaired surrogate"),
])
def test_domain_terms_checks_name_their_field(tmp_path, obj, field, says):
    e = _read_error(tmp_path, "terms.json", json.dumps(obj), load_domain_terms)
    assert e.field == field and says in e.message


def test_every_term_of_every_category_is_used_in_file_order(tmp_path):
    from sparse_adapt.data import flat_terms

    p = tmp_path / "terms.json"
    p.write_text(json.dumps({"codes": ["XR-7200", "QX-9"], "drugs": [], "places": ["Zu\u0308rich"]}))
    assert flat_terms(load_domain_terms(p)) == ["XR-7200", "QX-9", "Z\u00fcrich"]


def test_a_query_groups_file_that_is_no_object_is_said_to_be_one(tmp_path):
    from sparse_adapt.data import load_query_groups

    e = _read_error(tmp_path, "groups.json", '["q1", "q2"]', load_query_groups)
    assert (e.line, e.field, e.message) == (None, None, "expected an object of group -> list of qids, got list")


def test_domain_terms_are_composed_and_one_empty_category_beside_others_is_fine(tmp_path):
    from sparse_adapt.data import mentions_term

    p = tmp_path / "terms.json"
    p.write_text(json.dumps({"places": ["Zu\u0308rich"], "drugs": [], "codes": ["XR-7200"]}))
    assert load_domain_terms(p) == {"places": ["Z\u00fcrich"], "drugs": [], "codes": ["XR-7200"]}
    assert mentions_term("the xr-7200 unit", ["XR-7200"]) and not mentions_term("pumps", ["umps"])
    assert not mentions_term("the pumps", ["pump"])


def test_a_tsv_header_padded_with_spaces_is_still_refused(tmp_path):
    # a spreadsheet export pads its cells; read as a record it became a document called "doc_id "
    p = tmp_path / "docs.tsv"
    p.write_text("doc_id \t Text \nd1\tfirst text\n")
    with pytest.raises(DataError, match="looks like a header line") as e:
        load_documents(p)
    assert e.value.line == 1


@pytest.mark.parametrize("record", [
    {"doc_id": "a", "title": "Valve \ud800", "text": "It regulates pressure."},
    {"_id": "a", "title": "Valve \ud800", "text": "It regulates pressure."},
], ids=["ours", "beir"])
def test_a_lone_surrogate_in_a_title_is_refused_like_one_in_the_text(tmp_path, record):
    e = _read_error(tmp_path, "docs.jsonl", json.dumps(record) + "\n", load_documents)
    assert (e.line, e.field) == (1, "title") and "contains an unpaired surrogate" in e.message


def test_a_record_holding_two_id_fields_is_read_by_the_first_format(tmp_path):
    """Ours before BEIR's before Pyserini's: the id (and so the duplicate check) is the first
    format's, in the loader and the streamed check alike."""
    p = _write(tmp_path, "docs.jsonl", [
        json.dumps({"doc_id": "a", "_id": "same", "text": "first"}),
        json.dumps({"doc_id": "b", "_id": "same", "text": "second"}),
        json.dumps({"_id": "c", "id": "same", "title": "Third", "text": "text", "contents": "other"}),
    ])
    expected = [("a", "first"), ("b", "second"), ("c", "Third text")]
    assert [tuple(d) for d in load_documents(p)] == expected
    assert [tuple(d) for d in iter_documents(p)] == expected and check_documents(p) == 3


def test_a_pyserini_record_s_contents_are_kept_as_written_like_our_text(tmp_path):
    # only BEIR's records are collapsed (as ir_datasets reads them); byte-level BPE sees the spaces
    text = "  Relief valves\n open at  set pressure. "
    pyserini = _write(tmp_path, "collection.jsonl", [json.dumps({"id": "a", "contents": text})])
    ours = _write(tmp_path, "docs.jsonl", [json.dumps({"doc_id": "a", "text": text})])
    assert [tuple(d) for d in load_documents(pyserini)] == [tuple(d) for d in load_documents(ours)] == [("a", text)]


def test_a_tsv_header_is_only_a_first_line_naming_an_id_and_a_text_column(tmp_path):
    p = tmp_path / "docs.tsv"
    p.write_text("id\tthe first document, whose id is id\nqid\tquery\n")  # neither is a header line
    assert [tuple(d) for d in load_documents(p)] == [("id", "the first document, whose id is id"), ("qid", "query")]


def test_beir_records_of_no_text_and_beir_query_whitespace(tmp_path):
    e = _read_error(tmp_path, "corpus.jsonl", '{"_id": "a", "title": " ", "text": "\\u200b"}\n', load_documents)
    assert (e.line, e.field) == (1, "text") and "a BEIR record needs a non-empty 'title' or 'text'" in e.message
    p = tmp_path / "queries.jsonl"
    p.write_text('{"_id": "q1", "text": "  relief\\n valve  "}\n{"qid": "q2", "_id": "x", "text": "kept  as is"}\n')
    assert [tuple(q) for q in load_queries(p)] == [("q1", "relief valve"), ("q2", "kept  as is")]


def test_a_valid_json_line_with_a_tab_gets_no_tsv_hint(tmp_path):
    """The hint is for a line that is no JSON; this one is JSON, just no object."""
    e = _read_error(tmp_path, "docs.jsonl", '["d1",\t"first document"]\n', load_documents)
    assert e.line == 1 and e.message.startswith("expected a JSON object, got list") and "tab-separated" not in str(e)


def test_the_streamed_check_finds_a_repeat_in_a_file_of_two_documents(tmp_path):
    p = _write(tmp_path, "docs.jsonl", ['{"doc_id": "a", "text": "x"}', '{"doc_id": "a", "text": "y"}'])
    with pytest.raises(DataError, match="duplicate id 'a' \\(first on line 1\\)"):
        check_documents(p)


def test_find_documents_returns_only_the_ids_asked_for(tmp_path):
    from sparse_adapt.data import find_documents

    p = _write(tmp_path, "docs.jsonl", [json.dumps({"doc_id": f"d{i}", "text": f"text {i}"}) for i in range(5)])
    assert find_documents(p, ["d3", "d1", "d9"]) == {"d1": "text 1", "d3": "text 3"}
    assert find_documents(p, []) == {}


@pytest.mark.parametrize("text, line, field, says", [
    ("q\u00001 0 d1 1\n", 1, "qid", "invisible or control character"),
    ("q1 0 d1 1\nq1 0 d1 2\n", 2, "grade", "q1 d1 is judged 1 on an earlier line and 2 here"),
])
def test_qrels_check_the_query_id_and_refuse_two_grades_for_one_document(tmp_path, text, line, field, says):
    e = _read_error(tmp_path, "qrels.txt", text, load_qrels)
    assert (e.line, e.field) == (line, field) and says in e.message


def test_qrels_keep_a_judgement_repeated_alike_and_negative_grades(tmp_path):
    p = _write(tmp_path, "qrels.txt", ["q1 0 d1 1", "q1 0 d1 1", "q1 0 d2 -1"])
    assert load_qrels(p) == {"q1": {"d1": 1, "d2": -1}}


def test_qrels_grades_at_the_limit_are_grades_and_one_past_it_names_the_bounds(tmp_path):
    p = _write(tmp_path, "qrels.txt", ["q1 0 d1 1000000", "q1 0 d2 -1000000"])
    assert load_qrels(p) == {"q1": {"d1": 1_000_000, "d2": -1_000_000}}
    e = _read_error(tmp_path, "qrels.txt", "q1 0 d1 1\nq1 0 d2 -1000001\n", load_qrels)
    assert (e.line, e.field) == (2, "grade")
    assert e.message == "expected a relevance grade between -1000000 and 1000000, got -1000001"


def test_qrels_skip_blank_lines_and_a_line_of_neither_layout_says_both(tmp_path):
    p = _write(tmp_path, "qrels.txt", ["q1 0 d1 1", "", "   ", "q1 0 d2 0"])
    assert load_qrels(p) == {"q1": {"d1": 1, "d2": 0}}
    # five columns are neither TREC's nor BEIR's, whatever the first line was
    e = _read_error(tmp_path, "qrels.txt", "q1 0 d1 1\nq1 0 d2 1 extra\n", load_qrels)
    assert (e.line, e.field) == (2, None)
    assert e.message == "expected 4 columns 'qid 0 doc_id grade' (or BEIR's 3), got 5"


def test_query_groups_naming_unknown_queries_are_an_error(tmp_path):
    from sparse_adapt.data import check_query_groups

    check_query_groups("groups.json", {"g": ["q1", "q2"]}, {"q1", "q2", "q3"})
    with pytest.raises(DataError, match="groups.json: field 'h': lists unknown query ids: 'q9'"):
        check_query_groups("groups.json", {"g": ["q1"], "h": ["q2", "q9"]}, {"q1", "q2"})
    # up to five of them, in the group's order
    with pytest.raises(DataError, match=re.escape("lists unknown query ids: 'q7', 'q3', 'q8', 'q9', 'q10'") + "$"):
        check_query_groups("groups.json", {"g": ["q1", "q7", "q3", "q8", "q9", "q10", "q11"]}, {"q1"})


@pytest.mark.parametrize("name, text, line, field, says", [
    ("run.trec", "q\u001b1 Q0 d1 1 2.0 tag\n", 1, "qid", "invisible or control character"),
    ("run.trec", "q1 Q0 d1 1 2.0 tag\nq1 Q0 d1 2 1.0 tag\n", 2, "doc_id", "'d1' is ranked twice for query 'q1'"),
    ("run.trec", "q1 Q0 d1 1 2.0 tag extra\n", 1, None, "expected 6 columns"),
    ("run.json", '{"q1": {}}', None, None, "no ranked documents in file"),
    ("run.json", '{"q1": {"d 1": 1.0}}', None, "q1.d 1", "holds whitespace"),
    ("run.json", '{"q1": [1.0]}', None, "q1", "expected an object of doc_id -> score"),
    ("run.json", '{"q1": {"\\ud800": 1.0}}', None, "q1.\ud800", "invisible or control character U+D800"),
    ("run.json", '{"q1": {"d1": true}}', None, "q1.d1", "expected a number, got True"),  # JSON's true is an int to Python
])
def test_each_run_file_check_names_its_line_and_field(tmp_path, name, text, line, field, says):
    from sparse_adapt.data.runs import load_run

    e = _read_error(tmp_path, name, text, load_run)
    assert (e.line, e.field) == (line, field) and says in e.message


def test_a_run_skips_blank_lines_and_a_json_run_is_known_by_its_suffix_in_any_case(tmp_path):
    from sparse_adapt.data.runs import load_run

    trec = _write(tmp_path, "run.trec", ["q1 Q0 d1 1 2.0 tag", "", "   ", "q1 Q0 d2 2 1.5 tag"])
    assert load_run(trec) == {"q1": {"d1": 2.0, "d2": 1.5}}
    upper = tmp_path / "RUN.JSON"  # as a Windows tool names it
    upper.write_text('{"q1": {"d1": 2.0}}')
    assert load_run(upper) == {"q1": {"d1": 2.0}}
    e = _read_error(tmp_path, "run.json", '[["q1", "d1", 2.0]]', load_run)
    assert (e.line, e.field) == (None, None)
    assert e.message == "expected an object of query id -> {doc_id: score}, got list"


def test_a_key_repeated_before_the_last_one_is_the_one_named(tmp_path):
    p = _write(tmp_path, "docs.jsonl", ['{"doc_id": "a", "doc_id": "b", "text": "x"}'])
    with pytest.raises(DataError, match="docs.jsonl:1: field 'doc_id': appears twice") as e:
        load_documents(p)
    assert e.value.field == "doc_id"


@pytest.mark.parametrize("text", ['[{"scale": 1}]', '"text"', "3", "{", ""])
def test_a_record_that_is_no_json_object_reads_as_none(tmp_path, text):
    # a damaged or foreign record beside an output is treated as absent, not a crash in .get()
    from sparse_adapt.data.reading import read_record

    (tmp_path / "record.json").write_text(text, encoding="utf-8")
    assert read_record(tmp_path / "record.json") == {}
    assert read_record(tmp_path / "missing.json") == {}


def test_the_data_docs_name_modules_and_functions_that_exist():
    # "Where things are" and the :func: references are how a reader finds a loader: a module or
    # function renamed without them sends the reader nowhere.
    import importlib
    import inspect
    import pkgutil

    import sparse_adapt.data as package

    modules = {m.name for m in pkgutil.iter_modules(package.__path__)}
    assert set(re.findall(r"``(\w+)\.py``", package.__doc__)) == modules
    for name in package.__all__:  # each public function and class lives in a module the map names
        obj = getattr(package, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert obj.__module__.rpartition(".")[2] in modules, (name, obj.__module__)
    for module in [package, *(importlib.import_module(f"{package.__name__}.{m}") for m in modules)]:
        texts = [module.__doc__ or ""] + [getattr(o, "__doc__", None) or "" for o in vars(module).values()
                                          if getattr(o, "__module__", None) == module.__name__]
        for ref in re.findall(r":(?:func|class|data|mod):`([\w.]+)`", "\n".join(texts)):
            head, _, attr = ref.rpartition(".")
            found = hasattr(module, ref) or (head and hasattr(importlib.import_module(head), attr))
            assert found, (module.__name__, ref)


def test_float32_s_largest_value_is_read_and_the_next_double_up_refused(tmp_path):
    # the bound was 3.4028234e38, below float32's largest finite value: a score float32 holds was refused
    import math

    import numpy as np
    import torch

    top = float(np.finfo(np.float32).max)
    over = math.nextafter(top, math.inf) * 2  # well past float32's rounding to its largest value
    rows = [{"qid": "q1", "query": "x", "doc_ids": ["a", "b"], "doc_texts": ["A", "B"], "teacher_scores": [top, -top]}]
    p = _write(tmp_path, "train.jsonl", [json.dumps(r) for r in rows])
    [record] = load_train(p)
    assert math.isfinite(torch.tensor(record.teacher_scores, dtype=torch.float32).max().item())
    p.write_text(json.dumps(dict(rows[0], teacher_scores=[over, 0.0])) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="within float32's range"):
        load_train(p)
