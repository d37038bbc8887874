"""Saved models in other SPLADE implementations: the real sentence-transformers
``SparseEncoder`` and plain transformers + max pooling give sparse-adapt's vectors, because
the special-token exclusion lives in the saved weights."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import AutoModelForMaskedLM, AutoTokenizer

from corpora import GATROCRAPTIC
from sparse_adapt.data import load_documents, load_queries
from sparse_adapt.losses.mlm import mlm_loss
from sparse_adapt.modeling.base import set_bias
from sparse_adapt.modeling.calibration import calibrate_bias
from sparse_adapt.modeling.encoder import EXCLUDED_BIAS, SpecialTokensNotExcludedWarning, SpladeEncoder
from sparse_adapt.modeling.interop import MODULES_FILE
from sparse_adapt.modeling.onnx import compare
from sparse_adapt.modeling.vocabulary import extend_vocabulary

QUERIES = [
    "database connection timeout",
    "Gatrocraptic expenditure",
    # longer than the tiny models' 16-token query limit: truncation must match too
    "how do I configure OAuth2 authentication for the API v3 endpoints with client id and secret and redirect URIs",
]
DOCUMENTS = [
    "Reset your password",
    "Certificate management includes renewal, revocation, and validation of SSL certificates. " * 4,  # > 48 tokens
    "x",
]


def st_encode(directory, texts, kind, **options) -> sp.csr_matrix:
    """Vectors from the real sentence-transformers, loaded from the directory alone."""
    from sentence_transformers import SparseEncoder

    model = SparseEncoder(str(directory), device="cpu")
    encode = model.encode_query if kind == "query" else model.encode_document
    out = encode(list(texts), convert_to_sparse_tensor=True, show_progress_bar=False, **options).coalesce()
    (rows, cols), values = out.indices().numpy(), out.values().numpy()
    return sp.csr_matrix((values, (rows, cols)), shape=tuple(out.shape), dtype=np.float32)


def assert_identical(ours: sp.csr_matrix, theirs: sp.csr_matrix, atol: float = 1e-5) -> None:
    """Same non-zeros in every row, weights within ``atol``; extra columns (head rows past
    the tokenizer) must be empty."""
    assert theirs.shape[0] == ours.shape[0] and theirs.shape[1] >= ours.shape[1]
    assert theirs[:, ours.shape[1]:].nnz == 0
    agreement = compare(ours, theirs[:, : ours.shape[1]].tocsr())
    assert agreement.same_nonzeros, "different active terms"
    assert agreement.max_abs_diff <= atol


def plain_transformers(directory, texts, max_length) -> np.ndarray:
    """SPLADE max pooling over a plain AutoModelForMaskedLM: no sparse-adapt code involved."""
    tok = AutoTokenizer.from_pretrained(directory)
    mlm = AutoModelForMaskedLM.from_pretrained(directory).eval()
    batch = tok(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        logits = mlm(**batch).logits
    return (torch.log1p(torch.relu(logits)) * batch["attention_mask"].unsqueeze(-1)).amax(1).numpy()


@pytest.mark.parametrize("kind,texts", [("query", QUERIES), ("document", DOCUMENTS)])
def test_sparse_encoder_loads_a_saved_model_with_identical_vectors(tiny_mlm, tmp_path, kind, texts):
    tiny_mlm.save_pretrained(tmp_path / "m")
    ours = tiny_mlm.encode(texts, kind)
    assert_identical(ours, st_encode(tmp_path / "m", texts, kind))
    # the special tokens would fire in this random model: the agreement is not vacuous
    special = tiny_mlm.excluded_ids()
    raw = tiny_mlm.mlm.get_output_embeddings()
    assert (raw.bias[special] == EXCLUDED_BIAS).all()


def test_max_active_dims_cuts_like_sentence_transformers(tiny_mlm, tmp_path):
    tiny_mlm.save_pretrained(tmp_path / "m")
    ours = tiny_mlm.encode_document(DOCUMENTS, max_active_dims=7)
    assert ours.getnnz(axis=1).tolist() == [7, 7, 7]
    assert_identical(ours, st_encode(tmp_path / "m", DOCUMENTS, "document", max_active_dims=7))


def test_saved_weights_alone_exclude_special_tokens(tiny_bert, tmp_path):
    tiny_bert.save_pretrained(tmp_path / "m")
    plain = plain_transformers(tmp_path / "m", DOCUMENTS, tiny_bert.settings.doc_max_length)
    special = tiny_bert.excluded_ids()
    assert (plain[:, special] == 0).all()
    np.testing.assert_allclose(plain, tiny_bert.encode(DOCUMENTS).toarray(), atol=1e-5)


def test_leaving_the_special_rows_out_is_caught(tiny_bert, tmp_path):
    """Negative control: the same directory with the special-token bias rows reset to 0
    gives sentence-transformers vectors with [CLS]/[SEP], and the comparison fails."""
    tiny_bert.save_pretrained(tmp_path / "m")
    weights = load_file(tmp_path / "m" / "model.safetensors")
    (key,) = [k for k in weights if k.endswith("predictions.bias")]
    weights[key][tiny_bert.excluded_ids()] = 0.0
    save_file(weights, tmp_path / "m" / "model.safetensors", metadata={"format": "pt"})
    theirs = st_encode(tmp_path / "m", DOCUMENTS, "document")
    assert theirs[:, tiny_bert.tokenizer.cls_token_id].nnz == len(DOCUMENTS)
    with pytest.raises(AssertionError):
        assert_identical(tiny_bert.encode(DOCUMENTS), theirs)


def test_module_files_carry_query_and_document_lengths(tiny_bert, tmp_path):
    tiny_bert.save_pretrained(tmp_path / "m")
    modules = json.loads((tmp_path / "m" / MODULES_FILE).read_text())
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "SpladePooling"]
    config = json.loads((tmp_path / "m" / "sentence_bert_config.json").read_text())
    assert (config["query_length"], config["document_length"]) == (16, 48)
    assert json.loads((tmp_path / "m" / "1_SpladePooling" / "config.json").read_text())["pooling_strategy"] == "max"


def test_shared_bias_changes_and_extension_keep_the_exclusion(tmp_path):
    from tests.conftest import make_tiny_bert

    splade = make_tiny_bert()
    set_bias(splade.mlm, calibrate_bias(splade, DOCUMENTS, 10))  # fills every row, special ones too
    # "gatro☃" has a character the vocabulary lacks: its only piece is [UNK]
    report = extend_vocabulary(splade, {"jargon": ["Gatrocraptic", "gatro☃"]})
    bias = splade.mlm.get_output_embeddings().bias
    unk_term = next(t for t in report.added if t.normalized == "gatro☃")
    assert unk_term.pieces == ["[UNK]"]
    assert bias[unk_term.token_id] > EXCLUDED_BIAS / 2  # a usable prior, not the exclusion
    splade.save_pretrained(tmp_path / "m")
    saved = SpladeEncoder.from_pretrained(tmp_path / "m").mlm.get_output_embeddings().bias
    assert (saved[splade.excluded_ids()] == EXCLUDED_BIAS).all()
    texts = ["Gatrocraptic metrics gatro☃", *DOCUMENTS]
    assert_identical(splade.encode(texts), st_encode(tmp_path / "m", texts, "document"))


def test_head_rows_past_the_tokenizer_stay_empty(tmp_path):
    from tests.conftest import make_tiny_bert

    splade = make_tiny_bert()
    splade.mlm.resize_token_embeddings(splade.vocab_size + 6, mean_resizing=False)
    splade.refresh_vocabulary()
    splade.save_pretrained(tmp_path / "m")
    theirs = st_encode(tmp_path / "m", DOCUMENTS, "document")
    assert theirs.shape[1] == splade.vocab_size + 6
    assert_identical(splade.encode(DOCUMENTS), theirs)


def test_training_gradients_never_reach_the_excluded_rows(tiny_bert):
    """Relu below 0 and a softmax probability of exactly 0 give those bias rows no gradient,
    so optimiser steps (biases have no weight decay) leave the exclusion in place."""
    tiny_bert.train()
    batch = tiny_bert.tokenize(DOCUMENTS, "document")
    labels = batch["input_ids"].clone()
    labels[torch.isin(labels, torch.tensor(tiny_bert.excluded_ids()))] = -100
    loss = mlm_loss(tiny_bert.mlm, batch["input_ids"], batch["attention_mask"], labels)
    loss = loss + tiny_bert(batch["input_ids"], batch["attention_mask"]).sum()
    loss.backward()
    grad = tiny_bert.mlm.get_output_embeddings().bias.grad
    assert grad.abs().sum() > 0
    assert (grad[tiny_bert.excluded_ids()] == 0).all()


def test_a_head_without_decoder_bias_warns_and_writes_no_module_files(tmp_path):
    from tests.conftest import make_tiny_bert

    splade = make_tiny_bert()
    old = splade.mlm.get_output_embeddings()
    splade.mlm.cls.predictions.decoder = nn.Linear(old.in_features, old.out_features, bias=False)
    with pytest.warns(SpecialTokensNotExcludedWarning):
        assert splade.exclude_special_tokens() is False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpecialTokensNotExcludedWarning)
        splade.save_pretrained(tmp_path / "m")
    assert not (tmp_path / "m" / MODULES_FILE).exists()


@pytest.mark.slow
def test_offline_base_in_sparse_encoder(offline_base, tmp_path):
    offline_base.save_pretrained(tmp_path / "m")
    docs = [d.text for d in load_documents(GATROCRAPTIC.docs)]
    queries = [q.text for q in load_queries(GATROCRAPTIC.queries)]
    assert_identical(offline_base.encode_document(docs), st_encode(tmp_path / "m", docs, "document"))
    assert_identical(offline_base.encode_query(queries), st_encode(tmp_path / "m", queries, "query"))


def _saved_by_sentence_transformers(tiny_mlm, tmp_path, name: str, pooling: dict | None = None, prompts=None, **model):
    """A model directory written by sentence-transformers' own ``save`` (not by sparse-adapt)."""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    tiny_mlm.save_pretrained(tmp_path / "source")
    modules = [Transformer(str(tmp_path / "source"), transformer_task="fill-mask"), SpladePooling(**(pooling or {}))]
    model = SparseEncoder(modules=modules, device="cpu", prompts=prompts, **model)
    model.save(str(tmp_path / name), create_model_card=False)  # the card computes a similarity example: noise
    return tmp_path / name


