"""``adapt`` end to end on tiny models: generated files, resume, given files untouched, refusals,
and the CLI's one-line errors (exit 2) for a corpus without terms, an absent term, a bad teacher."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from sparse_adapt.cli import main
from sparse_adapt.corpus.adapt import AdaptMismatchError, run_adapt
from sparse_adapt.errors import ConfigError, SparseAdaptError
from sparse_adapt.data import load_dictionary, load_documents, load_domain_terms, load_qrels, load_queries, load_train
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.progress import Hooks
from tests.conftest import _tokenizer, make_tiny_bert
from tests.training.test_stages import _params

DOCS = [
    ("d1", "The Zentrofax pump moves coolant through the reactor loop every hour of the day."),
    ("d2", "Check the Zentrofax seals monthly because worn seals leak coolant into the concrete pit."),
    ("d3", "Operators replaced a zentrofax rated at forty bar after the spring inspection of the loop."),
    ("d4", "A Zentrofax is a pump that circulates coolant; the spare unit sits in the east hall."),
    ("d5", "The court trial was delayed until Monday while the jury heard two more witnesses."),
    ("d6", "Fresh mint leaves steeped in hot water make a calming herbal tea before bed."),
    ("d7", "The cycling time trial starts at noon and riders set off one minute apart."),
    ("d8", "Our bakery sells sourdough loaves and rye bread every morning from seven."),
]
# One epoch per stage: the tests check plumbing, not learning.
CONFIG = {"warmup": {"epochs": 1}, "dictionary": {"epochs": 1}, "distill": {"epochs": 1, "batch_size": 4}}


def _write_docs(path, docs=DOCS):
    path.write_text("".join(json.dumps({"doc_id": i, "text": t}) + "\n" for i, t in docs))
    return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("adapt")
    base = root / "tiny"
    make_tiny_bert().save_pretrained(base)
    teacher = root / "ce"
    torch.manual_seed(0)
    tok = _tokenizer()
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128, num_labels=1,
                     initializer_range=0.3)
    model = BertForSequenceClassification(cfg)
    with torch.no_grad():  # a random head's logits barely differ; widen them past min_spread (1 logit)
        model.classifier.weight.mul_(30.0)
    model.save_pretrained(teacher)
    tok.save_pretrained(teacher)
    (root / "config.json").write_text(json.dumps(CONFIG))
    return {"root": root, "base": str(base), "teacher": str(teacher), "config": root / "config.json",
            "corpus": _write_docs(root / "docs.jsonl")}


@pytest.fixture(scope="module")
def finished(setup):
    """The module's default adapt run, finished: trained by the first test that needs it, and
    resumed (nothing left to train) by each later one, whatever order they run in."""
    out = setup["root"] / "run"
    _adapt(setup, out)
    return out


class Recorder:
    def __init__(self):
        self.tasks, self.messages = [], []

    def hooks(self):
        def task(description, total):
            self.tasks.append(description)
            return type("T", (), {"advance": lambda *a, **k: None})()

        return Hooks(message=self.messages.append, task=task)


def _adapt(s, out, hooks=None, **kw):
    return run_adapt(s["corpus"], out, s["base"], config=s["config"], teacher=s["teacher"],
                     hooks=hooks or Hooks(), **kw)


def test_adapt_generates_every_input_trains_and_resumes(setup):
    out = setup["root"] / "run"
    rec = Recorder()
    result = _adapt(setup, out, rec.hooks())
    assert result.final == out / "final" and result.files.generated == ["terms", "dictionary", "train"]
    terms = load_domain_terms(out / "domain_terms.json")
    assert "Zentrofax" in terms["jargon"]
    [entry] = [e for e in load_dictionary(out / "dictionary.jsonl") if e.term == "Zentrofax"]
    assert entry.definition == "a pump that circulates coolant"
    assert "harvested" in json.loads((out / "dictionary.jsonl").read_text().splitlines()[0])
    train = load_train(out / "train.jsonl")
    held = load_queries(out / "heldout_queries.jsonl")
    assert train and held and not {q.qid for q in held} & {t.qid for t in train}
    assert (out / "heldout_qrels.tsv").read_text().strip()
    assert json.loads((out / "adapt.json").read_text())["options"]["lang"] == "en"  # detected: the run says which
    mined = json.loads((out / "mining.json").read_text())
    assert {t for c in mined if c["kept"] for t in c["forms"]} == {t for ts in terms.values() for t in ts}
    model = SpladeEncoder.from_pretrained(out / "final")
    assert model.tokenizer.convert_tokens_to_ids("zentrofax") in model.settings.domain_token_ids
    # progress on every long step: mining, harvesting, encoding for negatives, teacher, each stage
    for task in ("mining terms", "harvesting definitions", "encoding documents", "warmup", "dictionary", "distill"):
        assert task in rec.tasks
    assert any(t.startswith("teacher ") for t in rec.tasks)

    stamps = {f: (out / f).stat().st_mtime_ns for f in ("domain_terms.json", "dictionary.jsonl", "train.jsonl")}
    rec2 = Recorder()
    _adapt(setup, out, rec2.hooks())
    assert {f: (out / f).stat().st_mtime_ns for f in stamps} == stamps  # reused, not regenerated
    assert any("resuming: extend, warmup, dictionary, distill already complete" in m for m in rec2.messages)
    assert not any(t.startswith("teacher ") for t in rec2.tasks)


def test_adapts_final_is_the_average_of_extend_and_distill_unless_the_config_says_otherwise(setup):
    out = setup["root"] / "run"
    _adapt(setup, out)  # the run of the test above (trained here when this test runs alone)
    start, trained, final = (_params(out / p) for p in ("training/extend", "training/distill", "final"))
    moved = [k for k in final if final[k].is_floating_point() and not k.endswith("bias") and not torch.equal(start[k], trained[k])]
    assert moved
    for key in moved:
        torch.testing.assert_close(final[key], 0.5 * trained[key] + 0.5 * start[key], rtol=0, atol=1e-5, msg=key)
    mine = setup["root"] / "no-average.json"
    mine.write_text(json.dumps({**CONFIG, "distill": {**CONFIG["distill"], "interpolate": 0.0}}))
    other = setup["root"] / "run-no-average"
    run_adapt(setup["corpus"], other, setup["base"], config=mine, teacher=setup["teacher"])
    trained, final = _params(other / "training/distill"), _params(other / "final")
    assert all(torch.equal(trained[k], final[k]) for k in trained)


def test_a_rerun_keeps_an_edited_final_until_training_rewrites_it(setup):
    import shutil

    out = setup["root"] / "run-edited"
    _adapt(setup, out)
    card = out / "final" / "README.md"
    card.write_text("notes for my team\n")
    _adapt(setup, out)  # trains nothing: training/final is the one DIR/final was copied from
    assert card.read_text() == "notes for my team\n"
    shutil.rmtree(out / "training" / "distill")
    _adapt(setup, out)  # distill trains again: training/final is rewritten, and copied
    assert card.read_text() == (out / "training" / "final" / "README.md").read_text() != "notes for my team\n"
    made = json.loads((out / "final" / "made_from.json").read_text())
    assert made == json.loads((out / "training" / "final" / "made_from.json").read_text())


def test_an_edited_generated_file_is_said_and_overwrite_trains_again_on_it(setup):
    """The rerun after an edit said "pass --overwrite", and adapt --overwrite never reached training."""
    out = setup["root"] / "run-edit-dictionary"
    _adapt(setup, out)
    path = out / "dictionary.jsonl"
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    entries[0]["definition"] = "a coolant pump of the reactor loop"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    with pytest.raises(AdaptMismatchError, match=r"training was trained on other inputs \[dictionary\] than .* pass --overwrite to train "
                                                 "again on them"):
        _adapt(setup, out)
    before = (out / "training" / "run.json").read_text()
    card = out / "final" / "README.md"
    card.write_text(card.read_text() + "Approved for the support search.\n")  # the user's words in the old card
    (out / "final-card.edited.md").write_text("an earlier copy")  # never written over
    rec = Recorder()
    _adapt(setup, out, rec.hooks(), overwrite=True)
    assert (out / "training" / "run.json").read_text() != before  # trained on the edited dictionary
    assert [json.loads(line) for line in path.read_text().splitlines()] == entries  # the edit stays
    assert any("discarding the run in" in m for m in rec.messages), rec.messages
    # the retrained model gets its own card; the edited one is kept beside it
    assert "Approved" not in card.read_text() and card.read_text() == (out / "training/final/README.md").read_text()
    assert (out / "final-card.edited-2.md").read_text().endswith("Approved for the support search.\n")
    assert (out / "final-card.edited.md").read_text() == "an earlier copy"
    assert any("was edited since this run wrote it: kept as" in m for m in rec.messages), rec.messages


def test_a_card_this_run_wrote_is_replaced_without_a_copy(setup, tmp_path):
    """Only an edited card is copied aside: the pipeline's and the summary's own are not."""
    from sparse_adapt.corpus.adapt_folder import keep_edited_card

    out = tmp_path / "run"
    (out / "final").mkdir(parents=True)
    card = out / "final" / "README.md"
    card.write_text("the pipeline's card")
    ours = {hashlib.sha256(card.read_bytes()).hexdigest()}
    assert keep_edited_card(out, ours) is None and keep_edited_card(out, {None}) is not None
    card.write_text("the summary's card")
    (out / "summary.json").write_text(json.dumps({"card_sha256": hashlib.sha256(card.read_bytes()).hexdigest()}))
    assert keep_edited_card(out, {None}) is None
    (out / "summary.json").write_text("[damaged")  # recognises nothing: the card is kept
    assert keep_edited_card(out, {None}).read_text() == "the summary's card"


def test_a_card_sparse_adapt_wrote_is_known_with_summary_and_training_deleted(setup, tmp_path):
    """Their hashes were the only record: a rerun after deleting DIR/training and summary.json
    copied the unedited card aside as "edited"."""
    from sparse_adapt.corpus.adapt_folder import keep_edited_card
    from sparse_adapt.modeling.card import write_model_card

    out = tmp_path / "run"
    (out / "final").mkdir(parents=True)
    card = write_model_card(out / "final", SpladeEncoder.from_pretrained(setup["base"]))
    assert keep_edited_card(out, {None}) is None and not (out / "final-card.edited.md").exists()
    card.write_text(card.read_text().replace("# ", "# Our team's ", 1))
    assert keep_edited_card(out, {None}).read_text() == card.read_text()


def test_inputs_made_from_an_edited_terms_file_are_made_again_unless_edited_too(setup):
    """A term added to DIR/domain_terms.json trained with the dictionary and the queries of the
    old terms: no entry for it, its documents' queries labelled as if it were no term."""
    out = setup["root"] / "run-edit-terms"
    _adapt(setup, out)
    terms = out / "domain_terms.json"
    edited = json.loads(terms.read_text())
    edited.setdefault("jargon", []).append("sourdough")
    terms.write_text(json.dumps(edited))
    # refused before anything is made again: the files stay those DIR/training and DIR/final were trained on
    before = {f: (out / f).read_bytes() for f in ("dictionary.jsonl", "train.jsonl")}
    with pytest.raises(AdaptMismatchError, match=rf"domain_terms.json was edited since {re.escape(str(out / 'training'))} "
                                                 r"was trained: pass --overwrite to make dictionary.jsonl and train.jsonl "
                                                 "again from it"):
        _adapt(setup, out)
    assert {f: (out / f).read_bytes() for f in before} == before
    rec = Recorder()
    _adapt(setup, out, rec.hooks(), overwrite=True)
    assert "sourdough" in {e.term for e in load_dictionary(out / "dictionary.jsonl")}
    made = [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]
    assert any(r["qid"].startswith("d8-") and r["kind"] != "control" for r in made)  # a term's document now
    said = " ".join(rec.messages)
    assert "domain_terms.json changed since dictionary.jsonl was made from it" in said
    assert "domain_terms.json changed since train.jsonl was made from it" in said

    edited["jargon"].remove("sourdough")  # the terms change again, and the user edited the queries meanwhile
    terms.write_text(json.dumps(edited))
    queries = (out / "train.jsonl").read_text().splitlines()
    (out / "train.jsonl").write_text("\n".join(queries[:-1]) + "\n")
    rec = Recorder()
    _adapt(setup, out, rec.hooks(), overwrite=True)
    assert (out / "train.jsonl").read_text().splitlines() == queries[:-1]  # theirs, kept
    assert "sourdough" not in {e.term for e in load_dictionary(out / "dictionary.jsonl")}  # unedited: made again
    assert any(m.startswith("warning: ") and "train.jsonl was made from an earlier domain_terms.json" in m
               for m in rec.messages), rec.messages

    # killed before its first stage saved a model: nothing was trained on the old terms, so no refusal
    import shutil

    for p in (out / "training").iterdir():
        if p.is_dir():
            shutil.rmtree(p)
    assert sorted(p.name for p in (out / "training").iterdir()) == ["run.json", "train_log.jsonl"]
    edited["jargon"].append("sourdough")
    terms.write_text(json.dumps(edited))
    _adapt(setup, out)
    assert "sourdough" in {e.term for e in load_dictionary(out / "dictionary.jsonl")}


