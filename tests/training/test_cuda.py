"""The GPU's own checks: skipped without CUDA (so never run in CI), run where a GPU is.

Every other test runs on CPU also on a GPU machine (``tests/conftest.py``). These train, resume,
encode, score and export with CUDA visible, on tiny random models. On CUDA, training runs
under bf16 autocast and some kernels add with atomics (``index_add_`` in the pooling and in
the candidates' gather, SDPA's backward), so a resumed run is close to an unbroken one rather
than equal bit for bit, as it is on CPU.
"""

from __future__ import annotations

import json
import math
import signal

import pytest
import torch
from safetensors import safe_open

from sparse_adapt.cli import main
from sparse_adapt.corpus.teacher import DenseTeacher
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.progress import Hooks
from sparse_adapt.training.config_files import config_from_dict
from sparse_adapt.training.pipeline import run_pipeline
from tests.corpus.test_adapt import _cli, setup  # noqa: F401 - fixture
from tests.retrieval.test_export import read_lines
from tests.training.test_resume import WARMUP, PowerCut, _cut_at
from tests.training.test_scale import CKPT, MORE_DOCS, _log, files, stop_and_rerun, tiny_dir  # noqa: F401 - fixtures

pytestmark = pytest.mark.cuda


def test_every_stage_trains_on_cuda_and_saves_finite_fp32_weights(files, tmp_path):
    final = run_pipeline(out=tmp_path / "run", stages="extend,warmup,dictionary,distill", config=config_from_dict(CKPT),
                         seed=0, device="cuda", **files)
    records = _log(tmp_path / "run")
    assert [r["stage"] for r in records if r.get("event") == "stage_end"] == ["extend", "warmup", "dictionary", "distill"]
    losses = [v for r in records if "step" in r for k, v in r.items() if isinstance(v, float)]
    assert losses and all(math.isfinite(v) for v in losses)
    with safe_open(str(final / "model.safetensors"), "pt") as f:
        for key in f.keys():
            tensor = f.get_tensor(key)
            assert tensor.dtype == torch.float32 and torch.isfinite(tensor).all(), key


def test_a_stage_cut_on_cuda_resumes_from_its_checkpoint_close_to_an_unbroken_run(files, tmp_path, monkeypatch):
    config = config_from_dict(WARMUP)
    reference = run_pipeline(out=tmp_path / "ref", stages="extend,warmup", config=config, seed=3, device="cuda", **files)
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        _cut_at(m, 4)
        with pytest.raises(PowerCut):
            run_pipeline(out=out, stages="extend,warmup", config=config, seed=3, device="cuda", **files)
    said: list[str] = []
    resumed = run_pipeline(out=out, stages="extend,warmup", config=config, seed=3, device="cuda",
                           hooks=Hooks(message=said.append), **files)
    assert any(m.startswith("resuming warmup at step 3") for m in said), said
    a = SpladeEncoder.from_pretrained(reference, device="cpu").mlm.state_dict()
    b = SpladeEncoder.from_pretrained(resumed, device="cpu").mlm.state_dict()
    worst = max((a[k] - b[k]).abs().max().item() for k in a)
    assert worst < 1e-2, worst


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_during_cuda_training_cleans_up_and_the_rerun_resumes(files, tmp_path, signum):
    # The CLI's stop handling (one line, 128+N, temporaries and the lock removed) with a CUDA
    # context alive in the stopped process.
    stop_and_rerun(files, tmp_path, signum, device="cuda")


def test_a_model_encodes_alike_on_cuda_and_on_cpu(tiny_dir):
    texts = [d["text"] for d in MORE_DOCS]
    on_gpu = SpladeEncoder.from_pretrained(tiny_dir, device="cuda")
    on_cpu = SpladeEncoder.from_pretrained(tiny_dir, device="cpu")
    assert next(on_gpu.mlm.parameters()).is_cuda
    gpu, cpu = on_gpu.encode_document(texts), on_cpu.encode_document(texts)
    assert gpu.shape == cpu.shape
    assert abs(gpu - cpu).max() < 1e-4