def test_a_model_saved_by_sentence_transformers_loads_with_its_own_vectors(tiny_mlm, tmp_path):
    directory = _saved_by_sentence_transformers(tiny_mlm, tmp_path, "st")
    loaded = SpladeEncoder.from_pretrained(directory)
    for kind, texts in (("query", QUERIES), ("document", DOCUMENTS)):
        assert_identical(loaded.encode(texts, kind), st_encode(directory, texts, kind))


def test_a_sentence_transformers_model_whose_special_tokens_fire_differs_in_their_columns_only(tmp_path):
    """Built in sentence-transformers from a masked LM sparse-adapt never saved, [CLS] and [SEP]
    fire there; sparse-adapt leaves them out (as the README says), and agrees on every other column."""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder.modules import SpladePooling
    from transformers import BertConfig, BertForMaskedLM

    from tests.conftest import _tokenizer

    torch.manual_seed(0)
    tok = _tokenizer()
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128)
    BertForMaskedLM(cfg).save_pretrained(tmp_path / "source")
    tok.save_pretrained(tmp_path / "source")
    modules = [Transformer(str(tmp_path / "source"), transformer_task="fill-mask"), SpladePooling()]
    SparseEncoder(modules=modules, device="cpu").save(str(tmp_path / "st"), create_model_card=False)
    loaded = SpladeEncoder.from_pretrained(tmp_path / "st")
    special = loaded.excluded_ids()
    for kind, texts in (("query", QUERIES), ("document", DOCUMENTS)):
        theirs = st_encode(tmp_path / "st", texts, kind).tolil()
        assert theirs[:, special].nnz > 0  # they fire there: the difference is real
        theirs[:, special] = 0
        assert_identical(loaded.encode(texts, kind), theirs.tocsr())