def test_given_files_are_used_and_never_written(setup):
    out = setup["root"] / "given"
    mine = setup["root"] / "my_terms.json"
    mine.write_text(json.dumps({"jargon": ["Zentrofax"]}))
    before = mine.read_bytes()
    result = _adapt(setup, out, terms=mine)
    assert result.files.terms == mine and mine.read_bytes() == before
    assert not (out / "domain_terms.json").exists() and result.files.generated == ["dictionary", "train"]


def test_a_different_run_or_a_foreign_directory_is_refused(setup, finished):
    out = finished
    with pytest.raises(AdaptMismatchError, match="seed"):
        _adapt(setup, out, seed=5)
    with pytest.raises(AdaptMismatchError, match="options"):  # --glosses makes other inputs
        _adapt(setup, out, glosses=True)
    foreign = setup["root"] / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(AdaptMismatchError, match="holds no adapt.json: refusing to write an adapt run into it; "
                                                 "--out names a new folder for the run"):
        _adapt(setup, foreign)
    assert (foreign / "notes.txt").read_text() == "mine"
    with pytest.raises(AdaptMismatchError, match="notes.txt is a file: refusing"):
        _adapt(setup, foreign / "notes.txt")
    for damaged in ("", "[1]", "{"):  # JSONDecodeError / AttributeError tracebacks before
        (foreign / "adapt.json").write_text(damaged)
        with pytest.raises(AdaptMismatchError, match=r"adapt.json is damaged .*pass --overwrite"):
            _adapt(setup, foreign)
        assert (foreign / "notes.txt").read_text() == "mine"


