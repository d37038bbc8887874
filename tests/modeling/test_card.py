"""The model card: Hub metadata, what the model is, the run's numbers, how to load it."""

from __future__ import annotations

import json

from sparse_adapt.modeling.card import OFFLINE_MINILM_HUB_ID, hub_base_model, model_card, unedited_card, write_model_card
from sparse_adapt.training.rundir import stage_ends

MANIFEST = {
    "stages": ["extend", "distill"], "seed": 7, "base": "offline-minilm",
    "config": {"distill": {"lr": 0.00025, "epochs": 3}}, "inputs": {"corpus": "ab" * 32},
}
RECORDS = [
    {"event": "stage_end", "stage": "extend", "seconds": 0.1, "added": ["gatrocraptic"], "vocab_size": 30523},
    {"event": "stage_end", "stage": "distill", "seconds": 9.5, "last": {"total": 1.5, "kd": 0.25}},
]


def _metadata(card: str) -> dict[str, str]:
    head = card.split("---\n")[1]
    return {k.strip(): v.split("#")[0].strip() for k, v in (line.split(":", 1) for line in head.splitlines()
                                                              if ":" in line and not line.startswith(("#", "-")))}


def test_base_model_is_a_hub_id_or_left_for_the_user(tmp_path):
    assert hub_base_model("offline-minilm") == OFFLINE_MINILM_HUB_ID
    assert hub_base_model("naver/splade-cocondenser-ensembledistil") == "naver/splade-cocondenser-ensembledistil"
    local = tmp_path / "org" / "model"
    local.mkdir(parents=True)
    assert hub_base_model(str(local)) is None
    assert hub_base_model("runs/h4/final") is None
    # a relative path spelt from the working directory is no Hub id, even when it is not here
    assert hub_base_model("./model") is None and hub_base_model("../model") is None


def test_card_of_a_run_without_evaluation(tiny_bert):
    from sparse_adapt.modeling.vocabulary import extend_vocabulary

    extend_vocabulary(tiny_bert, {"jargon": ["Gatrocraptic"], "acronyms": ["API"]})
    tiny_bert.settings.base = "offline-minilm"
    card = model_card(tiny_bert, MANIFEST, RECORDS, name="h2")
    meta = _metadata(card)
    assert meta["library_name"] == "sentence-transformers" and meta["base_model"] == OFFLINE_MINILM_HUB_ID
    assert meta["license"] == "other"
    base_line = f"- Base model: `offline-minilm` ({OFFLINE_MINILM_HUB_ID} with a SPLADE head built by sparse-adapt)\n"
    assert base_line in card
    assert "- splade" in card and "- sparse-encoder" in card
    assert "| `gatrocraptic` | jargon |" in card and "| yes |" in card
    assert "| `api` | acronyms |" in card and "already one token" in card
    assert "Stages: extend -> distill" in card and "seed 7" in card and '"lr": 0.00025' in card
    assert "no retrieval metrics" in card and "| distill | 9.5 | last step: total 1.5, kd 0.25 |" in card
    assert "max_length=16" in card  # the model's own query length in the transformers snippet


def test_card_with_evaluation_numbers_and_written_atomically(tiny_bert, tmp_path):
    log = tmp_path / "train_log.jsonl"
    log.write_text('{"stage": "distill", "step": 1, "loss": 3.0}\n' + "".join(json.dumps(r) + "\n" for r in RECORDS))
    assert [r["stage"] for r in stage_ends(log)] == ["extend", "distill"]
    final = tmp_path / "final"
    final.mkdir()
    path = write_model_card(final, tiny_bert, MANIFEST, stage_ends(log), {"queries": {"ndcg@10": 0.79712, "mrr@10": 0.9}})
    card = path.read_text(encoding="utf-8")
    assert "| query set | mrr@10 | ndcg@10 |" in card and "| queries | 0.9000 | 0.7971 |" in card
    assert "no retrieval metrics" not in card
    assert "# base_model:" in card  # tiny-bert is no Hub id: a commented key to fill in
    assert sorted(p.name for p in final.iterdir()) == ["README.md"]
    # sealed: an edit anywhere, even only after the seal, makes it a card sparse-adapt did not write
    assert unedited_card(path) and card.endswith(" -->\n") and card.count("sha256 of the text above") == 1
    for edited in (card.replace("0.7971", "0.80"), card + "our notes\n", card.replace(" -->\n", " -->"), card + "\n"):
        path.write_text(edited, encoding="utf-8")
        assert not unedited_card(path), edited[-120:]
    path.write_bytes(b"\xff" + card.encode())
    assert not unedited_card(path) and not unedited_card(final / "missing.md")