def test_a_sentence_transformers_model_without_our_settings_is_encoded_at_its_own_lengths(tiny_bert, tmp_path):
    """Built the ordinary sentence-transformers way (no per-task lengths, a 100-piece limit):
    sparse-adapt's own defaults (64 / 256) would cut a long query elsewhere than it does."""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    tiny_bert.save_pretrained(tmp_path / "source")
    transformer = Transformer(str(tmp_path / "source"), transformer_task="fill-mask")
    transformer.query_length = transformer.document_length = None
    transformer.max_seq_length = 100
    SparseEncoder(modules=[transformer, SpladePooling()], device="cpu").save(str(tmp_path / "st"), create_model_card=False)
    loaded = SpladeEncoder.from_pretrained(tmp_path / "st")
    assert (loaded.settings.query_max_length, loaded.settings.doc_max_length) == (100, 100)
    long = ["Certificate management includes renewal, revocation, and validation of SSL certificates. " * 8]
    assert len(loaded.tokenizer(long[0])["input_ids"]) > 100  # cut at 100, not at 64 or 256
    for kind in ("query", "document"):
        assert_identical(loaded.encode(long + QUERIES, kind), st_encode(tmp_path / "st", long + QUERIES, kind))


def test_a_damaged_sentence_transformers_config_is_refused_not_read_as_absent(tiny_bert, tmp_path):
    """Read as {}, texts were cut at the tokenizer's limit, silently."""
    from sentence_transformers import SparseEncoder

    from sparse_adapt.modeling.encoder import ModelLoadError

    tiny_bert.save_pretrained(tmp_path / "source")
    SparseEncoder(str(tmp_path / "source"), device="cpu").save(str(tmp_path / "st"), create_model_card=False)
    config = tmp_path / "st" / "sentence_bert_config.json"
    assert config.is_file()
    for damaged, said in (("{not json", "is damaged"), ("[64, 256]", "holds no JSON object")):
        config.write_text(damaged)
        with pytest.raises(ModelLoadError, match=f"{re.escape(str(config))} {said}"):
            SpladeEncoder.from_pretrained(tmp_path / "st")
    config.unlink()  # absent: the tokenizer's limit, as sentence-transformers takes it
    assert SpladeEncoder.from_pretrained(tmp_path / "st").settings.query_max_length > 0


