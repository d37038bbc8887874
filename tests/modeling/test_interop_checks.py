"""The sentence-transformers files of a model directory, read without loading a model: which
ones sparse-adapt would encode differently, which lengths it takes, and which folder of a dense
model holds the encoder. Each directory is written by hand, one file changed from the files
sparse-adapt saves itself."""

from __future__ import annotations

import json

import pytest

from sparse_adapt.errors import ModelLoadError
from sparse_adapt.modeling.interop import (
    MODEL_CONFIG, MODULES_FILE, POOLING_DIR, TRANSFORMER_CONFIG, sentence_transformers_files,
    sentence_transformers_lengths, sentence_transformers_mismatch, transformer_module, write_sentence_transformers_files,
)
from sparse_adapt.modeling.settings import SETTINGS_FILE

ST = "sentence_transformers.base.modules.transformer.Transformer"
POOLING = "sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling"


def _saved(tmp_path, query: int = 16, document: int = 48):
    """The sentence-transformers files sparse-adapt writes, with its own settings beside them."""
    write_sentence_transformers_files(tmp_path, query, document, 100)
    (tmp_path / SETTINGS_FILE).write_text(json.dumps({"query_max_length": query, "doc_max_length": document}))
    assert sentence_transformers_mismatch(tmp_path) is None  # the unchanged files: nothing to refuse
    return tmp_path


def _write(path, content) -> None:
    path.write_text(content if isinstance(content, str) else json.dumps(content))


def test_the_written_files_make_a_plain_encode_read_documents_and_give_every_row():
    files = sentence_transformers_files(16, 48, 100)
    # SparseEncoder.encode() without a task cuts at max_seq_length: a document's, like SpladeEncoder.encode
    assert files[TRANSFORMER_CONFIG]["max_seq_length"] == 48
    assert files[f"{POOLING_DIR}/config.json"]["embedding_dimension"] == 100


@pytest.mark.parametrize("modules, listed", [
    # the masked-LM in a subfolder: sparse-adapt reads the root's, another model or none
    ([{"type": ST, "path": "0_Transformer"}, {"type": POOLING, "path": POOLING_DIR}], "Transformer, SpladePooling"),
    # an inference-free query side (SparseStaticEmbedding) is no masked-LM
    ([{"type": "x.SparseStaticEmbedding", "path": ""}, {"type": POOLING, "path": POOLING_DIR}],
     "SparseStaticEmbedding, SpladePooling"),
])
def test_modules_other_than_a_root_masked_lm_and_splade_pooling_are_refused(tmp_path, modules, listed):
    _write(_saved(tmp_path) / MODULES_FILE, modules)
    assert f"lists {listed}; sparse-adapt encodes a masked-LM saved in the directory's root" in (
        sentence_transformers_mismatch(tmp_path) or "")


def test_a_dense_hub_model_is_pointed_to_by_its_hub_id_not_its_cache_folder(tmp_path):
    _write(_saved(tmp_path) / MODULES_FILE, [{"type": ST, "path": ""}, {"type": "x.Pooling", "path": "1_Pooling"}])
    said = sentence_transformers_mismatch(tmp_path, "org/dense") or ""
    assert "`sparse-adapt base --from-encoder org/dense --out DIR`" in said and str(tmp_path) not in said


def test_a_pooling_config_is_read_with_sentence_transformers_defaults_and_named_when_broken(tmp_path):
    pooling = _saved(tmp_path) / POOLING_DIR / "config.json"
    _write(pooling, {})  # SpladePooling's defaults are max and relu: sparse-adapt's pooling
    assert sentence_transformers_mismatch(tmp_path) is None
    _write(pooling, {"chunk_size": 8})
    assert sentence_transformers_mismatch(tmp_path) is None
    _write(pooling, "{not json")
    assert sentence_transformers_mismatch(tmp_path) == f"its {POOLING_DIR}/config.json is not JSON"
    _write(pooling, ["max"])  # JSON, but no object: was an AttributeError on loading
    assert sentence_transformers_mismatch(tmp_path) == f"its {POOLING_DIR}/config.json is not a JSON object"