def test_card_of_an_adapt_run_is_named_by_it_and_says_the_average(tiny_bert, tmp_path):
    """adapt keeps its training run in DIR/training: the card is named after DIR, and its
    weights (distill.interpolate 0.5) are an average the card must not pass off as the distilled model."""
    run = tmp_path / "mine"
    (run / "training" / "final").mkdir(parents=True)
    (run / "adapt.json").write_text("{}")
    averaged = {**MANIFEST, "config": {"distill": {"lr": 0.00025, "interpolate": 0.5}}}
    card = write_model_card(run / "training" / "final", tiny_bert, averaged).read_text(encoding="utf-8")
    assert card.splitlines()[card.splitlines().index("---", 1) + 2] == "# mine: domain-adapted with sparse-adapt"
    assert "These weights are 0.5 x the distilled model + 0.5 x the run's starting point" in card
    plain = write_model_card(tmp_path / "h4" / "final", tiny_bert, MANIFEST).read_text(encoding="utf-8")
    assert "# h4: domain-adapted" in plain and "These weights are" not in plain


def test_card_of_a_validated_run_says_which_epoch_it_kept_and_by_what(tiny_bert):
    """It said "no retrieval metrics" and gave the last epoch's losses for weights of an earlier epoch."""
    validated = {"event": "stage_end", "stage": "distill", "seconds": 9.5, "last": {"total": 16.4},
                 "epochs_run": 16, "best_epoch": 5, "best_objective": 0.106, "valid_queries": ["q2", "q7", "q8", "q13"]}
    card = model_card(tiny_bert, MANIFEST, [RECORDS[0], validated], name="h4")
    assert "no retrieval metrics" not in card and "measured retrieval only on its validation queries" in card
    assert "| distill | 9.5 | kept epoch 5 of 16 by validation nDCG@10 on 4 queries (objective +0.1060) |" in card
    assert "total 16.4" not in card


def test_the_domain_table_gives_bpe_terms_their_running_text_ids():
    # `the` is `Ġthe` in running text (its bare string was listed with the <unk> id); a term bound
    # to an existing entry is no new token
    from sparse_adapt.modeling.card import model_card
    from sparse_adapt.modeling.vocabulary import extend_vocabulary
    from tests.conftest import make_tiny_roberta

    enc = make_tiny_roberta()
    vocab = enc.tokenizer.get_vocab()
    bound = next(w for w in vocab if w.isalpha() and len(w) > 3 and "Ġ" + w not in vocab and not w.startswith("Ġ"))
    report = extend_vocabulary(enc, {"x": ["the", "gatrocraptic", bound]})
    ids = {t.term: t.token_id for t in report.terms}
    rows = [line for line in model_card(enc).splitlines() if line.startswith("| `")]
    assert f"| `the` | x | {vocab['Ġthe']} | no (already one token) |" in rows
    assert f"| `{bound}` | x | {vocab[bound]} | no (already one token) |" in rows
    assert f"| `gatrocraptic` | x | {ids['gatrocraptic']} | yes |" in rows and ids["gatrocraptic"] >= len(vocab)


def test_a_relative_local_folder_shaped_like_a_hub_id_is_no_hub_base(tmp_path, monkeypatch):
    # `--base org/model` from the folder that holds it: the card must not claim a Hub model of that name
    (tmp_path / "org" / "model").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert hub_base_model("org/model") is None
    assert hub_base_model("org/other") == "org/other"


def test_stage_ends_of_a_run_without_a_log_or_with_blank_lines(tmp_path):
    assert stage_ends(tmp_path / "train_log.jsonl") == []
    log = tmp_path / "train_log.jsonl"
    log.write_text("\n" + json.dumps(RECORDS[0]) + "\n\n  \n" + json.dumps(RECORDS[1]) + "\n")
    assert stage_ends(log) == RECORDS