@pytest.mark.parametrize("pooling, prompts, model, fragment", [
    ({"pooling_strategy": "sum"}, None, {}, "pooling_strategy='sum'"),
    ({"activation_function": "log1p_relu"}, None, {}, "activation_function='log1p_relu'"),
    (None, {"query": "query: ", "document": ""}, {}, "prompts {'query': 'query: '}"),
    # sentence-transformers would rank by cosine, or cut every vector to 5 terms: silently not here
    (None, None, {"similarity_fn_name": "cosine"}, "similarity_fn_name='cosine'"),
    (None, None, {"max_active_dims": 5}, "max_active_dims=5"),
])
def test_a_sentence_transformers_model_pooled_otherwise_is_refused(tiny_mlm, tmp_path, pooling, prompts, model, fragment):
    from sparse_adapt.modeling.encoder import ModelLoadError

    directory = _saved_by_sentence_transformers(tiny_mlm, tmp_path, "st", pooling, prompts, **model)
    with pytest.raises(ModelLoadError, match="is a sentence-transformers model that sparse-adapt would encode differently") as e:
        SpladeEncoder.from_pretrained(directory)
    assert fragment in str(e.value)


def test_lengths_sentence_transformers_saved_over_ours_are_refused_not_ignored(tiny_bert, tmp_path):
    """sentence-transformers re-saving an adapted model with other lengths left our
    ``sparse_adapt.json`` saying 64 / 256: each library then cut texts at its own."""
    from sentence_transformers import SparseEncoder

    from sparse_adapt.modeling.encoder import ModelLoadError

    tiny_bert.save_pretrained(tmp_path / "m")
    st = SparseEncoder(str(tmp_path / "m"), device="cpu")
    st[0].query_length, st[0].document_length = 4, 6
    st.save(str(tmp_path / "m"), create_model_card=False)
    with pytest.raises(ModelLoadError, match="query_length=4, sparse_adapt.json query_max_length=16") as e:
        SpladeEncoder.from_pretrained(tmp_path / "m")
    assert "document_length=6" in str(e.value)


def test_a_sentence_transformers_model_with_other_modules_is_refused(tiny_mlm, tmp_path):
    from sparse_adapt.modeling.encoder import ModelLoadError

    directory = _saved_by_sentence_transformers(tiny_mlm, tmp_path, "st")
    modules = json.loads((directory / MODULES_FILE).read_text())
    modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                    "type": "sentence_transformers.base.modules.normalize.Normalize"})
    (directory / MODULES_FILE).write_text(json.dumps(modules))
    with pytest.raises(ModelLoadError, match="lists Transformer, SpladePooling, Normalize") as e:
        SpladeEncoder.from_pretrained(directory)
    assert "base --from-encoder" not in str(e.value)  # it pools sparsely: no dense encoder
    # a dense model (all-MiniLM-L6-v2's modules): pointed to the command that gives it a head
    dense = [{**m, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"} if i == 1 else m
             for i, m in enumerate(modules)]
    (directory / MODULES_FILE).write_text(json.dumps(dense))
    with pytest.raises(ModelLoadError, match=rf"lists Transformer, Pooling, Normalize; .*A dense encoder: "
                                             rf"`sparse-adapt base --from-encoder {re.escape(str(directory))} --out DIR`"):
        SpladeEncoder.from_pretrained(directory)


def test_a_shared_bias_set_after_building_is_excluded_again_when_saved(tiny_bert, tmp_path):
    # `base --bias` fills every decoder-bias row, special ones too: the save bakes the exclusion back in
    set_bias(tiny_bert.mlm, 0.5)
    tiny_bert.save_pretrained(tmp_path / "m")
    weights = load_file(tmp_path / "m" / "model.safetensors")
    (key,) = [k for k in weights if k.endswith("predictions.bias")]
    special = tiny_bert.excluded_ids()
    assert (weights[key][special] == EXCLUDED_BIAS).all()
    assert (weights[key][[i for i in range(tiny_bert.vocab_size) if i not in special]] == 0.5).all()
