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


@pytest.mark.parametrize("parts", ["warmpu", "warmup,distil", ","])
def test_the_training_benchmark_refuses_an_unknown_part(parts, capsys, tmp_path, monkeypatch):
    """A misspelt part was skipped without a word: an empty summary, as if measured."""
    import bench.train as train

    monkeypatch.setattr(train, "model_dir", lambda name, root: pytest.fail("a model was built before the check"))
    with pytest.raises(SystemExit) as stopped:
        train.main(["--parts", parts, "--workdir", str(tmp_path / "work")])
    assert not (tmp_path / "work").exists()
    assert stopped.value.code == 2 and "--parts takes warmup, distill, rss, extend" in capsys.readouterr().err


def test_the_training_benchmark_keeps_each_finished_run_when_a_later_one_is_cut(tmp_path, monkeypatch):
    import bench.train as train

    seconds = {"hf-trainer": 10.0, "hf-trainer-grouped": 12.0, "sparse-adapt": 8.0, "sparse-adapt-budget": 7.0}

    def fake_run(part, system, model, work, size, threads):
        if part == "distill":  # the lent machine's minutes end during the second part
            raise KeyboardInterrupt
        return {"part": part, "system": system, "size": size, "seconds": seconds[system], "peak_rss_mb": 1.0}

    monkeypatch.setattr(train, "model_dir", lambda name, root: tmp_path / name)
    monkeypatch.setattr(train, "_run", fake_run)
    out = tmp_path / "train.json"
    with pytest.raises(KeyboardInterrupt):
        train.main(["--parts", "warmup,distill", "--workdir", str(tmp_path), "--json", str(out)])
    saved = json.loads(out.read_text())
    assert saved["partial"] is True and [r["system"] for r in saved["runs"]] == list(seconds)
    # ratio = a system's seconds / the peer's (the HF Trainer's) seconds; distill never finished
    assert saved["summary"] == {"warmup": {
        "hf-trainer": {"seconds": 10.0, "ratio_to_peer": 1.0}, "hf-trainer-grouped": {"seconds": 12.0, "ratio_to_peer": 1.2},
        "sparse-adapt": {"seconds": 8.0, "ratio_to_peer": 0.8}, "sparse-adapt-budget": {"seconds": 7.0, "ratio_to_peer": 0.7}}}


def _built_parser(module):
    """The ArgumentParser a bench script's ``main`` builds, caught before it parses anything."""
    import argparse
    import inspect

    class Built(Exception):
        pass

    def caught(parser, *args, **kwargs):
        raise Built(parser)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", caught)
        with pytest.raises(Built) as built:
            module.main([]) if inspect.signature(module.main).parameters else module.main()
    return built.value.args[0]


def test_the_bench_usage_lines_show_each_options_own_default():
    """``[--threads 2]`` over an option whose default was 1: the usage line in ``--help`` names a
    value as the default; a placeholder (``N``, ``FILE``) or an option without a default is not checked."""
    import importlib
    import pkgutil
    import re

    import bench

    checked = 0
    for info in pkgutil.iter_modules(bench.__path__):
        module = importlib.import_module(f"bench.{info.name}")
        if not hasattr(module, "main"):
            continue
        actions = {o: a for a in _built_parser(module)._actions for o in a.option_strings}
        for flag, value in re.findall(r"\[(--[a-z][\w-]*) ([^\]\s|]+)\]", module.__doc__):
            action = actions[flag]  # a flag the script does not take fails here
            if value.isupper() or action.default is None:
                continue
            assert (action.type or str)(value) == action.default, f"bench.{info.name} {flag} {value}"
            checked += 1
    assert checked >= 10


def test_the_encoding_benchmarks_export_scale_is_the_export_commands_default():
    """``EXPORT_SCALE`` is documented as `sparse-adapt export`'s default --scale: the agreement
    check quantises the reference with it, so a new default would compare unlike impacts."""
    import typer.main

    from bench.encode import EXPORT_SCALE
    from sparse_adapt.cli import app
    from sparse_adapt.retrieval.export import ExportConfig

    scale = next(p for p in typer.main.get_command(app).commands["export"].params if "--scale" in p.opts)
    assert EXPORT_SCALE == scale.default == ExportConfig().scale


def test_the_files_and_sections_the_bench_scripts_name_exist():
    """A path in a docstring, help or default (``bench/results/byoc.json``,
    ``sparse_adapt/losses/...``) and a quoted bench/RESULTS.md section are there to be read."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    headings = [line.lstrip("#").strip() for line in (root / "bench" / "RESULTS.md").read_text(
        encoding="utf-8").splitlines() if line.startswith("#")]
    paths = sections = 0
    for script in sorted((root / "bench").glob("*.py")):
        text = script.read_text(encoding="utf-8")
        for path in re.findall(r"\b((?:bench|sparse_adapt|corpora|diagnostics)/[\w./-]+\.(?:py|jsonl?|md|tsv))\b",
                               text):
            assert (root / path).is_file(), f"{script.name}: {path}"
            paths += 1
        for section in re.findall(r'bench/RESULTS\.md, "([^"]+)"', text):
            assert any(h.startswith(section) for h in headings), f"{script.name}: {section}"
            sections += 1
    assert paths >= 3 and sections >= 1


def test_the_suite_sizes_bench_byoc_states_are_the_bundled_files():
    """byoc's docstring reads its p-values against the group sizes and the pool against the
    corpus sizes: both are counted from the suite's own files."""
    import json
    import re

    import bench.byoc as byoc
    import corpora

    suite = [corpora.get(d) for members in corpora.SPLITS.values() for d in members]
    doc_counts = {sum(1 for line in f.docs.read_text(encoding="utf-8").splitlines() if line.strip()) for f in suite}
    group_sizes = {len(json.loads(f.query_groups.read_text(encoding="utf-8"))[g]) for f in suite for g in byoc.GROUPS}
    text = " ".join(byoc.__doc__.split())
    stated_docs = re.search(r"the suite's ([\d\- and]+)-document corpora", text)
    stated_groups = re.search(r"with (\d+)(?: to (\d+))? queries a group", text)
    assert stated_docs and stated_groups, "bench.byoc's docstring no longer states the sizes this test reads"
    assert {int(n) for n in re.findall(r"\d+", stated_docs.group(1))} == doc_counts
    assert {int(n) for n in stated_groups.groups() if n} == {min(group_sizes), max(group_sizes)}