def test_the_model_config_is_refused_when_no_object_and_a_missing_similarity_is_dot(tmp_path):
    config = _saved(tmp_path) / MODEL_CONFIG
    _write(config, ["dot"])
    assert sentence_transformers_mismatch(tmp_path) == f"its {MODEL_CONFIG} is not a JSON object"
    _write(config, {"prompts": ["query: "]})  # was an AttributeError on loading
    assert sentence_transformers_mismatch(tmp_path) == (f"its {MODEL_CONFIG} has prompts that are no JSON object "
                                                        "of prompt names and texts")
    # a SparseEncoder without a similarity scores by dot product, as sparse-adapt does
    _write(config, {"prompts": {}, "similarity_fn_name": None})
    assert sentence_transformers_mismatch(tmp_path) is None
    # 0 active dimensions is a cut to empty vectors there, not "no cut"
    _write(config, {"max_active_dims": 0})
    assert "max_active_dims=0" in (sentence_transformers_mismatch(tmp_path) or "")


@pytest.mark.parametrize("ours, theirs", [
    ("{not json", None),  # a damaged sparse_adapt.json is the settings loader's to name
    ({"query_max_length": 0, "doc_max_length": 48}, None),  # so is a broken length
    (None, [16, 48]),
])
def test_lengths_are_compared_only_when_both_files_hold_usable_values(tmp_path, ours, theirs):
    _saved(tmp_path)
    if ours is not None:
        _write(tmp_path / SETTINGS_FILE, ours)
    if theirs is not None:
        _write(tmp_path / TRANSFORMER_CONFIG, theirs)
    assert sentence_transformers_mismatch(tmp_path) is None


class _Tokenizer:
    def __init__(self, model_max_length):
        self.model_max_length = model_max_length


def test_lengths_of_a_sentence_transformers_model_fall_back_as_it_does(tmp_path):
    write_sentence_transformers_files(tmp_path, 16, 48, 100)
    config = tmp_path / TRANSFORMER_CONFIG
    assert sentence_transformers_lengths(tmp_path, _Tokenizer(512)) == (16, 48)
    _write(config, {"query_length": 16, "max_seq_length": 100})
    assert sentence_transformers_lengths(tmp_path, _Tokenizer(512)) == (16, 100)
    _write(config, {})
    assert sentence_transformers_lengths(tmp_path, _Tokenizer(512)) == (512, 512)
    # transformers' VERY_LARGE_INTEGER: a tokenizer without a limit gives no length to adopt
    assert sentence_transformers_lengths(tmp_path, _Tokenizer(int(1e30))) is None
    assert sentence_transformers_lengths(tmp_path, _Tokenizer(8192)) == (8192, 8192)  # a long-context model's
    _write(config, {"query_length": 16})
    assert sentence_transformers_lengths(tmp_path, _Tokenizer(int(1e30))) is None  # no document length
    for damaged in ("[16, 48]", '"48"'):
        _write(config, damaged)
        with pytest.raises(ModelLoadError, match="holds no JSON object"):
            sentence_transformers_lengths(tmp_path, _Tokenizer(512))
    # no modules.json: a plain transformers model, encoded at sparse-adapt's own defaults
    (tmp_path / MODULES_FILE).unlink()
    assert sentence_transformers_lengths(tmp_path, _Tokenizer(512)) is None


def test_the_transformer_module_of_a_dense_model_is_found_only_where_it_holds_a_model(tmp_path):
    modules = tmp_path / MODULES_FILE
    (tmp_path / "0_Transformer").mkdir()
    _write(modules, [{"type": ST, "path": "0_Transformer"}, {"type": "x.Pooling", "path": "1_Pooling"}])
    assert transformer_module(tmp_path) is None  # the folder holds no config.json
    (tmp_path / "0_Transformer" / "config.json").write_text("{}")
    assert transformer_module(tmp_path) == tmp_path / "0_Transformer"
    for damaged in ("{not json", "[" * 100_000, '{"type": "x"}', "[1, 2]"):
        _write(modules, damaged)
        assert transformer_module(tmp_path) is None