def test_stage_ends_skip_a_torn_line_and_records_that_are_no_object(tmp_path):
    """A write killed mid-line (the run was never resumed) or an array line: the card is
    still written from the records that parse, as ``restart_log`` keeps them."""
    log = tmp_path / "train_log.jsonl"
    torn = json.dumps({"event": "stage_end", "stage": "warmup"})[:20]
    log.write_bytes((json.dumps(RECORDS[0]) + "\n[1, 2]\n\"stage_end\"\n" + json.dumps(RECORDS[1]) + "\n"
                     + torn).encode("utf-8") + b"\n\xff\xfe\n")
    assert stage_ends(log) == RECORDS


def test_card_numbers_are_the_runs_own(tiny_bert):
    """Each number a reader takes from the card, from a run whose values differ pairwise
    (query 16 / document 48 tokens, interpolate 0.25)."""
    mlm = {"event": "stage_end", "stage": "mlm", "seconds": 3.0, "final_epoch_loss": 2.5, "steps": 40, "epochs": 2}
    extend = {**RECORDS[0], "added": ["gatrocraptic", "relay"]}
    manifest = {**MANIFEST, "config": {"distill": {"interpolate": 0.25}}}
    tiny_bert.settings.domain_token_ids = [7, 9]  # domain tokens of its own, without a term each
    card = model_card(tiny_bert, manifest, [extend, mlm], {"q": {"ndcg@10": 0.5, "mrr@10": 0.625}})
    # a markdown table needs a separator cell per column, the query-set one included
    assert "| query set | mrr@10 | ndcg@10 |\n|---|---|---|\n| q | 0.6250 | 0.5000 |" in card
    assert "- Maximum lengths: queries 16, documents 48 tokens" in card
    assert f"- Vocabulary: {tiny_bert.vocab_size} tokens, 2 of them domain tokens" in card
    assert "# max_length: 16 for queries, 48 for documents" in card
    assert "These weights are 0.75 x the distilled model + 0.25 x the run's starting point" in card
    assert f"- corpus: `{'ab' * 32}`" in card
    assert "| mlm | 3.0 | last epoch mean MLM loss 2.5 (40 steps) |" in card
    assert "| extend | 0.1 | added `gatrocraptic`, `relay`; vocabulary 30523 |" in card


def test_the_domain_table_is_grouped_by_category_then_term(tiny_bert):
    from sparse_adapt.modeling.vocabulary import extend_vocabulary

    extend_vocabulary(tiny_bert, {"jargon": ["zygotrin", "gatrocraptic"], "acronyms": ["ZQL"]})
    rows = [line.split("|")[1].strip() for line in model_card(tiny_bert).splitlines() if line.startswith("| `")]
    assert rows == ["`zql`", "`gatrocraptic`", "`zygotrin`"]


def test_a_training_run_named_training_keeps_its_name(tiny_bert, tmp_path):
    # only adapt's DIR/training/final (beside DIR/adapt.json) is named after DIR
    card = write_model_card(tmp_path / "h4" / "training" / "final", tiny_bert).read_text(encoding="utf-8")
    assert "# training: domain-adapted with sparse-adapt" in card


def test_a_card_without_a_run_has_no_training_section_and_says_its_stages_are_unknown(tiny_bert):
    # a model saved outside a run (no run.json): no "seed None, base `None`" section
    card = model_card(tiny_bert)
    assert "## Training" not in card and "seed None" not in card
    assert "- Stages: not recorded" in card
    # a manifest without stages says so too, not an empty list
    assert "- Stages: not recorded" in model_card(tiny_bert, {"seed": 3})


def test_a_card_written_into_a_folder_not_named_final_is_named_after_that_folder(tiny_bert, tmp_path):
    card = write_model_card(tmp_path / "runs" / "mymodel", tiny_bert).read_text(encoding="utf-8")
    assert "# mymodel: domain-adapted with sparse-adapt" in card


def test_query_sets_measured_with_other_metrics_leave_a_blank_cell(tiny_bert):
    card = model_card(tiny_bert, evaluation={"dev": {"ndcg@10": 0.5, "mrr@10": 0.25}, "test": {"ndcg@10": 0.75}})
    assert "| dev | 0.2500 | 0.5000 |\n| test |  | 0.7500 |" in card


def test_an_extend_stage_that_added_nothing_says_so(tiny_bert):
    extend = {**RECORDS[0], "added": []}
    assert "| extend | 0.1 | added no tokens; vocabulary 30523 |" in model_card(tiny_bert, MANIFEST, [extend])


