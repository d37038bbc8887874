"""Smoke test of the benchmark's code paths on a tiny random BERT: the three systems load,
encode, and agree (so the benchmark's agreement check compares like with like)."""

import json

import numpy as np
import pytest
import scipy.sparse as sp

from bench.encode import EXPORT_SCALE, LOADERS, quantised_like_export, top_k_agreement
from bench.workload import model_dir, synthetic_corpus


def test_three_systems_agree_on_a_tiny_model(tmp_path):
    directory = model_dir("tiny", tmp_path)
    texts = synthetic_corpus(6)
    lengths = [len(t.split()) for t in texts]
    assert min(lengths) < max(lengths)  # documents of different lengths: batches are padded
    out = {name: load(directory, 4, 64)(texts) for name, load in LOADERS.items()}
    special = [0, 100, 101, 102, 103]  # [PAD] [UNK] [CLS] [SEP] [MASK] of bert-base-uncased
    for name, matrix in out.items():
        assert isinstance(matrix, sp.csr_matrix) and matrix.shape == (6, 30522), name
        if name == "sparse-adapt-export":  # integer impacts: equal to the reference quantised alike
            same, diff = top_k_agreement(matrix, quantised_like_export(out["hf-loop"], EXPORT_SCALE), special)
            assert same == 6 and diff <= 1.0 / EXPORT_SCALE + 1e-6, name
            continue
        same, diff = top_k_agreement(matrix, out["hf-loop"], special)
        assert same == 6 and diff < 1e-4, name
    active = np.diff(out["sparse-adapt"].indptr)  # non-zeros per document
    assert 5 <= np.median(active) < 1000  # the calibrated bias keeps vectors sparse but not empty


def test_agreement_notices_a_different_top_term():
    a = sp.csr_matrix(np.array([[0.0, 3.0, 2.0, 1.0], [0.0, 1.0, 2.0, 3.0]], dtype=np.float32))
    b = a.copy().tolil()
    b[1, 1] = 5.0  # document 1's best term changes
    same, diff = top_k_agreement(a, b.tocsr(), excluded=[0], k=2)
    assert same == 1 and diff == 4.0


@pytest.mark.slow
def test_onnx_benchmark_quick_run(tmp_path):
    from bench.onnx import main

    assert main(["--quick", "--workdir", str(tmp_path), "--json", str(tmp_path / "onnx.json")]) == 0
    result = json.loads((tmp_path / "onnx.json").read_text())
    assert result["agreement"]["top10_identical"] == result["agreement"]["queries"] == 32
    assert {(r["batch_size"], r["system"]) for r in result["rows"]} == {
        (b, s) for b in (1, 32) for s in ("pytorch", "onnxruntime")}


@pytest.mark.slow
def test_feedback_search_benchmark_runs_on_a_tiny_model(tmp_path):
    """Its three systems run on a real index with stored vectors, and the two feedback paths agree
    (the benchmark asserts that before timing)."""
    from bench.feedback_search import main

    out = tmp_path / "fb.json"
    assert main(["--model", str(model_dir("tiny", tmp_path)), "--repeats", "1", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["queries"] > 100 and result["documents"] > 100
    assert set(result["ms_per_query"]) == {"plain", "feedback", "feedback_one_by_one"}
    assert all(v > 0 for v in result["ms_per_query"].values())