def test_overwrite_discards_a_different_run_but_keeps_what_the_user_gave(setup):
    import shutil

    out = setup["root"] / "overwritten"
    _adapt(setup, out)
    (out / "notes.txt").write_text("mine")  # not the run's: stays
    terms = out / "domain_terms.json"  # the generated file, edited and given back as --terms
    edited = json.loads(terms.read_text())
    edited["jargon"] = ["Zentrofax"]
    terms.write_text(json.dumps(edited))
    old_train = (out / "train.jsonl").read_bytes()
    card = out / "final" / "README.md"
    card.write_text(card.read_text() + "Signed off.\n")  # the user's words: kept aside, not discarded
    with pytest.raises(AdaptMismatchError, match="pass --overwrite"):
        _adapt(setup, out, terms=terms)
    rec = Recorder()
    # a teacher that does not load fails before the run is discarded: nothing of it goes
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(SparseAdaptError, match="no-such-teacher"):
        run_adapt(setup["corpus"], out, setup["base"], config=setup["config"], teacher=str(setup["root"] / "no-such-teacher"),
                  hooks=Hooks(), terms=terms, seed=4, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == before and (out / "train.jsonl").read_bytes() == old_train
    result = _adapt(setup, out, rec.hooks(), terms=terms, seed=4, overwrite=True)
    assert (out / "final-card.edited.md").read_text().endswith("Signed off.\n")
    # says what differed, as the refusal does: the seed's values and which given file
    [said] = [m for m in rec.messages if "--overwrite: discarded the adapt run" in m]
    assert "seed (0 -> 4)" in said and "given (terms)" in said, said
    assert json.loads(terms.read_text()) == edited and (out / "notes.txt").read_text() == "mine"
    assert result.files.terms == terms and result.files.generated == ["dictionary", "train"]
    assert (out / "train.jsonl").read_bytes() != old_train  # made again, for seed 4
    assert json.loads((out / "adapt.json").read_text())["seed"] == 4
    assert (out / "final" / "sparse_adapt.json").is_file()
    shutil.rmtree(out)


def test_a_base_inside_the_adapt_run_it_would_replace_is_refused(setup, tmp_path):
    import shutil

    from sparse_adapt.errors import ConfigError

    out = tmp_path / "run"
    shutil.copytree(setup["base"], out / "final")  # as an earlier run leaves its model
    (out / "adapt.json").write_text("{}")
    for overwrite in (False, True):
        with pytest.raises(ConfigError, match=rf"--base {out / 'final'} is {out / 'final'}, part of the adapt run"):
            run_adapt(setup["corpus"], out, str(out / "final"), config=setup["config"], teacher=setup["teacher"],
                      overwrite=overwrite)
    assert (out / "final" / "config.json").is_file()


def test_overwrite_never_writes_into_a_directory_that_holds_no_adapt_run(setup):
    foreign = setup["root"] / "foreign-overwrite"
    foreign.mkdir()
    (foreign / "domain_terms.json").write_text("{}")
    with pytest.raises(AdaptMismatchError, match="holds no adapt.json"):
        _adapt(setup, foreign, overwrite=True)
    assert (foreign / "domain_terms.json").read_text() == "{}"


def test_a_run_from_before_an_option_existed_resumes_with_the_options_old_behaviour(tmp_path):
    from sparse_adapt.corpus.adapt_folder import check_out as _check_out

    manifest = {"corpus": "c", "base": "b", "teacher": "t", "seed": 0, "given": {}, "config": None,
                "options": {"top": 20, "min_count": 2, "max_queries": 60, "negatives": 7}}
    (tmp_path / "adapt.json").write_text(json.dumps(manifest))
    (tmp_path / "domain_terms.json").write_text("{}")  # a run that made its inputs (one that made none starts afresh)
    legacy = {**manifest, "options": {**manifest["options"], "siblings": 0, "term_labels": False, "glosses": False,
                                      "pretrain": False, "lang": "en"}}
    _check_out(tmp_path, legacy)  # what the older code did: resumes
    for changed in ({"siblings": 3}, {"term_labels": True}, {"glosses": True}, {"pretrain": True}, {"lang": "de"}):
        with pytest.raises(AdaptMismatchError, match="options"):
            _check_out(tmp_path, {**legacy, "options": {**legacy["options"], **changed}})


def test_a_run_stopped_while_pretraining_reruns_with_other_options_and_keeps_its_checkpoint(tmp_path):
    """A run stopped inside pretraining leaves DIR/pretrained.partial: still a run that made no
    input (other options, even another base, start afresh); the checkpoint stays, to be judged
    by the files of the base it was saved from when pretraining resumes."""
    from sparse_adapt.corpus.adapt_folder import check_out

    manifest = {"corpus": "c", "base": "b", "teacher": "t", "seed": 0, "given": {}, "config": None,
                "options": {"top": 20, "min_count": 2, "max_queries": 60, "negatives": 7, "siblings": 0,
                            "term_labels": False, "glosses": False, "pretrain": True, "lang": "en"}}
    partial = tmp_path / "pretrained.partial"
    for other, kept in (({"options": {**manifest["options"], "top": 30}}, True), ({"base": "b2"}, True)):
        (tmp_path / "adapt.json").write_text(json.dumps(manifest))
        partial.mkdir(exist_ok=True)
        (partial / "trainer_state.pt").write_bytes(b"")
        check_out(tmp_path, {**manifest, **other})  # not refused: the run made no input yet
        assert not (tmp_path / "adapt.json").exists() and partial.is_dir() == kept


def test_what_a_discarded_run_leaves_behind_does_not_make_dir_foreign(tmp_path):
    """--overwrite removed adapt.json, then the teacher failed to load: DIR held pretrained/ (or
    its checkpoint, or a kept card) and every rerun, --overwrite included, was refused."""
    from sparse_adapt.corpus.adapt_folder import check_out

    manifest = {"corpus": "c", "base": "b", "teacher": "t", "seed": 0, "given": {}, "config": None, "options": {}}
    (tmp_path / "pretrained").mkdir()
    (tmp_path / "pretrained" / "general_pretraining.json").write_text("{}")
    (tmp_path / "pretrained.partial").mkdir()
    (tmp_path / "pretrained.partial" / "trainer_state.pt").write_bytes(b"")
    (tmp_path / "final-card.edited-2.md").write_text("theirs")
    (tmp_path / ".final.tmp-999999999-1").mkdir()  # a killed write's temporary (no such process)
    check_out(tmp_path, manifest)
    assert not (tmp_path / ".final.tmp-999999999-1").exists() and (tmp_path / "final-card.edited-2.md").is_file()
    theirs = tmp_path / ".drafts.tmp-keep"  # named like a temporary, but of no file a run writes
    theirs.mkdir()
    with pytest.raises(AdaptMismatchError, match="holds no adapt.json"):
        check_out(tmp_path, manifest)
    assert theirs.is_dir()  # refused, and never cleaned away
    theirs.rmdir()
    for foreign in ("notes.txt", "final-card.edited-x.md"):  # a user's file is no leftover of ours
        (tmp_path / foreign).write_text("mine")
        with pytest.raises(AdaptMismatchError, match="holds no adapt.json"):
            check_out(tmp_path, manifest)
        (tmp_path / foreign).unlink()
    (tmp_path / "pretrained" / "general_pretraining.json").unlink()  # a user's own pretrained/ folder
    with pytest.raises(AdaptMismatchError, match="holds no adapt.json"):
        check_out(tmp_path, manifest)


def _cli(setup, out, *extra):
    return ["adapt", "--corpus", str(setup["corpus"]), "--out", str(out), "--base", setup["base"],
            "--config", str(setup["config"]), "--teacher", setup["teacher"], *extra]


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return " ".join(err.split())


def test_cli_corpus_without_candidate_terms_exits_2(setup, tmp_path, capsys):
    plain = _write_docs(tmp_path / "plain.jsonl", [("a", "The cat sat on the mat."), ("b", "The dog sat on the cat.")])
    argv = _cli(setup, tmp_path / "out")
    argv[argv.index("--corpus") + 1] = str(plain)
    assert main(argv) == 2
    assert "no candidate domain terms in 2 documents" in _err(capsys)


def test_a_run_that_made_no_input_reruns_with_the_options_its_error_suggests(setup, tmp_path, monkeypatch):
    """It left its adapt.json behind (and the terms it mined, when the queries failed), and the rerun
    with --min-count 1 was refused as "an adapt run with other options" unless --overwrite."""
    from sparse_adapt.corpus.mining import MiningError
    from sparse_adapt.errors import SparseAdaptError

    run = dict(config=setup["config"], teacher=setup["teacher"], hooks=Hooks())
    out = tmp_path / "out"
    with pytest.raises(MiningError, match="lower --min-count"):
        run_adapt(setup["corpus"], out, setup["base"], min_count=100, **run)
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["adapt.json"]  # and the lock

    def trained(**kwargs):  # inputs made: the rerun got past the run check
        raise ConfigError(f"training {sorted(p.name for p in out.iterdir())}")

    monkeypatch.setattr("sparse_adapt.training.pipeline.run_pipeline", trained)
    with pytest.raises(ConfigError, match="training .*'domain_terms.json'.*'train.jsonl'"):
        run_adapt(setup["corpus"], out, setup["base"], **run)
    assert json.loads((out / "adapt.json").read_text())["options"]["min_count"] == 2
    # once inputs exist, other options are another run again: refused without --overwrite
    with pytest.raises(AdaptMismatchError, match="other options"):
        run_adapt(setup["corpus"], out, setup["base"], top=3, **run)
    # a fresh run whose pseudo-queries fail after mining leaves only its adapt.json too
    one = _write_docs(tmp_path / "one.jsonl", [("a", "The Zorblatt valve regulates pressure."), ("b", "A plain note.")])
    with pytest.raises(SparseAdaptError, match="1 pseudo-query could be made from 2 documents"):
        run_adapt(one, tmp_path / "one", setup["base"], min_count=1, **run)
    assert sorted(p.name for p in (tmp_path / "one").iterdir() if not p.name.startswith(".")) == ["adapt.json"]


def test_cli_term_absent_from_the_corpus_exits_2(setup, tmp_path, capsys):
    terms = tmp_path / "terms.json"
    terms.write_text(json.dumps({"jargon": ["Zentrofax", "Nonexistium"]}))
    assert main(_cli(setup, tmp_path / "out", "--terms", str(terms))) == 2
    assert "occur in no document of the corpus: Nonexistium" in _err(capsys)


def test_cli_teacher_that_fails_to_load_exits_2_and_writes_nothing(setup, tmp_path, capsys):
    argv = _cli(setup, tmp_path / "out")
    argv[argv.index("--teacher") + 1] = setup["base"]  # a masked-LM: no classification head
    assert main(argv) == 2
    assert "is not a cross-encoder" in _err(capsys)
    assert not (tmp_path / "out").exists()


def test_cli_a_length_beyond_the_bases_positions_names_the_config_file(setup, tmp_path, capsys):
    config = tmp_path / "long.json"  # the tiny base has 128 positions
    config.write_text(json.dumps({**CONFIG, "warmup": {"epochs": 1, "max_length": 512}}))
    argv = _cli(setup, tmp_path / "out")
    argv[argv.index("--config") + 1] = str(config)
    assert main(argv) == 2
    assert f"{config}: warmup.max_length 512 is above the 128 pieces" in _err(capsys)


def test_cli_bad_queries_qrels_or_groups_exit_2_before_anything_is_written(setup, tmp_path, capsys):
    # found at the summary, a malformed --queries file cost the whole run (the 25-minute pretraining included)
    queries, qrels, groups = tmp_path / "q.jsonl", tmp_path / "qrels.tsv", tmp_path / "groups.json"
    queries.write_text('{"qid": "q1", "text": "Zentrofax seals"}\n{"qid": "q2"}\n')
    qrels.write_text("q1 0 d1 1\n")
    yours = ("--queries", str(queries), "--qrels", str(qrels))
    assert main(_cli(setup, tmp_path / "out", *yours)) == 2
    assert f"{queries}:2: field 'text': missing" in _err(capsys)
    assert not (tmp_path / "out").exists()
    queries.write_text('{"qid": "q1", "text": "Zentrofax seals"}\n')
    qrels.write_text("q1 0 d1\n")
    assert main(_cli(setup, tmp_path / "out", *yours)) == 2
    assert f"{qrels}:1:" in _err(capsys)
    qrels.write_text("q1 0 d1 1\n")
    groups.write_text(json.dumps({"lay": ["q1", "q9"], "training": ["t1", "t2"]}))
    assert main(_cli(setup, tmp_path / "out", *yours, "--groups", str(groups))) == 2
    assert f"{groups}: field 'lay': lists unknown query ids: 'q9'" in _err(capsys)  # a typo among its queries
    assert main(_cli(setup, tmp_path / "out", "--groups", str(groups))) == 2
    assert "--groups splits --queries into groups" in _err(capsys)
    qrels.write_text("q7 0 d1 1\n")  # judges no query of the file: the set would vanish from the summary
    assert main(_cli(setup, tmp_path / "out", *yours)) == 2
    assert "none of its 1 judged queries is in" in _err(capsys)
    assert not (tmp_path / "out").exists()


def test_cli_adapt_refuses_queries_without_qrels_and_qrels_without_queries(setup, tmp_path, capsys):
    queries, qrels = tmp_path / "q.jsonl", tmp_path / "qrels.tsv"
    queries.write_text('{"qid": "q1", "text": "Zentrofax seals"}\n')
    qrels.write_text("q1 0 d1 1\n")
    for given in (["--queries", str(queries)], ["--qrels", str(qrels)]):
        assert main(_cli(setup, tmp_path / "out", *given)) == 2
        # a usage error, named like click's own (it alone lacked the command and its --help)
        assert "sparse-adapt adapt: --queries and --qrels go together (see sparse-adapt adapt --help)" in _err(capsys)
    assert not (tmp_path / "out").exists()


def test_cli_adapt_glosses_reaches_the_run(setup, finished, capsys):
    out = finished
    assert main(_cli(setup, out, "--glosses")) == 2  # the finished run was made without glosses
    assert "holds an adapt run with other options (glosses False -> True);" in _err(capsys)


def test_cli_adapt_with_a_mistyped_builtin_base_fails_at_once_and_makes_no_out(setup, tmp_path, capsys, monkeypatch):
    """The Hub was asked with its retries twice (~50 s) and adapt.json was left in --out."""
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # no network in tests either way
    argv = _cli(setup, tmp_path / "out")
    argv[argv.index("--base") + 1] = "offline-splade-tin"
    assert main(argv) == 2
    err = _err(capsys)
    assert "cannot load a tokenizer from 'offline-splade-tin'" in err
    assert err.endswith("(did you mean the built-in base 'offline-splade-tiny'?)")
    assert not (tmp_path / "out").exists()


def test_cli_generation_options_default_to_the_librarys():
    """mine-terms, make-train and adapt spell --top ... alike, with run_adapt's defaults."""
    import inspect

    import typer.main

    from sparse_adapt.cli import app
    from sparse_adapt.corpus.adapt import run_adapt

    library = inspect.signature(run_adapt).parameters
    commands = {c.name: typer.main.get_command(app).commands[c.name] for c in app.registered_commands
                if c.name in ("mine-terms", "make-train", "adapt")}
    shared = {"top", "min_count", "max_queries", "negatives", "siblings", "term_labels"}
    for name, command in commands.items():
        params = {p.name: p.default for p in command.params if p.name in shared}
        assert params and params == {k: library[k].default for k in params}, name
    assert shared == {p.name for p in commands["adapt"].params} & shared


def test_cli_adapt_top_reaches_mining(setup, tmp_path, monkeypatch):
    from sparse_adapt.corpus import adapt as corpus_adapt

    seen = {}

    def stop(*args, **kwargs):  # the options as the CLI passed them; no training needed to check that
        seen.update(kwargs)
        raise ConfigError("stopped")

    monkeypatch.setattr(corpus_adapt, "run_adapt", stop)
    argv = _cli(setup, tmp_path / "out", "--top", "1", "--min-count", "3", "--max-queries", "9", "--negatives", "4",
                "--siblings", "0", "--teacher-labels")
    assert main(argv) == 2
    assert {k: seen[k] for k in ("top", "min_count", "max_queries", "negatives", "siblings", "term_labels")} == {
        "top": 1, "min_count": 3, "max_queries": 9, "negatives": 4, "siblings": 0, "term_labels": False}


def test_cli_adapt_hands_its_other_options_to_the_run_and_prints_the_summary_it_got(setup, tmp_path, monkeypatch,
                                                                                    capsys):
    """The CLI between the library's two calls, neither of them run: what it passes on (a
    --groups file left out of keep was deleted with a discarded run) and what it prints of a
    summary given by hand (the change is adapted - base; feedback columns base's, then adapted's)."""
    from sparse_adapt.corpus import adapt as corpus_adapt
    from sparse_adapt.corpus.adapt import AdaptFiles, AdaptResult
    from sparse_adapt.report import adapt as report

    out, seen = tmp_path / "out", {}

    def run(*args, **kwargs):
        seen["run"] = kwargs
        return AdaptResult(AdaptFiles(out / "t", out / "d", out / "tr", generated=["terms", "train"]), out / "final",
                           out / "training")

    def summary(result, corpus, base, yours, hooks):
        seen["yours"] = yours
        return {"evaluation": [{"set": "your queries", "group": "lay", "queries": 1, "base": 0.5, "adapted": 0.625,
                                "base_feedback": 0.55, "feedback": 0.75}],
                "inspect": {"domain": {"tokens": [{"token": "zentrofax", "docs_occurring": 4,
                                                   "mean_weight_occurring": 1.5, "mean_weight_not_occurring": 0.25}]}},
                "warnings": [], "pretrained": None}

    monkeypatch.setattr(corpus_adapt, "run_adapt", run)
    monkeypatch.setattr(report, "adapt_summary", summary)
    queries, qrels, groups = tmp_path / "q.jsonl", tmp_path / "qrels.tsv", tmp_path / "groups.json"
    queries.write_text('{"qid": "q1", "text": "Zentrofax seals"}\n{"qid": "q2", "text": "mint tea"}\n')
    qrels.write_text("q1 0 d2 1\nq2 0 d6 1\n")
    groups.write_text(json.dumps({"lay": ["q1"], "pseudo": ["t1"]}))  # "pseudo" names none of --queries
    argv = _cli(setup, out, "--queries", str(queries), "--qrels", str(qrels), "--groups", str(groups), "--seed", "4",
                "--lang", "de", "--no-pretrain", "--glosses", "--overwrite")
    assert main(argv) == 0
    assert {k: seen["run"][k] for k in ("seed", "lang", "pretrain", "glosses", "overwrite", "keep")} == {
        "seed": 4, "lang": "de", "pretrain": False, "glosses": True, "overwrite": True, "keep": (queries, qrels, groups)}
    assert [q.qid for q in seen["yours"].queries] == ["q1", "q2"] and set(seen["yours"].groups) == {"lay"}
    captured = capsys.readouterr()
    assert f"warning: {groups}: groups naming none of {queries}'s queries are not scored: pseudo" in \
        " ".join(captured.err.split())
    row = next(line for line in captured.out.splitlines() if "your queries" in line)
    assert re.findall(r"[+-]?\d+\.\d+", row) == ["0.500", "0.625", "+0.125", "0.550", "0.750"]
    token = next(line for line in captured.out.splitlines() if "zentrofax" in line)
    assert re.findall(r"\d+(?:\.\d+)?", token) == ["4", "1.50", "0.25"]
    assert "generated: terms, train;" in " ".join(captured.out.split())


def test_cli_adapt_says_your_qrels_warnings_before_the_run(setup, tmp_path, monkeypatch, capsys):
    """A judged query missing from --queries is never scored: said at once, not after the training."""
    from sparse_adapt.corpus import adapt as corpus_adapt

    def stop(*args, **kwargs):
        raise ConfigError("stopped before any work")

    monkeypatch.setattr(corpus_adapt, "run_adapt", stop)
    queries, qrels = tmp_path / "q.jsonl", tmp_path / "qrels.tsv"
    queries.write_text('{"qid": "q1", "text": "Zentrofax seals"}\n')
    qrels.write_text("q1 0 d2 1\nq9 0 d6 1\n")
    assert main(_cli(setup, tmp_path / "out", "--queries", str(queries), "--qrels", str(qrels))) == 2
    err = _err(capsys)
    assert f"warning: {qrels}: 1 of 2 judged queries are not in {queries} and are not evaluated" in err
    assert err.index("warning:") < err.index("error: stopped before any work")


def test_cli_adapt_prints_a_dash_for_a_weight_no_document_has_and_says_it_generated_nothing(setup, tmp_path,
                                                                                            monkeypatch, capsys):
    """A token every document uses has no "not using" mean (None): a dash, not 0.00; a run on
    given files generated nothing, and says so."""
    from sparse_adapt.cli import output
    from sparse_adapt.corpus import adapt as corpus_adapt
    from sparse_adapt.corpus.adapt import AdaptFiles, AdaptResult
    from sparse_adapt.report import adapt as report

    out = tmp_path / "out"
    monkeypatch.setattr(output.console, "width", 400)  # one table row per line
    monkeypatch.setattr(corpus_adapt, "run_adapt", lambda *args, **kwargs: AdaptResult(
        AdaptFiles(out / "t", out / "d", out / "tr", generated=[]), out / "final", out / "training"))
    monkeypatch.setattr(report, "adapt_summary", lambda *args: {
        "evaluation": [], "warnings": [], "pretrained": None,
        "inspect": {"domain": {"tokens": [{"token": "zentrofax", "docs_occurring": 8, "mean_weight_occurring": 1.5,
                                           "mean_weight_not_occurring": None}]}}})
    assert main(_cli(setup, out)) == 0
    captured = capsys.readouterr()
    [row] = [line.split("│")[1:-1] for line in captured.out.splitlines() if "zentrofax" in line]
    assert [c.strip() for c in row] == ["zentrofax", "8", "1.50", "-"]
    assert "generated: nothing;" in " ".join(captured.out.split())


def test_cli_adapt_puts_each_part_of_the_summary_in_its_place(setup, tmp_path, monkeypatch, capsys):
    """Stood in for as above: each figure of a row under its own header, every group naming none of
    --queries, every generated file, and the paths of the adapted model and of the summary."""
    from sparse_adapt.cli import output
    from sparse_adapt.corpus import adapt as corpus_adapt
    from sparse_adapt.corpus.adapt import AdaptFiles, AdaptResult
    from sparse_adapt.report import adapt as report

    out = tmp_path / "out"
    monkeypatch.setattr(output.console, "width", 400)  # one table row per line
    monkeypatch.setattr(corpus_adapt, "run_adapt", lambda *args, **kwargs: AdaptResult(
        AdaptFiles(out / "t", out / "d", out / "tr", generated=["terms", "dictionary", "train"]), out / "final",
        out / "training"))
    monkeypatch.setattr(report, "adapt_summary", lambda *args: {
        "evaluation": [{"set": "your queries", "group": "lay", "queries": 2, "base": 0.5, "adapted": 0.625,
                        "base_feedback": 0.55, "feedback": 0.75}],
        "warnings": [], "pretrained": None, "inspect": {"domain": {"tokens": []}}})
    queries, qrels, groups = tmp_path / "q.jsonl", tmp_path / "qrels.tsv", tmp_path / "groups.json"
    queries.write_text("".join(json.dumps({"qid": f"q{i}", "text": "Zentrofax seals"}) + "\n" for i in (1, 2, 3)))
    qrels.write_text("q1 0 d2 1\nq2 0 d2 1\nq3 0 d2 1\n")
    groups.write_text(json.dumps({"lay": ["q1", "q2"], "pseudo": ["t1"], "older": ["t2"]}))
    assert main(_cli(setup, out, "--queries", str(queries), "--qrels", str(qrels), "--groups", str(groups))) == 0
    captured = capsys.readouterr()
    assert "are not scored: pseudo, older" in " ".join(captured.err.split())
    lines = captured.out.splitlines()
    header = [c.strip() for c in next(line for line in lines if "adapted + --feedback" in line).split("┃")[1:-1]]
    [row] = [[c.strip() for c in line.split("│")[1:-1]] for line in lines if "your queries" in line]
    assert dict(zip(header, row)) == {"queries": "your queries", "group": "lay", "n": "2", "base": "0.500",
                                      "adapted": "0.625", "change": "+0.125", "base + --feedback": "0.550",
                                      "adapted + --feedback": "0.750"}
    assert (f"adapted model {out / 'final'}; generated: terms, dictionary, train; summary: {out / 'summary.json'}"
            in " ".join(captured.out.split()))


def test_cli_adapt_leaves_what_it_is_not_given_to_run_adapt_s_defaults(setup, tmp_path, monkeypatch):
    """No --pretrain is "pretrain when the base needs it" (None), no --lang is detection ("auto"):
    the CLI hands on the library's defaults, not answers of its own."""
    import inspect

    from sparse_adapt.corpus import adapt as corpus_adapt

    library = {k: p.default for k, p in inspect.signature(run_adapt).parameters.items()
               if p.default is not inspect.Parameter.empty and k not in ("hooks", "keep")}
    seen = {}

    def stop(corpus, out, base, **kwargs):
        seen.update(kwargs, base=base)
        raise ConfigError("stopped")

    monkeypatch.setattr(corpus_adapt, "run_adapt", stop)
    assert main(["adapt", "--corpus", str(setup["corpus"]), "--out", str(tmp_path / "out")]) == 2
    assert {"pretrain", "lang", "glosses", "teacher", "seed", "top"} <= set(seen)
    assert {k: seen[k] for k in library} == library


@pytest.mark.parametrize("flag", ["--top", "--min-count", "--negatives"])
def test_cli_adapt_refuses_a_zero_count_before_any_work(setup, tmp_path, capsys, flag):
    assert main(_cli(setup, tmp_path / "out", flag, "0")) == 2
    assert f"Invalid value for '{flag}': Input should be greater than or equal to 1" in _err(capsys)
    assert not (tmp_path / "out").exists()


def test_cli_build_dictionary_says_which_of_your_entries_define_no_domain_term(setup, tmp_path, capsys):
    terms, mine = tmp_path / "terms.json", tmp_path / "mine.jsonl"
    terms.write_text(json.dumps({"jargon": ["Zentrofax"]}))
    mine.write_text(json.dumps({"term": "Zentrofix", "definition": "a typo of the pump", "examples": ["x"]}) + "\n")
    assert main(["build-dictionary", "--corpus", str(setup["corpus"]), "--terms", str(terms), "--dictionary", str(mine),
                 "--out", str(tmp_path / "d.jsonl")]) == 0
    assert f"warning: {mine}: 1 of 1 entries define a term that is not in {terms} (e.g. 'Zentrofix')" in _err(capsys)


def test_cli_mine_terms_explain_puts_each_part_of_the_score_under_its_own_name(setup, tmp_path, capsys, monkeypatch):
    import math

    from sparse_adapt.cli import output
    from sparse_adapt.corpus.mining import COMMON_ZIPF

    monkeypatch.setattr(output.console, "width", 400)  # one table row per line
    argv = ["mine-terms", "--corpus", str(setup["corpus"]), "--out", str(tmp_path / "t.json"), "--base", setup["base"]]
    assert main(argv + ["--explain"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = [c.strip() for c in next(line for line in lines if "fragmentation" in line).split("┃")[1:-1]]
    assert header == ["#", "term", "category", "score", "docs", "frequency", "rarity", "fragmentation", "pattern",
                      "zipf", "pieces"]
    rows = [dict(zip(header, (c.strip() for c in line.split("│")[1:-1]))) for line in lines if line.count("│") > 2]
    assert rows
    for r in rows:  # the parts as the printed formula defines them, from the row's own columns
        assert float(r["frequency"]) == pytest.approx(math.log2(int(r["docs"])), abs=0.006)
        assert float(r["rarity"]) == pytest.approx(COMMON_ZIPF - float(r["zipf"]), abs=0.011)
        assert float(r["fragmentation"]) == pytest.approx(math.log2(len(r["pieces"].split())), abs=0.006)
    assert any(abs(float(r["frequency"]) - float(r["rarity"])) > 0.1 for r in rows)  # swapped, they would differ


def test_cli_one_pseudo_query_is_refused_before_any_work(setup, tmp_path, capsys):
    """One query leaves none to hold out (the help says: one to train on, one to hold out)."""
    terms = tmp_path / "terms.json"
    terms.write_text(json.dumps({"jargon": ["Zentrofax"]}))
    for argv in (["make-train", "--terms", str(terms), "--out", str(tmp_path / "train.jsonl")],
                 ["adapt", "--out", str(tmp_path / "run")]):
        assert main(argv + ["--corpus", str(setup["corpus"]), "--max-queries", "1"]) == 2
        assert "Invalid value for '--max-queries': Input should be greater than or equal to 2" in _err(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["terms.json"]


def test_cli_generators_never_overwrite_without_overwrite(setup, tmp_path, capsys):
    out = tmp_path / "terms.json"
    out.write_text("{}")
    argv = ["mine-terms", "--corpus", str(setup["corpus"]), "--out", str(out), "--base", setup["base"]]
    assert main(argv) == 2
    assert "existing file; pass --overwrite" in _err(capsys) and out.read_text() == "{}"
    assert main(argv + ["--overwrite", "--explain"]) == 0
    assert "Zentrofax" in load_domain_terms(out)["jargon"]
    assert "fragmentation" in capsys.readouterr().out
    out.write_text("{}")
    assert main(argv + ["--force"]) == 0  # the flag's older name
    assert "Zentrofax" in load_domain_terms(out)["jargon"]


def test_cli_build_dictionary_keeps_your_entries_and_counts_the_strays_among_all_of_them(setup, tmp_path, capsys,
                                                                                          monkeypatch):
    from sparse_adapt.cli import output

    monkeypatch.setattr(output.console, "width", 400)  # one table row per line
    terms, mine, out = tmp_path / "terms.json", tmp_path / "mine.jsonl", tmp_path / "d.jsonl"
    terms.write_text(json.dumps({"jargon": ["Zentrofax"]}))
    yours = {"term": "Zentrofax", "definition": "our pump, in our words", "examples": ["The Zentrofax hums."]}
    stray = {"term": "Zentrofix", "definition": "a typo of the pump", "examples": ["x"]}
    mine.write_text("".join(json.dumps(e) + "\n" for e in (yours, stray)))
    assert main(["build-dictionary", "--corpus", str(setup["corpus"]), "--terms", str(terms), "--dictionary", str(mine),
                 "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert f"warning: {mine}: 1 of 2 entries define a term that is not in {terms} (e.g. 'Zentrofix')" in " ".join(
        captured.err.split())
    [entry] = [json.loads(line) for line in out.read_text().splitlines() if json.loads(line)["term"] == "Zentrofax"]
    assert (entry["definition"], entry["examples"]) == (yours["definition"], yours["examples"])
    [row] = [line.split("│")[1:-1] for line in captured.out.splitlines() if "Zentrofax" in line]
    assert [c.strip() for c in row] == ["Zentrofax", "yours", yours["definition"]]  # not "harvested": it was not


def test_cli_build_dictionary_shows_a_definition_of_90_characters_whole_and_cuts_a_longer_one(setup, tmp_path, capsys,
                                                                                               monkeypatch):
    from sparse_adapt.cli import output

    monkeypatch.setattr(output.console, "width", 400)  # one table row per line
    terms, mine, out = tmp_path / "terms.json", tmp_path / "mine.jsonl", tmp_path / "d.jsonl"
    terms.write_text(json.dumps({"jargon": ["Zentrofax"]}))
    shown = {}
    for length in (90, 91):
        definition = ("a coolant pump " * 7)[:length - 1] + "."
        mine.write_text(json.dumps({"term": "Zentrofax", "definition": definition, "examples": ["x"]}) + "\n")
        assert main(["build-dictionary", "--corpus", str(setup["corpus"]), "--terms", str(terms), "--dictionary",
                     str(mine), "--out", str(out), "--overwrite"]) == 0
        [row] = [line.split("│")[1:-1] for line in capsys.readouterr().out.splitlines() if "Zentrofax" in line]
        shown[length] = (definition, row[2].strip())
    assert shown[90][1] == shown[90][0]
    assert shown[91][1] == shown[91][0][:89] + "…"


def test_cli_build_dictionary_never_writes_over_your_own_dictionary_even_with_overwrite(setup, tmp_path, capsys):
    terms, mine = tmp_path / "terms.json", tmp_path / "mine.jsonl"
    terms.write_text(json.dumps({"jargon": ["Zentrofax"]}))
    mine.write_text(json.dumps({"term": "Zentrofax", "definition": "our pump", "examples": ["The Zentrofax hums."]}) + "\n")
    before = mine.read_text()
    assert main(["build-dictionary", "--corpus", str(setup["corpus"]), "--terms", str(terms), "--dictionary", str(mine),
                 "--out", str(mine), "--overwrite"]) == 2
    assert "is also an input" in _err(capsys) and mine.read_text() == before


@pytest.mark.parametrize("where", ["directory", "under-a-file"])
def test_cli_generators_refuse_an_out_that_cannot_be_their_file(setup, tmp_path, capsys, where):
    """A directory (even with --overwrite) or a path under a file: one line before any work."""
    terms = tmp_path / "terms.json"
    terms.write_text(json.dumps({"jargon": ["Zentrofax"]}))
    holder = tmp_path / "holder"
    if where == "directory":
        holder.mkdir()
        (holder / "notes.txt").write_text("keep")
        out, want = holder, "is a directory"
    else:
        holder.write_text("keep")
        out, want = holder / "terms.json", "is a file, not a directory"
    for command in (["mine-terms"], ["build-dictionary", "--terms", str(terms)],
                    ["make-train", "--terms", str(terms)]):
        argv = [*command, "--corpus", str(setup["corpus"]), "--out", str(out), "--overwrite"]
        assert main(argv) == 2, command
        err = _err(capsys)
        assert want in err and len(err.strip().splitlines()) == 1, (command, err)
    assert (holder / "notes.txt").read_text() == "keep" if where == "directory" else holder.read_text() == "keep"


def test_cli_generators_read_a_tsv_corpus_like_its_jsonl(setup, tmp_path):
    """An MS MARCO-style collection.tsv gives the same mined terms and training lists."""
    tsv = tmp_path / "collection.tsv"
    tsv.write_text("".join(f"{d.doc_id}\t{d.text}\n" for d in load_documents(setup["corpus"])))
    outs = {}
    for name, corpus in (("jsonl", setup["corpus"]), ("tsv", tsv)):
        terms, train = tmp_path / f"{name}-terms.json", tmp_path / f"{name}-train.jsonl"
        assert main(["mine-terms", "--corpus", str(corpus), "--out", str(terms), "--base", setup["base"]]) == 0
        assert main(["make-train", "--corpus", str(corpus), "--terms", str(terms), "--out", str(train),
                     "--base", setup["base"], "--teacher", setup["teacher"]]) == 0
        outs[name] = (terms.read_text(), train.read_text())
    assert outs["tsv"] == outs["jsonl"] and "Zentrofax" in outs["tsv"][0]


def test_cli_make_train_writes_a_loadable_train_file(setup, tmp_path, capsys):
    terms = tmp_path / "terms.json"
    terms.write_text(json.dumps({"jargon": ["Zentrofax"]}))
    out = tmp_path / "train.jsonl"
    argv = ["make-train", "--corpus", str(setup["corpus"]), "--terms", str(terms), "--out", str(out),
            "--base", setup["base"], "--teacher", setup["teacher"]]
    assert main(argv) == 0
    records = load_train(out)
    # default: up to 3 documents sharing the source's term beyond the 7 hard negatives, and
    # term-consistent scores (a floored sibling can lift a list's minimum above -8, a capped
    # candidate lower its maximum below 10); the source stays a positive
    assert records and all(-8.0 <= s <= 10.0 for r in records for s in r.teacher_scores)
    assert all(r.teacher_scores[r.doc_ids.index(r.qid.rsplit("-", 1)[0])] > 0 for r in records)
    assert all(8 <= len(r.doc_ids) <= 11 for r in records)
    assert "candidate scores made term-consistent" in capsys.readouterr().out
    assert main(argv + ["--overwrite", "--siblings", "0", "--teacher-labels"]) == 0
    records = load_train(out)  # the teacher's own map: best 10, worst -8, 1 + 7 candidates
    assert records and all(max(r.teacher_scores) == 10.0 and min(r.teacher_scores) == -8.0 for r in records)
    assert all(len(r.doc_ids) == 8 for r in records)


def test_cli_make_train_never_writes_into_its_teacher_s_folder(setup, tmp_path, capsys):
    # as for --base (tests/faults): the teacher is an input model, and a file of it is no place for the output
    import shutil

    teacher, terms = tmp_path / "ce", tmp_path / "terms.json"
    shutil.copytree(setup["teacher"], teacher)
    terms.write_text(json.dumps({"jargon": ["Zentrofax"]}))
    before = {p.name: p.read_bytes() for p in teacher.iterdir()}
    assert main(["make-train", "--corpus", str(setup["corpus"]), "--terms", str(terms), "--base", setup["base"],
                 "--teacher", str(teacher), "--out", str(teacher / "config.json"), "--overwrite"]) == 2
    assert "is inside an input's folder" in _err(capsys)
    assert {p.name: p.read_bytes() for p in teacher.iterdir()} == before


def test_cli_mine_terms_never_writes_into_its_base_s_folder(setup, tmp_path, capsys):
    # the base's tokenizer is read, so its folder is an input's: --out config.json there broke the model
    import shutil

    base = tmp_path / "base"
    shutil.copytree(setup["base"], base)
    before = {p.name: p.read_bytes() for p in base.iterdir() if p.is_file()}
    assert main(["mine-terms", "--corpus", str(setup["corpus"]), "--base", str(base),
                 "--out", str(base / "config.json"), "--overwrite"]) == 2
    assert "is inside an input's folder" in _err(capsys)
    assert {p.name: p.read_bytes() for p in base.iterdir() if p.is_file()} == before


def test_cli_build_dictionary_with_glosses_never_writes_into_its_teacher_s_folder(setup, tmp_path, capsys):
    # with --glosses the teacher is read too: its folder is an input's, as for make-train
    import shutil

    teacher, terms = tmp_path / "ce", tmp_path / "terms.json"
    shutil.copytree(setup["teacher"], teacher)
    terms.write_text(json.dumps({"jargon": ["Zentrofax"]}))
    before = {p.name: p.read_bytes() for p in teacher.iterdir()}
    assert main(["build-dictionary", "--corpus", str(setup["corpus"]), "--terms", str(terms), "--glosses",
                 "--teacher", str(teacher), "--out", str(teacher / "config.json"), "--overwrite"]) == 2
    assert "is inside an input's folder" in _err(capsys)
    assert {p.name: p.read_bytes() for p in teacher.iterdir()} == before


def test_cli_make_train_hands_its_options_to_the_generator_and_prints_its_counts(setup, tmp_path, monkeypatch, capsys):
    """The generator stood in for, with counts given by hand: each option reaches it (the
    language as detected, not "auto"), and each count is printed in its own place."""
    from types import SimpleNamespace

    from sparse_adapt.corpus import pseudo

    seen = {}

    def build(documents, groups, splade, scorer, **kwargs):
        seen.update(kwargs)
        return [], SimpleNamespace(generated={"explicit": 5, "semantic": 3}, kept={"explicit": 4}, dropped_unseparated=2,
                                   dropped_source_negative=1, term_adjusted=6)

    monkeypatch.setattr(pseudo, "make_train", build)
    terms = tmp_path / "terms.json"
    terms.write_text(json.dumps({"jargon": ["Zentrofax"]}))
    assert main(["make-train", "--corpus", str(setup["corpus"]), "--terms", str(terms), "--out", str(tmp_path / "t.jsonl"),
                 "--base", setup["base"], "--teacher", setup["teacher"], "--seed", "9", "--max-queries", "11",
                 "--negatives", "2", "--siblings", "1", "--teacher-labels"]) == 0
    assert {k: seen[k] for k in ("seed", "max_queries", "negatives", "siblings", "term_labels", "glosses", "lang")} == {
        "seed": 9, "max_queries": 11, "negatives": 2, "siblings": 1, "term_labels": False, "glosses": None, "lang": "en"}
    out = capsys.readouterr().out
    rows = {kind: re.findall(r"\d+", line) for line in out.splitlines() for kind in ("explicit", "semantic")
            if kind in line}
    assert rows == {"explicit": ["5", "4"], "semantic": ["3", "0"]}
    assert ("dropped: 2 the teacher could not separate, 1 whose source document it scored <= 0; 6 candidate scores "
            "made term-consistent") in " ".join(out.split())


def test_cli_make_train_says_when_documents_are_longer_than_the_model_reads(setup, tmp_path, capsys):
    terms = tmp_path / "terms.json"
    terms.write_text(json.dumps({"jargon": ["Zentrofax"]}))
    argv = ["make-train", "--terms", str(terms), "--base", setup["base"], "--teacher", setup["teacher"]]
    assert main(argv + ["--corpus", str(setup["corpus"]), "--out", str(tmp_path / "a.jsonl")]) == 0
    assert "longer than" not in capsys.readouterr().err
    corpus = _write_docs(tmp_path / "long.jsonl", DOCS + [("long", "Zentrofax seals leak coolant. " * 60)])
    assert main(argv + ["--corpus", str(corpus), "--out", str(tmp_path / "b.jsonl")]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert f"1 of {len(DOCS) + 1} documents is longer than 48 pieces: queries, negatives and labels come" in err


def test_cli_adapt_prints_and_writes_the_summary(setup, finished, capsys):
    out = finished
    assert main(_cli(setup, out)) == 0  # resumes: nothing left to train
    text = " ".join(capsys.readouterr().out.split())
    assert "nDCG@10, base vs adapted" in text and "zentrofax" in text
    summary = json.loads((out / "summary.json").read_text())
    held = load_queries(out / "heldout_queries.jsonl")
    rows = {r["group"]: r for r in summary["evaluation"]}
    assert rows["all"]["queries"] == len(held) and rows["all"]["set"] == "pseudo held-out"
    assert all(0.0 <= r["base"] <= 1.0 and 0.0 <= r["adapted"] <= 1.0 for r in rows.values())
    # "feedback": the adapted model searched with evaluate --feedback's defaults, recomputed here.
    from sparse_adapt.retrieval.evaluation import evaluate_run, score_in_memory
    from sparse_adapt.retrieval.feedback import Feedback

    fed = score_in_memory(SpladeEncoder.from_pretrained(out / "final"), load_documents(setup["corpus"]), held,
                          feedback=Feedback())
    judged = load_qrels(out / "heldout_qrels.tsv")
    want = evaluate_run(judged, fed, ["ndcg@10"], qids=[q.qid for q in held if q.qid in judged])["ndcg@10"]
    assert rows["all"]["feedback"] == pytest.approx(want)
    plain = score_in_memory(SpladeEncoder.from_pretrained(out / "final"), load_documents(setup["corpus"]), held)
    qids = [q.qid for q in held if q.qid in judged]
    assert rows["all"]["adapted"] == pytest.approx(evaluate_run(judged, plain, ["ndcg@10"], qids=qids)["ndcg@10"])
    assert set(rows) - {"all"} <= {"heldout-pseudo-explicit", "heldout-pseudo-semantic", "heldout-pseudo-control"}
    tokens = {t["token"] for t in summary["inspect"]["domain"]["tokens"]}
    assert "zentrofax" in tokens and summary["generated"] == ["terms", "dictionary", "train"]
    # resumed, the pseudo-labelling's counts are still there (a rerun wrote "notes": {} over them)
    made = summary["notes"]["make_train"]
    assert made["train"] == len((out / "train.jsonl").read_text().splitlines()) and made["heldout"] == len(held)


def test_a_generated_file_a_killed_run_left_unrecorded_is_recorded_by_the_rerun(setup, finished, tmp_path):
    """Killed between writing dictionary.jsonl and recording it in generated.json, the run left
    it untracked for good: a later edit of the terms file remade the training lists, not it."""
    import shutil

    from sparse_adapt.corpus.provenance import PROVENANCE

    out = tmp_path / "run"
    shutil.copytree(finished, out)
    recorded = json.loads((out / PROVENANCE).read_text())
    (out / PROVENANCE).write_text(json.dumps({"train": recorded["train"]}))  # the kill's window
    _adapt(setup, out)  # resumes: nothing to make or train
    assert json.loads((out / PROVENANCE).read_text())["dictionary"] == recorded["dictionary"]


def test_cli_adapt_prints_each_summary_warning(setup, finished, monkeypatch, capsys):
    from sparse_adapt.report import adapt as report

    out = finished
    seen = []
    monkeypatch.setattr(report, "worse_than_base",
                        lambda rows, pretrained=None: seen.append(rows) or ["on a set the adapted model is worse"])
    assert main(_cli(setup, out)) == 0
    assert seen and "warning: on a set the adapted model is worse" in _err(capsys)
    assert json.loads((out / "summary.json").read_text())["warnings"] == ["on a set the adapted model is worse"]


def test_summary_encodes_each_models_corpus_once_for_every_query_set(setup, finished, monkeypatch):
    from sparse_adapt.report import adapt as report
    from sparse_adapt.retrieval.evaluation import evaluate_run, score_in_memory
    from sparse_adapt.retrieval.feedback import Feedback

    out = finished
    result = _adapt(setup, out)  # resumes
    encoded = []  # every document-side encode of the summary, inspect's included
    real = SpladeEncoder.encode
    monkeypatch.setattr(SpladeEncoder, "encode", lambda m, texts, kind="document", *a, **k: (
        encoded.append(len(texts)) if kind == "document" else None) or real(m, texts, kind, *a, **k))
    # the held-out files given again as "your queries" with their groups: a second set that must
    # score the same, group by group
    yours = report.QuerySet.load("your queries", out / "heldout_queries.jsonl", out / "heldout_qrels.tsv",
                                 out / "query_groups.json")
    summary = report.adapt_summary(result, setup["corpus"], setup["base"], yours)
    docs = load_documents(setup["corpus"])
    assert encoded == [len(docs), len(docs)]  # adapted and base, not once per set nor again for inspect
    rows = {(r["set"], r["group"]): r for r in summary["evaluation"]}
    columns = ("base", "adapted", "feedback", "base_feedback", "queries")
    groups = [g for s, g in rows if s == "pseudo held-out"]
    assert len(groups) > 1 and groups == [g for s, g in rows if s == "your queries"]
    for group in groups:
        assert {k: rows[("pseudo held-out", group)][k] for k in columns} == {k: rows[("your queries", group)][k] for k in columns}
    pseudo = rows[("pseudo held-out", "all")]
    # a suite's groups file also groups queries of another file: those groups are skipped, and said
    other = out.parent / "groups-with-training.json"
    other.write_text(json.dumps({**json.loads((out / "query_groups.json").read_text()), "control": ["t1", "t2"]}))
    loaded = report.QuerySet.load("your queries", out / "heldout_queries.jsonl", out / "heldout_qrels.tsv", other)
    assert loaded.skipped == ("control",) and loaded.groups == yours.groups
    held, judged = load_queries(out / "heldout_queries.jsonl"), load_qrels(out / "heldout_qrels.tsv")
    qids = [q.qid for q in held if q.qid in judged]
    base = SpladeEncoder.from_pretrained(setup["base"])
    for column, feedback in (("base", None), ("base_feedback", Feedback())):
        run = score_in_memory(base, docs, held, feedback=feedback)
        assert pseudo[column] == pytest.approx(evaluate_run(judged, run, ["ndcg@10"], qids=qids)["ndcg@10"])
    assert summary["schema"] == "sparse-adapt.adapt-summary/6" and summary["pretrained"] is None
    assert not any("pretrained" in r for r in summary["evaluation"])  # no pretraining: nothing to compare
    assert summary["warnings"] == report.worse_than_base(summary["evaluation"])
    limit = base.max_length("document")
    assert summary["truncated"] == {"documents": 0, "of": len(docs), "max_length": limit}
    # A corpus with a document past the encoder's limit: counted, and the user told to split it.
    long = _write_docs(out.parent / "long-docs.jsonl", DOCS + [("long", "Zentrofax seals leak coolant. " * 60)])
    assert len(base.tokenizer("Zentrofax seals leak coolant. " * 60)["input_ids"]) > limit
    rec = Recorder()
    summary = report.adapt_summary(result, long, setup["base"], hooks=rec.hooks())
    assert summary["truncated"] == {"documents": 1, "of": len(DOCS) + 1, "max_length": limit}
    assert any(m.startswith(f"1 of {len(DOCS) + 1} documents is longer than {limit} pieces") and "split long" in m
               for m in rec.messages)


def test_the_summary_writes_its_figures_into_the_model_card_unless_the_user_edited_it(setup):
    import hashlib

    from sparse_adapt.report import adapt as report

    out = setup["root"] / "run-card"
    result = _adapt(setup, out)
    card = out / "final" / "README.md"
    assert "measured no retrieval metrics" in card.read_text()  # the pipeline's card: it evaluates nothing
    summary = report.adapt_summary(result, setup["corpus"], setup["base"])
    text = card.read_text()
    row = next(r for r in summary["evaluation"] if r["group"] == "all")
    assert "measured no retrieval metrics" not in text
    count = f"{row['queries']} {'query' if row['queries'] == 1 else 'queries'}"
    assert f"| pseudo held-out, all ({count}) | {row['adapted']:.4f} | {row['feedback']:.4f} |" in text
    assert summary["card_sha256"] == hashlib.sha256(card.read_bytes()).hexdigest()
    assert report.adapt_summary(result, setup["corpus"], setup["base"])["card_sha256"] == summary["card_sha256"]
    card.write_text(text + "Approved for the support search.\n")  # the user's own words stay
    rec = Recorder()
    again = report.adapt_summary(result, setup["corpus"], setup["base"], hooks=rec.hooks())
    assert card.read_text().endswith("Approved for the support search.\n") and again["card_sha256"] is None
    assert f"{card} is not a card this run wrote (edited, or summary.json lost since): kept" in " ".join(rec.messages)
    # a damaged summary.json recognises no card by its hash, and says so instead of a traceback;
    # an unedited card is still known by its own seal
    (out / "summary.json").write_text(json.dumps({"card_sha256": ["not", "a", "hash"]}))
    rec = Recorder()
    assert report.adapt_summary(result, setup["corpus"], setup["base"], hooks=rec.hooks())["card_sha256"] is None
    assert card.read_text().endswith("Approved for the support search.\n")
    assert "is not a card this run wrote" in " ".join(rec.messages)
    card.write_text(text)
    (out / "summary.json").write_text(json.dumps({"card_sha256": ["not", "a", "hash"]}))
    assert report.adapt_summary(result, setup["corpus"], setup["base"])["card_sha256"] == hashlib.sha256(
        card.read_bytes()).hexdigest()


def test_a_set_scored_below_the_base_is_a_warning():
    from sparse_adapt.report.adapt import FEW_QUERIES, worse_than_base

    def row(set_, group, n, base, adapted):
        return {"set": set_, "group": group, "queries": n, "base": base, "adapted": adapted}

    pseudo = [
        row("pseudo held-out", "all", 7, 0.675, 0.644),  # 0.031 worse, few queries
        row("pseudo held-out", "heldout-pseudo-control", 6, 0.638, 0.601),  # a group: the "all" row speaks for it
    ]
    (line,) = worse_than_base(pseudo)
    assert line.startswith("on pseudo held-out (7 queries) the adapted model scores nDCG@10 0.644, below the base's "
                           "0.675; 7 queries are a reading, not a verdict: judge on held-out queries you write")
    # within the tolerance (0.01, issue 11's for controls) a change is no loss
    assert worse_than_base([row("pseudo held-out", "all", 9, 0.955, 0.953)]) == []
    assert worse_than_base([row("pseudo held-out", "all", 9, 0.3, 0.3 - 0.01)]) == []  # at the bar: it passes
    assert worse_than_base([row("pseudo held-out", "all", 9, 0.1, 0.09)]) == []  # 0.1 - 0.01 > 0.09 in floats
    # with queries of the user's own, they decide: the pseudo set is not warned about
    yours = [row("your queries", "all", FEW_QUERIES, 0.80, 0.75), row("your queries", "semantic", 12, 0.90, 0.70)]
    (line,) = worse_than_base(pseudo + yours)
    assert line.startswith("on your queries (20 queries)") and "reading" not in line
    assert "keep the base for such queries" in line
    assert worse_than_base(pseudo + [row("your queries", "all", 30, 0.5, 0.9)]) == []
    # with --feedback on both sides too: better than the base, but below the base with feedback
    fed = {**row("your queries", "all", 9, 0.896, 0.909), "base_feedback": 0.940, "feedback": 0.921}
    (line,) = worse_than_base([fed])
    assert line.startswith("on your queries (9 queries) with --feedback the adapted model scores nDCG@10 0.921, "
                           "below the base's 0.940 with --feedback; 9 queries are a reading")
    assert worse_than_base([{**fed, "feedback": 0.930}]) == []  # within the tolerance
    (line,) = worse_than_base([row("your queries", "all", 1, 0.9, 0.5)])  # one query: the noun agrees
    assert line.startswith("on your queries (1 query) the adapted") and "; 1 query is a reading" in line


def test_adapt_pretrains_a_base_that_is_no_trained_splade_once_and_trains_with_its_settings(setup, monkeypatch):
    from sparse_adapt.modeling.builtin import needs_pretraining
    from sparse_adapt.training import general
    from sparse_adapt.training.general import RECORD
    from tests.training.test_general import PAIRS, WordTeacher

    assert needs_pretraining("offline-minilm") and not needs_pretraining("offline-splade-tiny")
    assert not needs_pretraining(setup["base"])  # a directory: adapt does not pretrain it unless asked
    calls = []
    monkeypatch.setattr(general, "lexicon_pairs", lambda seed, limit, min_zipf: calls.append(seed) or PAIRS * 2)  # one batch of 48
    monkeypatch.setattr("sparse_adapt.corpus.teacher.load_teacher", lambda *a, **k: WordTeacher())
    from sparse_adapt.modeling.encoder import SpladeEncoder

    from sparse_adapt.corpus import adapt

    loaded, labelled_by = [], []
    load, make_train = SpladeEncoder.from_pretrained.__func__, adapt.make_train
    monkeypatch.setattr(SpladeEncoder, "from_pretrained",
                        classmethod(lambda cls, path, *a, **k: loaded.append(str(path)) or load(cls, path, *a, **k)))
    monkeypatch.setattr(adapt, "make_train", lambda *a, **k: labelled_by.append(loaded[-1]) or make_train(*a, **k))
    out = setup["root"] / "pretrained-run"
    rec = Recorder()
    result = _adapt(setup, out, rec.hooks(), pretrain=True)
    assert (out / "pretrained" / RECORD).is_file() and calls == [0]
    # Terms and the dictionary are made before the half-hour pretraining, the pseudo-labels after
    # it, with hard negatives mined by the pretrained base.
    said = [next(i for i, m in enumerate(rec.messages) if m.startswith(start))
            for start in ("mined ", "harvested ", "to change the mined terms, stop now", "general-English pretraining",
                          "pseudo-labelled ")]
    assert said == sorted(said) and labelled_by == [str(out / "pretrained")]
    assert f"edit {out / 'domain_terms.json'} and rerun" in rec.messages[said[2]]
    # The summary scores the pretrained base too: where the domain stages started.
    from sparse_adapt.report import adapt as report
    from sparse_adapt.retrieval.evaluation import evaluate_run, score_in_memory

    assert result.pretrained == out / "pretrained"
    summary = report.adapt_summary(result, setup["corpus"], setup["base"])
    assert summary["pretrained"] == str(out / "pretrained")
    held, judged = load_queries(out / "heldout_queries.jsonl"), load_qrels(out / "heldout_qrels.tsv")
    run = score_in_memory(SpladeEncoder.from_pretrained(out / "pretrained"), load_documents(setup["corpus"]), held)
    [row] = [r for r in summary["evaluation"] if r["group"] == "all"]
    assert row["pretrained"] == pytest.approx(
        evaluate_run(judged, run, ["ndcg@10"], qids=[q.qid for q in held if q.qid in judged])["ndcg@10"])
    assert "nDCG@10 pretrained base" in (out / "final" / "README.md").read_text()
    run = json.loads((out / "training" / "run.json").read_text())
    assert run["base"] == str(out / "pretrained") and run["config"]["distill"]["pres_form"] == "all-texts"
    assert json.loads((out / "adapt.json").read_text())["options"]["pretrain"] is True
    assert any("general-English pretraining" in m and f"`--base {out / 'pretrained'}` adapts another corpus" in m
               for m in rec.messages)
    again = Recorder()
    assert _adapt(setup, out, again.hooks(), pretrain=True).final == result.final
    assert calls == [0] and not any("general-English pretraining" in m or "stop now" in m for m in again.messages)
    assert not any("reusing" in m for m in again.messages)  # made with today's settings: nothing to say
    # A directory pretrained before a default changed is reused as it is, and the rerun says so.
    record = json.loads((out / "pretrained" / RECORD).read_text())
    record["config"]["lr"] = 3e-5
    (out / "pretrained" / RECORD).write_text(json.dumps(record))
    older = Recorder()
    assert _adapt(setup, out, older.hooks(), pretrain=True).final == result.final and calls == [0]
    assert any("reusing" in m and "lr 3e-05 (today 6e-05)" in m for m in older.messages)
    with pytest.raises(AdaptMismatchError, match="options"):  # the same directory without it is another run
        _adapt(setup, out, pretrain=False)
    assert not (setup["root"] / "run" / "pretrained").exists()  # the default run above did not pretrain


def test_adapt_says_what_the_term_cut_left_out_and_lists_every_candidate(setup, tmp_path):
    from sparse_adapt.corpus.adapt import prepare_inputs

    docs = DOCS + [(f"x{i}", f"The Qvirrelmont valve was serviced in bay {i}.") for i in range(3)]
    corpus = _write_docs(tmp_path / "docs.jsonl", docs)
    given = tmp_path / "given"
    given.mkdir()
    dictionary = given / "dictionary.jsonl"
    dictionary.write_text(json.dumps({"term": "Zentrofax", "definition": "a pump", "examples": ["coolant"]}) + "\n")
    rec = Recorder()
    prepare_inputs(corpus, tmp_path / "out", setup["base"], terms=None, dictionary=dictionary,
                   train=setup["root"] / "unused-train.jsonl", teacher=None, seed=0, top=1, min_count=2,
                   max_queries=10, negatives=3, siblings=0, term_labels=True, glosses=False, hooks=rec.hooks())
    mined = json.loads((tmp_path / "out" / "mining.json").read_text())
    assert [(c["term"], c["kept"]) for c in mined][:2] == [("Zentrofax", True), ("Qvirrelmont", False)]
    assert load_domain_terms(tmp_path / "out" / "domain_terms.json") == {"jargon": ["Zentrofax", "zentrofax"]}
    [note] = [m for m in rec.messages if "below the cut" in m]
    assert note.startswith(f"{len(mined) - 1} more candidate terms scored below the cut (--top 1; the next: Qvirrelmont")
    rec = Recorder()  # a --top that keeps every candidate leaves none out: nothing to say
    prepare_inputs(corpus, tmp_path / "all", setup["base"], terms=None, dictionary=dictionary,
                   train=setup["root"] / "unused-train.jsonl", teacher=None, seed=0, top=len(mined), min_count=2,
                   max_queries=10, negatives=3, siblings=0, term_labels=True, glosses=False, hooks=rec.hooks())
    assert all(c["kept"] for c in json.loads((tmp_path / "all" / "mining.json").read_text()))
    assert not [m for m in rec.messages if "below the cut" in m]


def test_an_adapt_directory_in_use_is_refused_before_anything_is_written(setup, tmp_path):
    """Two runs into one --out: adapt.json said one seed, training/run.json the other."""
    from sparse_adapt.lock import LockError, locked

    out = tmp_path / "run"
    with locked(out):
        with pytest.raises(LockError, match="in use by another sparse-adapt process"):
            run_adapt(setup["corpus"], out, setup["base"], config=setup["config"], teacher=setup["teacher"])
    assert not out.exists()  # the holder made it and left nothing


def test_cli_adapt_with_nothing_to_measure_says_so_instead_of_an_empty_table(setup, finished, tmp_path, capsys):
    import shutil

    given = []
    for flag, name in (("--terms", "domain_terms.json"), ("--dictionary", "dictionary.jsonl"), ("--train", "train.jsonl")):
        shutil.copy(finished / name, tmp_path / name)
        given += [flag, str(tmp_path / name)]
    assert main(_cli(setup, tmp_path / "out", *given)) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "nDCG@10: no queries to compare the base and the adapted model on" in text
    assert "nDCG@10, base vs adapted" not in text
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["evaluation"] == []


def test_only_an_edited_card_by_its_exact_name_and_as_a_file_counts_as_left_by_a_run(tmp_path):
    from sparse_adapt.corpus.adapt_folder import check_out

    manifest = {"corpus": "c", "base": "b", "teacher": "t", "seed": 0, "given": {}, "config": None, "options": {}}
    (tmp_path / "final-card.edited-3.md").write_text("theirs")
    check_out(tmp_path, manifest)  # a card a run kept aside: no foreign file
    for foreign in ("final-card.edited.md.bak", "final-card.edited-2.md~"):
        (tmp_path / foreign).write_text("mine")
        with pytest.raises(AdaptMismatchError, match="holds no adapt.json"):
            check_out(tmp_path, manifest)
        (tmp_path / foreign).unlink()
    (tmp_path / "final-card.edited.md").mkdir()  # a folder of the name is no card a run copied
    with pytest.raises(AdaptMismatchError, match="holds no adapt.json"):
        check_out(tmp_path, manifest)


def test_discarding_a_run_keeps_a_run_folder_that_holds_a_file_the_user_gave(tmp_path):
    """--overwrite with --config DIR/training/mine.toml: removing training/ whole would delete
    the config the new run reads; the rest of the old run goes."""
    from sparse_adapt.corpus.adapt_folder import discard_run

    (tmp_path / "adapt.json").write_text("{}")
    (tmp_path / "train.jsonl").write_text("")
    for name in ("training", "final"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text("{}")
    mine = tmp_path / "training" / "mine.toml"
    mine.write_text("[distill]\n")
    discard_run(tmp_path, (mine,))
    assert mine.read_text() == "[distill]\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["training"]


def test_pseudo_data_a_kill_left_without_its_held_out_queries_is_made_again(tmp_path):
    """make-train writes train.jsonl first and heldout_queries.jsonl last: a run killed between
    them must make the pseudo-labelled data again, not train without its held-out set."""
    from sparse_adapt.corpus.adapt import _to_generate

    (tmp_path / "dictionary.jsonl").write_text("")
    (tmp_path / "train.jsonl").write_text("")
    assert _to_generate(tmp_path, None, None) == (False, True)
    (tmp_path / "heldout_queries.jsonl").write_text("")
    assert _to_generate(tmp_path, None, None) == (False, False)


def test_every_fifth_pseudo_query_is_held_out_and_a_short_list_still_holds_one_out():
    from sparse_adapt.corpus.adapt import _split_heldout

    records = [{"qid": f"q{i}"} for i in range(11)]
    train, held = _split_heldout(records)
    assert [r["qid"] for r in held] == ["q4", "q9"] and len(train) == 9
    train, held = _split_heldout(records[:3])
    assert [r["qid"] for r in held] == ["q2"] and [r["qid"] for r in train] == ["q0", "q1"]
    train, held = _split_heldout(records[:2])
    assert [r["qid"] for r in held] == ["q1"] and [r["qid"] for r in train] == ["q0"]
    with pytest.raises(ValueError, match="1 pseudo-labelled records cannot be split"):  # all held out, none to train
        _split_heldout(records[:1])


def test_the_summary_rows_count_and_score_only_judged_queries_and_drop_a_group_with_none():
    """q2's relevant d2 is ranked 2nd: nDCG@10 = (1/log2 3) / 1; q1's is 1st: 1. The unjudged
    q3 is neither counted nor scored 0 in `all`, and the group holding only it has no row."""
    import math

    from sparse_adapt.report.adapt import group_rows

    judged = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    run = {"q1": {"d1": 1.0}, "q2": {"d1": 2.0, "d2": 1.0}, "q3": {"d1": 1.0}}
    rows = group_rows("held-out", {"all": ["q1", "q2", "q3"], "paraphrase": ["q3"], "named": ["q2"]}, judged,
                      {"base": run, "adapted": {"q1": {"d1": 1.0}, "q2": {"d2": 1.0}}})
    assert [(r["set"], r["group"], r["queries"]) for r in rows] == [("held-out", "all", 2), ("held-out", "named", 1)]
    assert rows[0]["base"] == pytest.approx((1 + 1 / math.log2(3)) / 2) and rows[0]["adapted"] == pytest.approx(1.0)
    assert rows[1]["base"] == pytest.approx(1 / math.log2(3))


def test_a_query_set_skips_a_group_of_one_query_it_does_not_hold(tmp_path):
    # a suite's groups file names a training query alone in its group: still another file's group
    from sparse_adapt.report.adapt import QuerySet

    queries, qrels, groups = tmp_path / "q.jsonl", tmp_path / "qrels.tsv", tmp_path / "groups.json"
    queries.write_text('{"qid": "q1", "text": "Zentrofax seals"}\n{"qid": "q2", "text": "coolant pump"}\n')
    qrels.write_text("q1 0 d1 1\nq2 0 d2 1\n")
    groups.write_text(json.dumps({"lay": ["q2"], "training": ["t1"], "both": ["q1", "q2"]}))
    loaded = QuerySet.load("yours", queries, qrels, groups)
    assert loaded.skipped == ("training",) and loaded.groups == {"lay": ["q2"], "both": ["q1", "q2"]}


def test_a_run_whose_held_out_queries_are_gone_scores_only_your_queries(tmp_path):
    # the held-out file deleted since the run made it: no pseudo set, rather than a crash after training
    from types import SimpleNamespace

    from sparse_adapt.report.adapt import _sets

    files = SimpleNamespace(heldout_queries=tmp_path / "heldout_queries.jsonl", heldout_qrels=tmp_path / "heldout_qrels.tsv",
                            query_groups=None)
    result = SimpleNamespace(files=files)
    assert _sets(result, None) == []
    yours = object()
    assert _sets(result, yours) == [yours]


def test_the_summary_warns_of_a_set_the_adapted_model_lost_on(setup, finished, tmp_path, monkeypatch):
    # the measured rows are made worse by hand: the summary must carry worse_than_base's lines for them
    import shutil

    from sparse_adapt.report import adapt as report

    out = tmp_path / "run"
    shutil.copytree(finished, out)  # the summary rewrites the card: not in the module's shared run
    result = _adapt(setup, out)
    worse = {"group": "all", "queries": 9, "base": 0.9, "adapted": 0.5, "base_feedback": 0.9, "feedback": 0.5}
    monkeypatch.setattr(report, "group_rows", lambda name, groups, judged, runs: [{"set": name, **worse}])
    summary = report.adapt_summary(result, setup["corpus"], setup["base"])
    first, fed = summary["warnings"]
    assert first.startswith("on pseudo held-out (9 queries) the adapted model scores nDCG@10 0.500, below the base's 0.900")
    assert fed.startswith("on pseudo held-out (9 queries) with --feedback the adapted model scores nDCG@10 0.500")


def test_an_adapted_model_below_the_pretrained_base_it_trained_from_is_warned_of():
    """brewery: the adapted model 0.918 over all 22 queries, its pretrained start 0.932: the
    domain stages lost what the pretraining gave, which a comparison with the raw base (0.836)
    hid."""
    from sparse_adapt.report.adapt import worse_than_base

    row = {"set": "your queries", "group": "all", "queries": 22, "base": 0.836, "adapted": 0.918,
           "base_feedback": 0.833, "feedback": 0.939, "pretrained": 0.932}
    (line,) = worse_than_base([row], "runs/b/pretrained")
    assert line == ("on your queries (22 queries) the adapted model scores nDCG@10 0.918, below the 0.932 of "
                    "runs/b/pretrained, the general-English pretraining it trained from: the domain stages lost on "
                    "these queries what it gave; runs/b/pretrained is a model too (--model runs/b/pretrained)")
    assert worse_than_base([{**row, "pretrained": 0.928}], "runs/b/pretrained") == []  # within WORSE_BY
    assert worse_than_base([row]) == []  # no pretraining named: nothing to compare


def test_a_given_dictionary_or_train_file_is_never_to_be_generated(tmp_path):
    """A given dictionary is read, never made: "to be made" would write the harvest over the user's own file."""
    from pathlib import Path

    from sparse_adapt.corpus.adapt import _to_generate

    assert _to_generate(tmp_path, Path("my_dictionary.jsonl"), Path("my_train.jsonl")) == (False, False)
    assert _to_generate(tmp_path, Path("my_dictionary.jsonl"), None) == (False, True)
    assert _to_generate(tmp_path, None, Path("my_train.jsonl")) == (True, False)


def test_a_refusal_names_the_values_of_base_teacher_and_seed_and_only_the_keys_of_the_rest():
    from sparse_adapt.corpus.adapt_folder import differences

    old = {"corpus": "aa11", "base": "b", "teacher": "t1", "seed": 0, "config": None}
    new = {"corpus": "bb22", "base": "b2", "teacher": "t2", "seed": 3, "config": "cc33"}
    assert differences(old, new, sorted(old)) == "base (b -> b2), config, corpus, seed (0 -> 3), teacher (t1 -> t2)"


def test_a_pretrained_partial_folder_without_a_checkpoint_is_the_users(tmp_path):
    from sparse_adapt.corpus.adapt_folder import check_out

    manifest = {"corpus": "c", "base": "b", "teacher": "t", "seed": 0, "given": {}, "config": None, "options": {}}
    (tmp_path / "pretrained.partial").mkdir()
    (tmp_path / "pretrained.partial" / "notes.txt").write_text("mine")
    with pytest.raises(AdaptMismatchError, match="holds no adapt.json"):
        check_out(tmp_path, manifest)


def test_a_resumed_run_that_fails_keeps_what_it_made_before(setup, tmp_path, monkeypatch):
    """Only a fresh run's outputs go when making the inputs fails: a rerun's error must not delete
    the inputs (and edits) an earlier run left in DIR."""
    import sparse_adapt.corpus.adapt as adapt

    class Stop(Exception):
        pass

    def no_training(**kw):
        raise Stop

    monkeypatch.setattr("sparse_adapt.training.pipeline.run_pipeline", no_training)
    out = tmp_path / "run"
    with pytest.raises(Stop):
        _adapt(setup, out)
    made = sorted(p.name for p in out.iterdir())
    assert {"adapt.json", "domain_terms.json", "dictionary.jsonl", "train.jsonl"} <= set(made)

    def failing(*a, **kw):
        raise SparseAdaptError("the inputs could not be made")

    monkeypatch.setattr(adapt, "prepare_inputs", failing)
    with pytest.raises(SparseAdaptError, match="could not be made"):
        _adapt(setup, out)
    assert sorted(p.name for p in out.iterdir()) == made


def test_a_damaged_manifest_is_refused_or_with_overwrite_discarded_with_its_run(tmp_path):
    from sparse_adapt.corpus.adapt_folder import check_out

    manifest = {"corpus": "c", "base": "b", "teacher": "t", "seed": 0, "given": {}, "config": None, "options": {}}
    (tmp_path / "adapt.json").write_text("[" * 100_000)  # too deep for the JSON parser: a RecursionError
    (tmp_path / "train.jsonl").write_text("{}\n")
    with pytest.raises(AdaptMismatchError, match="adapt.json is damaged"):
        check_out(tmp_path, manifest)
    said = []
    check_out(tmp_path, manifest, overwrite=True, hooks=Hooks(message=said.append))
    # the damaged run's inputs go too: the new run must not train on files of a run it cannot read
    assert not (tmp_path / "adapt.json").exists() and not (tmp_path / "train.jsonl").exists()
    assert said and "was damaged" in said[0]


def test_every_held_out_query_gets_its_qrels_and_its_kinds_group(tmp_path):
    from sparse_adapt.corpus.adapt import AdaptFiles, _write_heldout

    held = [{"qid": "a", "query": "qa", "kind": "explicit", "doc_ids": ["d1", "d2", "d3"],
             "teacher_scores": [10.0, 2.0, -8.0]},
            {"qid": "b", "query": "qb", "kind": "control", "doc_ids": ["d4", "d1"], "teacher_scores": [8.0, 0.0]}]
    files = AdaptFiles(tmp_path / "t", tmp_path / "d", tmp_path / "tr")
    _write_heldout(tmp_path, held, files)
    # grades by the bundled rule: >= 8 -> 2, > 0 -> 1, else 0
    assert load_qrels(files.heldout_qrels) == {"a": {"d1": 2, "d2": 1, "d3": 0}, "b": {"d4": 2, "d1": 0}}
    groups = json.loads(files.query_groups.read_text())
    assert groups == {"heldout-pseudo-explicit": ["a"], "heldout-pseudo-control": ["b"]}
    assert [(q.qid, q.text) for q in load_queries(files.heldout_queries)] == [("a", "qa"), ("b", "qb")]


def test_only_a_card_file_has_a_sha256(tmp_path):
    # A folder where the card should be is no card: no hash (and no IsADirectoryError), as a missing one.
    from sparse_adapt.corpus.adapt_folder import card_sha256

    assert card_sha256(tmp_path / "README.md") is None
    (tmp_path / "README.md").mkdir()
    assert card_sha256(tmp_path / "README.md") is None
    (tmp_path / "card.md").write_text("mine")
    assert card_sha256(tmp_path / "card.md") == hashlib.sha256(b"mine").hexdigest()


def test_an_out_that_is_a_file_or_holds_only_a_lock_or_pretraining_temporaries(tmp_path):
    """A file as --out is refused with what it is; a folder holding only the lock of a run killed
    before its manifest, or a killed write of pretrained/, is a run's and starts afresh."""
    from sparse_adapt.corpus.adapt_folder import check_out
    from sparse_adapt.lock import LOCK_FILE

    manifest = {"corpus": "c", "base": "b", "teacher": "t", "seed": 0, "given": {}, "config": None, "options": {}}
    (tmp_path / "file").write_text("mine")
    with pytest.raises(AdaptMismatchError, match="is a file"):
        check_out(tmp_path / "file", manifest)
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_FILE).write_text("")
    (out / ".pretrained.tmp-999999999-1").mkdir()  # no such process: a killed write's temporary
    (out / ".pretrained.partial.tmp-999999999-1").mkdir()
    check_out(out, manifest)
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]


def test_a_manifest_key_the_new_run_lacks_is_a_different_run(tmp_path):
    from sparse_adapt.corpus.adapt_folder import LEGACY_OPTIONS, check_out

    manifest = {"corpus": "c", "base": "b", "teacher": "t", "seed": 0, "given": {}, "config": None,
                "options": dict(LEGACY_OPTIONS)}
    (tmp_path / "adapt.json").write_text(json.dumps({**manifest, "pretrained": "p"}))
    (tmp_path / "train.jsonl").write_text("{}\n")  # a run that made an input: not started afresh
    with pytest.raises(AdaptMismatchError, match=r"other pretrained; use another --out"):
        check_out(tmp_path, manifest)


def test_the_differences_docstring_example_is_what_it_returns():
    # The docstring shows a user's refusal line; its example must be the function's own output.
    from sparse_adapt.corpus.adapt_folder import differences

    example = re.search(r"``([^`]+)``", differences.__doc__).group(1)
    old, new = {"options": {"top": 20}, "base": "b"}, {"options": {"top": 10}, "base": "b2"}
    assert differences(old, new, ["options", "base"]) == example


def test_the_docstrings_name_every_manifest_key_a_rerun_is_refused_for():
    # check_out refuses a rerun whose adapt.json differs in any key run_adapt writes: the
    # sentences telling a user what may not change must name them all ("given" as "given files").
    import ast
    import inspect
    import textwrap

    from sparse_adapt.corpus import adapt, adapt_folder

    tree = ast.parse(textwrap.dedent(inspect.getsource(adapt.run_adapt)))
    manifest = next(n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "manifest" for t in n.targets))
    keys = [k.value for k in manifest.keys]
    assert "corpus" in keys and "seed" in keys
    for module in (adapt, adapt_folder):
        doc = " ".join(module.__doc__.split())
        said = re.search(r"another (corpus, [^.]*?) (?:is|are) refused", doc).group(1)
        named = set(re.split(r", | or ", said.replace("given files", "given")))
        assert set(keys) <= named, (module.__name__, set(keys) - named)


def test_the_legacy_options_comment_names_a_value_for_each_option():
    # The comment says how an older run's files were made, one phrase per legacy option: an option
    # added to LEGACY_OPTIONS without its phrase leaves a user unsure what an old run resumes as.
    import inspect

    from sparse_adapt.corpus import adapt_folder

    source = inspect.getsource(adapt_folder)
    comment = source[source.index("# Options added to"):source.index("LEGACY_OPTIONS =")]
    comment = " ".join(comment.replace("#", "").split())
    phrases = re.search(r"still makes them \(([^)]*)\)", comment).group(1).split(", ")
    assert len(phrases) == len(adapt_folder.LEGACY_OPTIONS)