def test_a_card_with_no_domain_terms_and_no_stage_records_shows_no_empty_tables(tiny_bert):
    card = model_card(tiny_bert, MANIFEST)
    assert "## Domain tokens" not in card and "| stage | seconds | result |" not in card
    assert "- Base model: `tiny-bert`\n" in card  # the offline-minilm note is that base's alone


def test_a_domain_term_the_tokenizer_does_not_keep_whole_has_no_token_id(tiny_bert):
    # e.g. a term a BPE keeps whole only at a text's start: its row says "-", not "None"
    tiny_bert.settings.domain_terms = {"two words": "jargon"}
    rows = [line for line in model_card(tiny_bert).splitlines() if line.startswith("| `")]
    assert rows == ["| `two words` | jargon | - | - |"]


def test_a_training_run_kept_inside_an_adapt_folder_keeps_its_own_name(tiny_bert, tmp_path):
    # only DIR/training/final is adapt's own run: DIR/ablation/final is a run named ablation
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "adapt.json").write_text("{}")
    card = write_model_card(tmp_path / "mine" / "ablation" / "final", tiny_bert).read_text(encoding="utf-8")
    assert "# ablation: domain-adapted with sparse-adapt" in card


def _card_blocks(card: str, language: str) -> list[str]:
    return [block.split("```", 1)[0] for block in card.split(f"```{language}\n")[1:]]


def test_the_commands_and_options_a_card_names_are_the_cli_s(tiny_bert):
    # Every way the card can end (validated, not evaluated, averaged): each names commands to run.
    import re

    import typer.main

    from sparse_adapt.cli import app

    records = RECORDS + [{"event": "stage_end", "stage": "distill", "best_epoch": 1, "epochs_run": 2}]
    manifest = {**MANIFEST, "config": {"distill": {"interpolate": 0.5}}}
    text = model_card(tiny_bert, MANIFEST, RECORDS) + model_card(tiny_bert, manifest, records)
    commands = typer.main.get_command(app).commands
    named = re.findall(r"sparse-adapt ([a-z][a-z-]*)([^`\n#]*)", text)
    assert {"evaluate", "encode", "onnx", "export", "train"} <= {name for name, _ in named}
    for name, rest in named:
        assert name in commands, name
        flags = {flag for p in commands[name].params for flag in p.opts}
        assert set(re.findall(r"--[a-z][a-z-]*", rest)) <= flags, (name, rest)


def _run_card_snippet(splade, directory, which: int, placeholder: str) -> dict:
    """Run the card's ``which``-th python block on ``splade`` saved in ``directory``, its query
    longer than the query length: the snippet must cut it where the model does."""
    import contextlib
    import io

    path = str(splade.save_pretrained(directory))
    query = " ".join(["database connection timeout"] * splade.settings.query_max_length)
    code = _card_blocks(model_card(splade), "python")[which]
    scope: dict = {"query": query}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(code.replace(placeholder, path).replace("your query", query), scope)
    return scope


def test_the_cards_transformers_snippet_gives_the_models_own_query_vectors(tiny_bert, tmp_path):
    # The card says every implementation it shows gives the same vectors.
    import numpy as np

    scope = _run_card_snippet(tiny_bert, tmp_path / "m", 1, "PATH_OR_HUB_ID")
    ours = tiny_bert.encode_query([scope["query"]]).toarray()
    np.testing.assert_allclose(scope["weights"].numpy(), ours, atol=1e-5)
    assert (ours > 0).any()


def test_the_cards_sparse_adapt_snippet_runs_and_gives_the_models_own_query_vectors(tiny_bert, tmp_path):
    import numpy as np

    scope = _run_card_snippet(tiny_bert, tmp_path / "m", 2, "PATH")
    ours = tiny_bert.encode_query([scope["query"]]).toarray()
    np.testing.assert_allclose(scope["vectors"].toarray(), ours, atol=1e-5)


def test_the_log_a_card_names_is_the_file_a_run_writes(tiny_bert):
    import re

    from sparse_adapt.training.rundir import LOG_FILE

    validated = RECORDS + [{"event": "stage_end", "stage": "distill", "best_epoch": 1, "epochs_run": 2}]
    for records in (RECORDS, validated):
        assert set(re.findall(r"`([\w.]+\.jsonl)`", model_card(tiny_bert, MANIFEST, records))) == {LOG_FILE}
