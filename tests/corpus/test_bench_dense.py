"""bench.dense --model: the dense reference scores the bi-encoder it is given."""

from __future__ import annotations

import json

import torch
from transformers import BertModel

from bench.dense import dense_scores, main
from sparse_adapt.corpus.teacher import DenseTeacher
from tests.conftest import _tokenizer
from tests.corpus.test_teacher import _config


def _bi_encoder(path, seed: int):
    torch.manual_seed(seed)
    BertModel(_config()).save_pretrained(path)
    _tokenizer().save_pretrained(path)
    return path


def test_the_given_model_is_the_one_scored(tmp_path, capsys):
    a, b = _bi_encoder(tmp_path / "a", 0), _bi_encoder(tmp_path / "b", 1)
    assert main(["pharma", "--model", str(a), "--threads", "1"]) == 0
    printed = json.loads(capsys.readouterr().out)["pharma"]
    assert printed == json.loads(json.dumps(dense_scores(DenseTeacher.load(a), "pharma")))
    assert printed["heldout-domain-semantic"]["queries"] == 7
    other = dense_scores(DenseTeacher.load(b), "pharma")
    assert any(printed[g]["ndcg@10"] != other[g]["ndcg@10"] for g in printed)


def test_a_directory_domain_needs_only_its_evaluation_files(tmp_path):
    # a domain outside the repository, as `benchmark --pipeline adapt-corpus` takes it: no terms,
    # dictionary or training lists
    import shutil

    import corpora

    files = corpora.get("pharma")
    domain = tmp_path / "outside"
    domain.mkdir()
    for name in ("docs", "queries", "qrels", "heldout_queries", "heldout_qrels", "query_groups"):
        src = getattr(files, name)
        shutil.copy(src, domain / src.name)
    scores = dense_scores(DenseTeacher.load(_bi_encoder(tmp_path / "a", 0)), str(domain))
    assert scores["heldout-domain-semantic"]["queries"] == 7