def test_a_sparse_encoder_saved_by_sentence_transformers_5_names_its_masked_lm_mlm_transformer(tmp_path):
    # 5.x saved the masked-LM module as MLMTransformer: the same root model, pooled the same way
    mlm = "sentence_transformers.sparse_encoder.models.MLMTransformer"
    _write(_saved(tmp_path) / MODULES_FILE, [{"type": mlm, "path": ""}, {"type": POOLING, "path": POOLING_DIR}])
    assert sentence_transformers_mismatch(tmp_path) is None


def test_a_module_list_without_types_is_named_not_a_traceback(tmp_path):
    _write(_saved(tmp_path) / MODULES_FILE, [{"path": ""}, {"path": POOLING_DIR}])
    assert sentence_transformers_mismatch(tmp_path) == f"its {MODULES_FILE} is not a sentence-transformers module list"


def test_a_pooling_folder_without_its_config_pools_with_sentence_transformers_defaults(tmp_path):
    (_saved(tmp_path) / POOLING_DIR / "config.json").unlink()  # SpladePooling's defaults: max and relu
    assert sentence_transformers_mismatch(tmp_path) is None


def test_only_a_model_with_dense_pooling_is_pointed_to_the_dense_encoder_command(tmp_path):
    # an inference-free SPLADE (a Router of two sparse sides) pools no dense vector: no `base --from-encoder`
    _write(_saved(tmp_path) / MODULES_FILE, [{"type": "sentence_transformers.base.modules.router.Router", "path": ""}])
    said = sentence_transformers_mismatch(tmp_path, "org/router") or ""
    assert said.startswith(f"its {MODULES_FILE} lists Router;") and "--from-encoder" not in said


def test_a_folder_named_modules_json_makes_no_sentence_transformers_model(tmp_path):
    (tmp_path / MODULES_FILE).mkdir()  # as for a folder named config.json: no traceback
    assert sentence_transformers_mismatch(tmp_path) is None
    assert sentence_transformers_lengths(tmp_path, _Tokenizer(512)) is None


def test_a_modules_json_holding_no_list_has_no_transformer_module(tmp_path):
    (tmp_path / "0_Transformer").mkdir()
    (tmp_path / "0_Transformer" / "config.json").write_text("{}")
    for damaged in ("7", "null", '"0_Transformer"'):  # iterated as they are, a number or null was a TypeError
        _write(tmp_path / MODULES_FILE, damaged)
        assert transformer_module(tmp_path) is None


def test_the_pooling_config_is_read_from_the_folder_modules_json_names(tmp_path):
    # sentence-transformers reads each module from its listed path, not from a fixed folder name
    _saved(tmp_path)
    (tmp_path / "pool").mkdir()
    _write(tmp_path / "pool" / "config.json", {"pooling_strategy": "sum"})
    _write(tmp_path / MODULES_FILE, [{"type": ST, "path": ""}, {"type": POOLING, "path": "pool"}])
    assert "pooling_strategy='sum'" in (sentence_transformers_mismatch(tmp_path) or "")


def test_a_pooling_config_nested_too_deep_is_named_not_a_traceback(tmp_path):
    _write(_saved(tmp_path) / POOLING_DIR / "config.json", "[" * 100_000)
    assert sentence_transformers_mismatch(tmp_path) == f"its {POOLING_DIR}/config.json is not JSON"


def test_a_folder_named_like_the_transformer_config_is_refused_not_read_as_absent(tmp_path):
    # read as absent, texts were cut at the tokenizer's limit; sentence-transformers fails on it
    write_sentence_transformers_files(tmp_path, 16, 48, 100)
    (tmp_path / TRANSFORMER_CONFIG).unlink()
    (tmp_path / TRANSFORMER_CONFIG).mkdir()
    with pytest.raises(ModelLoadError, match="is damaged"):
        sentence_transformers_lengths(tmp_path, _Tokenizer(512))