def test_the_dense_teacher_runs_on_the_default_device_and_scores_as_on_cpu(tiny_dir):
    teacher = DenseTeacher.load(tiny_dir)  # the process default: auto, CUDA here
    assert next(teacher.model.parameters()).is_cuda
    docs = [d["text"] for d in MORE_DOCS[:6]]
    gpu = teacher.score("budget review", docs)
    on_cpu = DenseTeacher(teacher.model.to("cpu"), teacher.tokenizer, "cpu copy")
    assert gpu == pytest.approx(on_cpu.score("budget review", docs), abs=1e-5)


def test_export_on_cuda_gives_the_impacts_of_cpu_and_onnx_traces_on_cpu(tiny_dir, tmp_path, capsys):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in MORE_DOCS))
    vectors = {}
    for device in ("cuda", "cpu"):
        assert main(["--device", device, "export", "--model", str(tiny_dir), "--docs", str(docs),
                     "--out", str(tmp_path / device)]) == 0
        vectors[device] = {r["id"]: r["vector"] for r in read_lines(tmp_path / device)}
    for doc, gpu in vectors["cuda"].items():
        cpu = vectors["cpu"][doc]
        assert all(abs(gpu.get(t, 0) - cpu.get(t, 0)) <= 1 for t in set(gpu) | set(cpu)), doc
    assert main(["--device", "cuda", "onnx", "--model", str(tiny_dir), "--out", str(tmp_path / "onnx")]) == 0
    assert "top-10 identical" in capsys.readouterr().out


def test_base_builds_and_calibrates_on_the_default_device(tiny_dir, tmp_path, capsys):
    from transformers import BertConfig, BertModel

    tok = SpladeEncoder.from_pretrained(tiny_dir, device="cpu").tokenizer
    BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(tmp_path / "encoder")
    tok.save_pretrained(tmp_path / "encoder")
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in MORE_DOCS))
    said = {}
    for device in ("cuda", "cpu"):
        assert main(["--device", device, "base", "--from-encoder", str(tmp_path / "encoder"), "--calibration-docs",
                     str(docs), "--target-active", "8", "--out", str(tmp_path / f"base-{len(said)}")]) == 0
        said[device] = float(capsys.readouterr().out.split("calibrated decoder bias:")[1].split()[0])
    assert said["cuda"] == pytest.approx(said["cpu"], abs=1e-3)


def test_pretraining_runs_on_the_default_device(tiny_dir, tmp_path):
    from sparse_adapt.training.general import RECORD, GeneralConfig, run_general
    from tests.training.test_general import PAIRS, WordTeacher

    out = tmp_path / "pretrained"
    run_general(tiny_dir, out, GeneralConfig(steps=4, batch_size=4, lr=3e-3), seed=0, teacher=WordTeacher(), pairs=PAIRS)
    record = json.loads((out / RECORD).read_text())
    assert record["steps"] == 4 and all(math.isfinite(v) for row in record["log"] for v in row.values()
                                        if isinstance(v, float))


def test_adapt_from_a_corpus_alone_runs_on_cuda_and_its_model_is_diagnosed_there(setup, capsys):
    # Mining, harvesting, hard negatives from the base, the cross-encoder teacher, the four
    # stages, the average with extend and the summary's evaluation, all with CUDA visible.
    out = setup["root"] / "cuda-run"
    assert main(["--device", "cuda", *_cli(setup, out)]) == 0
    summary = (out / "summary.json").read_text()
    assert "NaN" not in summary and "Infinity" not in summary and json.loads(summary)
    model, docs = str(out / "final"), str(setup["corpus"])
    capsys.readouterr()
    assert main(["--device", "cuda", "diagnose", "Zentrofax", "--model", model, "--docs", docs,
                 "--terms", str(out / "domain_terms.json"), "--queries", str(out / "heldout_queries.jsonl"),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["vocabulary"]["single_token"]
    assert main(["--device", "cuda", "explain", "coolant pump", "--model", model, "--docs", docs, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)
    assert main(["--device", "cuda", "evaluate", "--model", model, "--docs", docs, "--queries",
                 str(out / "heldout_queries.jsonl"), "--qrels", str(out / "heldout_qrels.tsv"), "--feedback",
                 "--json"]) == 0
    assert 0.0 <= json.loads(capsys.readouterr().out.strip().splitlines()[-1])["ndcg@10"] <= 1.0
