"""A model adapted with ``sparse-adapt train`` where users already are: it loads in
sentence-transformers' ``SparseEncoder`` with identical vectors, exports to ONNX and runs in
ONNX Runtime with identical top-10 terms, and carries a Hugging Face model card."""

from __future__ import annotations

import json

import pytest

from sparse_adapt.cli import main
from sparse_adapt.modeling.card import CARD_FILE
from sparse_adapt.modeling.encoder import EXCLUDED_BIAS, SpladeEncoder
from sparse_adapt.modeling.onnx import TOLERANCE, OnnxSpladeEncoder, compare
from tests.conftest import make_tiny_bert
from tests.modeling.test_interop import assert_identical, st_encode
from tests.training.test_stages import DICTIONARY, DOCS, TERMS_JSON, TRAIN, _jsonl

QUERIES = [
    "monitoring company spending",
    "Zorblatt review",
    "install the agent with apt-get and check the API documentation before the fiscal quarter ends",
]
TEXTS = [d["text"] for d in DOCS]


@pytest.fixture(scope="module")
def adapted(tmp_path_factory):
    root = tmp_path_factory.mktemp("adapted")
    (root / "terms.json").write_text(json.dumps(TERMS_JSON))
    base = root / "tiny"
    make_tiny_bert().save_pretrained(base)
    config = root / "small.json"
    config.write_text(json.dumps({
        "warmup": {"epochs": 1, "batch_size": 2, "lr": 1e-3},
        "dictionary": {"epochs": 1, "batch_size": 2, "lr": 1e-3},
        "distill": {"epochs": 2, "batch_size": 2, "lr": 1e-3},
    }))
    out = root / "run"
    assert main([
        "train", "--base", str(base), "--corpus", str(_jsonl(root / "docs.jsonl", DOCS)),
        "--terms", str(root / "terms.json"), "--dictionary", str(_jsonl(root / "dict.jsonl", DICTIONARY)),
        "--train", str(_jsonl(root / "train.jsonl", TRAIN)), "--config", str(config), "--out", str(out),
    ]) == 0
    assert main(["onnx", "--model", str(out / "final"), "--out", str(root / "onnx")]) == 0
    return SpladeEncoder.from_pretrained(out / "final"), out, root / "onnx"


def test_trained_model_keeps_the_exclusion_and_learned_the_domain_token(adapted):
    splade, _, _ = adapted
    assert (splade.mlm.get_output_embeddings().bias[splade.excluded_ids()] == EXCLUDED_BIAS).all()
    assert splade.tokenizer.convert_tokens_to_ids("zorblatt") in splade.settings.domain_token_ids


@pytest.mark.parametrize("kind,texts", [("query", QUERIES), ("document", TEXTS)])
def test_sparse_encoder_gives_identical_vectors(adapted, kind, texts):
    splade, out, _ = adapted
    ours = splade.encode(texts, kind)
    assert_identical(ours, st_encode(out / "final", texts, kind))
    zorblatt = splade.tokenizer.convert_tokens_to_ids("zorblatt")
    if kind == "query":
        assert ours[1, zorblatt] > 0  # the added token is part of the compared vectors


def test_onnx_runtime_gives_identical_top10(adapted):
    splade, _, onnx_dir = adapted
    for kind, texts in (("query", QUERIES), ("document", TEXTS)):
        agreement = compare(splade.encode(texts, kind), OnnxSpladeEncoder(onnx_dir).encode(texts, kind))
        assert agreement.max_abs_diff <= TOLERANCE and agreement.top_identical == len(texts), kind


def test_final_carries_a_model_card(adapted):
    _, out, _ = adapted
    card = (out / "final" / CARD_FILE).read_text(encoding="utf-8")
    head, body = card.split("---\n", 2)[1:]
    meta = dict(line.split(":", 1) for line in head.splitlines() if ":" in line and not line.startswith(("#", "-")))
    assert meta["library_name"].strip() == "sentence-transformers"
    assert meta["license"].split("#")[0].strip() == "other"
    tags = [line[2:] for line in head.splitlines() if line.startswith("- ")]
    assert {"splade", "sparse-encoder"} <= set(tags)
    assert "base_model" in head  # a local base: the key is there for the user to fill in
    assert "| `zorblatt` | jargon |" in body  # the added domain token
    assert "extend -> warmup -> dictionary -> distill" in body
    assert '"distill"' in body and '"lr": 0.001' in body  # the run's configuration
    assert "| distill |" in body and "last step: total" in body  # the numbers the run recorded
    assert "no retrieval metrics" in body
    assert "SparseEncoder(" in body and "AutoModelForMaskedLM" in body and "SpladeEncoder.from_pretrained" in body
