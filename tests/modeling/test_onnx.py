"""ONNX export with SPLADE pooling, run in the real ONNX Runtime against PyTorch."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch

from corpora import GATROCRAPTIC
from sparse_adapt.cli import main
from sparse_adapt.data import load_documents, load_queries
from sparse_adapt.errors import ModelLoadError, NonFiniteError
from sparse_adapt.modeling.onnx import (
    ONNX_FILE, TOLERANCE, Agreement, OnnxExportError, OnnxMeta, OnnxSpladeEncoder, PooledSplade, compare, export_onnx, verify_export,
)
from tests.conftest import make_tiny_bert

QUERIES = [
    "database connection timeout",
    "x",
    "How do I configure OAuth2 authentication for the API, with client id, secret and redirect URIs?",
    "Gatrocraptic expenditure impact on fiscal events",
    "reset password",
    "memory leaks valgrind heaptrack",
    "backup and restore procedures",
]


def _sparser_tiny():
    splade = make_tiny_bert()
    with torch.no_grad():
        splade.mlm.get_output_embeddings().bias -= 0.3  # fewer active terms, so top-10 is meaningful
    return splade


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    splade = _sparser_tiny()
    out = tmp_path_factory.mktemp("onnx") / "tiny-onnx"
    meta = export_onnx(splade, out)
    return splade, out, meta


def test_graph_has_dynamic_batch_and_length_and_pooled_output(exported):
    splade, out, _ = exported
    session = ort.InferenceSession(str(out / ONNX_FILE), providers=["CPUExecutionProvider"])
    inputs = {i.name: i for i in session.get_inputs()}
    assert set(inputs) == {"input_ids", "attention_mask"}
    for i in inputs.values():
        assert i.type == "tensor(int64)" and all(isinstance(d, str) for d in i.shape)  # both axes symbolic
    (output,) = session.get_outputs()
    assert output.name == "weights" and len(output.shape) == 2 and output.shape[1] == splade.vocab_size


@pytest.mark.parametrize("batch_size", [1, 3, 7])
def test_onnx_runtime_matches_pytorch(exported, batch_size):
    splade, out, _ = exported
    onnx = OnnxSpladeEncoder(out, threads=1)
    ours = splade.encode_query(QUERIES)
    theirs = onnx.encode(QUERIES, "query", batch_size=batch_size)
    agreement = compare(ours, theirs)
    assert theirs.shape == ours.shape
    assert agreement.max_abs_diff <= TOLERANCE
    assert agreement.top_identical == len(QUERIES)
    assert (np.diff(theirs.indptr) > 0).all()  # every query has active terms: not a vacuous match


def test_the_readme_s_onnx_runtime_snippet_gives_the_query_vectors(exported):
    """A BERT tokenizer's own feed (with token_type_ids) is refused by ONNX Runtime: the README
    shows the two-input feed, which must run as written and give the model's query vectors."""
    import re
    from pathlib import Path

    splade, out, _ = exported
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    (snippet,) = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "InferenceSession" in b]
    scope: dict = {}
    exec(snippet.replace("runs/h4/final-onnx", str(out)), scope)
    ours = splade.encode_query(["gatrocraptic review"]).toarray()
    assert scope["weights"].shape == ours.shape and np.abs(scope["weights"] - ours).max() <= TOLERANCE
    assert (ours > 0).sum() > 0  # not a vacuous match


def test_onnx_encode_takes_the_same_defaults_as_the_torch_encoder(exported):
    """Documents by default, one string as one text: ``encode`` of both classes gives one matrix."""
    splade, out, _ = exported
    onnx = OnnxSpladeEncoder(out, threads=1)
    long = " ".join(["gatrocraptic relay depot"] * 40)  # past the query length, inside the document one
    assert compare(splade.encode([long]), onnx.encode([long])).max_abs_diff <= TOLERANCE
    assert compare(splade.encode_document([long]), onnx.encode_document([long])).max_abs_diff <= TOLERANCE
    assert compare(onnx.encode_query([long]), onnx.encode([long])).max_abs_diff > TOLERANCE  # cut differently
    assert onnx.encode(QUERIES[0]).shape == (1, splade.vocab_size)
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got True"):
        onnx.encode(QUERIES, batch_size=True)


def test_onnx_encode_keeps_the_largest_weights_as_the_torch_encoder_does(exported):
    splade, out, _ = exported
    onnx = OnnxSpladeEncoder(out, threads=1)
    for method in ("encode_query", "encode_document"):
        ours, theirs = getattr(splade, method)(QUERIES, max_active_dims=2), getattr(onnx, method)(QUERIES, max_active_dims=2)
        assert (np.diff(theirs.indptr) == 2).all()
        assert compare(ours, theirs).max_abs_diff <= TOLERANCE
    with pytest.raises(ValueError, match="max_active_dims"):
        onnx.encode(QUERIES, max_active_dims=0)


def test_onnx_decode_lists_the_terms_the_torch_encoder_lists(exported):
    splade, out, _ = exported
    onnx = OnnxSpladeEncoder(out, threads=1)
    theirs = onnx.decode(onnx.encode_query(QUERIES), top_k=3)
    ours = splade.decode(splade.encode_query(QUERIES), top_k=3)
    assert all(theirs)
    assert [[t for t, _ in row] for row in theirs] == [[t for t, _ in row] for row in ours]


def test_special_tokens_are_excluded_by_the_exported_weights(exported):
    """The graph has no vocabulary mask: the zeros come from the baked bias. The same
    pooling over the head with the special rows reset to 0 does fire [CLS]/[SEP]."""
    splade, out, _ = exported
    special = splade.excluded_ids()
    theirs = OnnxSpladeEncoder(out).encode(QUERIES, "query")
    assert theirs[:, special].nnz == 0
    unbaked = _sparser_tiny()
    with torch.no_grad():
        unbaked.mlm.get_output_embeddings().bias[special] = 0.0
        batch = unbaked.tokenize(QUERIES, "query")
        raw = PooledSplade(unbaked.mlm, unbaked.vocab_size)(batch["input_ids"], batch["attention_mask"])
    assert (raw[:, unbaked.tokenizer.cls_token_id] > 0).all()


def test_verification_refuses_a_graph_that_disagrees(exported):
    splade, out, _ = exported
    other = make_tiny_bert(seed=1)
    with pytest.raises(OnnxExportError, match="disagrees"):
        verify_export(other, out)
    assert verify_export(splade, out).max_abs_diff <= TOLERANCE


def test_metadata_records_lengths_and_verification(exported):
    splade, out, meta = exported
    loaded = OnnxMeta.load(out)
    assert loaded == meta
    assert (meta.query_max_length, meta.doc_max_length, meta.vocab_size) == (16, 48, splade.vocab_size)
    assert meta.top10_identical == meta.probes and meta.max_abs_diff <= TOLERANCE


def test_an_export_given_as_a_model_is_pointed_to_what_reads_it(exported, capsys):
    # "has no config.json: not a Hugging Face model directory" left the user to find search --onnx
    _, out, _ = exported
    assert main(["encode", "x", "--model", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{out} has no config.json" in err and "ONNX export" in err and "search --onnx" in err


def test_a_directory_without_an_export_is_one_clear_error(tmp_path):
    with pytest.raises(ModelLoadError, match="sparse-adapt onnx"):
        OnnxSpladeEncoder(tmp_path)


@pytest.mark.parametrize("damage, message", [
    ("meta", "sparse_adapt_onnx.json: not the metadata"),
    ("fields", "sparse_adapt_onnx.json: not the metadata `sparse-adapt onnx` writes (TypeError"),
    ("graph", "cannot load the ONNX export (InvalidProtobuf"),
    ("nested", "sparse_adapt_onnx.json: not the metadata `sparse-adapt onnx` writes (RecursionError"),
])
def test_a_damaged_export_is_one_clear_error(exported, tmp_path, damage, message):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(exported[1], copy)
    if damage == "meta":
        (copy / "sparse_adapt_onnx.json").write_text("{oops")
    elif damage == "fields":  # JSON, but with a field the export never writes
        (copy / "sparse_adapt_onnx.json").write_text('{"source": "m", "colour": "blue"}')
    elif damage == "nested":  # JSON too deep for the decoder
        (copy / "sparse_adapt_onnx.json").write_text("[" * 100_000)
    else:
        (copy / ONNX_FILE).write_bytes((copy / ONNX_FILE).read_bytes()[:100])
    with pytest.raises(ModelLoadError, match=message.replace("(", "\\(")):
        OnnxSpladeEncoder(copy)


def test_cli_errors_are_one_line(tmp_path, capsys):
    model = tmp_path / "tiny"
    make_tiny_bert().save_pretrained(model)
    assert main(["onnx", "--model", str(model), "--out", str(tmp_path / "o"), "--opset", "17"]) == 2
    assert main(["onnx", "--model", str(model), "--out", str(tmp_path / "o"), "--opset", "99"]) == 2
    assert main(["onnx", "--model", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert main(["search", "--index", str(tmp_path), "query"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.count("--opset must be between 18") == 2 and "got 99" in err and "model directory not found" in err
    assert "exactly one of --model (PyTorch) or --onnx" in err
    assert "Traceback" not in err and not (tmp_path / "o").exists()


def test_the_cli_records_a_local_source_by_its_absolute_path(tmp_path, monkeypatch, capsys):
    _sparser_tiny().save_pretrained(tmp_path / "tiny")
    monkeypatch.chdir(tmp_path)
    assert main(["onnx", "--model", "tiny", "--out", "o"]) == 0, capsys.readouterr().err
    assert OnnxMeta.load(tmp_path / "o").source == str((tmp_path / "tiny").resolve())


def test_the_cli_says_what_it_verified_and_gives_the_exporter_s_log_level_back(tmp_path, capsys):
    """The exporter's logger is quietened for the export only: left at ERROR, it hid torch's
    ONNX warnings from every later export in the same process."""
    import logging

    _sparser_tiny().save_pretrained(tmp_path / "tiny")
    exporter_log = logging.getLogger("torch.onnx")
    before = exporter_log.level
    exporter_log.setLevel(logging.INFO)
    try:
        assert main(["onnx", "--model", str(tmp_path / "tiny"), "--out", str(tmp_path / "o")]) == 0
        assert exporter_log.level == logging.INFO
    finally:
        exporter_log.setLevel(before)
    meta = OnnxMeta.load(tmp_path / "o")
    said = " ".join(capsys.readouterr().out.split())
    assert (f"opset {meta.opset}, " in said and f"ONNX Runtime vs PyTorch on {meta.probes} texts: max |diff| "
            f"{meta.max_abs_diff:.1e}, top-10 identical {meta.top10_identical}/{meta.probes}") in said


def test_the_cli_reports_the_graph_s_size_with_its_external_data_and_what_verification_found(
    tmp_path, monkeypatch, capsys,
):
    """A large model's weights sit in model.onnx.data beside model.onnx: the size is both; and a
    top-10 list that differs on some probe texts is said as such, not as all of them."""
    import logging
    from types import SimpleNamespace

    import sparse_adapt.modeling.onnx as onnx_module

    make_tiny_bert().save_pretrained(tmp_path / "tiny")

    def fake_export(splade, out, opset, source):
        out.mkdir()
        (out / "model.onnx").write_bytes(b"0" * 2**20)
        (out / "model.onnx.data").write_bytes(b"0" * 2 * 2**20)
        return SimpleNamespace(opset=opset, seconds=1.25, probes=5, max_abs_diff=3e-6, top10_identical=4)

    monkeypatch.setattr(onnx_module, "export_onnx", fake_export)
    assert main(["onnx", "--model", str(tmp_path / "tiny"), "--out", str(tmp_path / "o")]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert ("model.onnx (3.0 MB, opset 18, 1.2 s); ONNX Runtime vs PyTorch on 5 texts: max |diff| 3.0e-06, "
            "top-10 identical 4/5") in said
    # an export that fails gives the exporter's logger its level back all the same
    exporter_log = logging.getLogger("torch.onnx")
    before = exporter_log.level

    def failing_export(splade, out, opset, source):
        raise onnx_module.OnnxExportError("the exporter failed")

    monkeypatch.setattr(onnx_module, "export_onnx", failing_export)
    try:
        exporter_log.setLevel(logging.INFO)
        assert main(["onnx", "--model", str(tmp_path / "tiny"), "--out", str(tmp_path / "o2")]) != 0
        assert exporter_log.level == logging.INFO
    finally:
        exporter_log.setLevel(before)


@pytest.mark.slow
def test_offline_base_exports_with_identical_top10(offline_base, tmp_path):
    meta = export_onnx(offline_base, tmp_path / "o")
    queries = [q.text for q in load_queries(GATROCRAPTIC.queries)]
    docs = [d.text for d in load_documents(GATROCRAPTIC.docs)][:8]
    onnx = OnnxSpladeEncoder(tmp_path / "o")
    for kind, texts in (("query", queries), ("document", docs)):
        agreement = compare(offline_base.encode(texts, kind), onnx.encode(texts, kind))
        assert agreement.max_abs_diff <= TOLERANCE and agreement.top_identical == len(texts), kind
    assert meta.top10_identical == meta.probes


def test_the_opset_converter_s_failures_are_kept_for_the_error_not_printed(capsys):
    """onnxscript logs a failed opset conversion with its traceback before the export fails;
    the export's one error line says it instead."""
    import logging

    from sparse_adapt.modeling.onnx import _converter_notes

    log = logging.getLogger("onnxscript.version_converter")
    with _converter_notes() as notes:
        try:
            raise RuntimeError("adapter_lookup failed\nNo Adapter From Version $19 for Gelu")
        except RuntimeError as e:
            log.warning("Failed to convert the model to the target version %d", 26, exc_info=e)
        log.warning("plain note")  # a notice: kept out of the terminal and of the error
        try:
            raise RuntimeError("")
        except RuntimeError as e:
            log.warning("failed", exc_info=e)
    assert notes == ["No Adapter From Version $19 for Gelu", "RuntimeError"]
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "Gelu" not in captured.err
    assert log.handlers == [] or all(type(h).__name__ != "Keep" for h in log.handlers)


def test_onnx_scores_and_progress_match_the_torch_encoder(exported):
    from sparse_adapt.progress import Hooks, _NullTask

    splade, out, _ = exported
    onnx = OnnxSpladeEncoder(out, threads=1)
    started, advanced = [], []

    class Counted(_NullTask):
        def advance(self, steps: int = 1, description: str | None = None) -> None:
            advanced.append(steps)

    hooks = Hooks(task=lambda description, total: started.append((description, total)) or Counted())
    q = onnx.encode_query(QUERIES, batch_size=2, progress=hooks)
    assert started == [("encoding queries", len(QUERIES))] and sum(advanced) == len(QUERIES)  # texts, not batches
    theirs = onnx.similarity(q, onnx.encode_document(QUERIES))
    ours = splade.similarity(splade.encode_query(QUERIES), splade.encode_document(QUERIES))
    np.testing.assert_allclose(theirs, ours, rtol=1e-3, atol=1e-3)
    with pytest.raises(ValueError, match="kind must be 'query' or 'document'"):
        onnx.encode(QUERIES, "passage", progress=hooks)


def test_onnx_encode_batches_texts_of_about_one_length_and_refuses_a_nan_naming_the_text(exported, monkeypatch):
    """Batches had been cut in input order: a short query beside a long one padded to the long
    one's length, and a NaN row came back as 30,522 'active' terms where torch refused it."""
    splade, out, _ = exported
    onnx = OnnxSpladeEncoder(out, threads=1)
    texts = ["x", QUERIES[2], "reset password", QUERIES[3]]
    pieces = [onnx.tokenizer(t, truncation=True, max_length=onnx.max_length("query"))["input_ids"] for t in texts]
    run, shapes = onnx.session.run, []

    def recording(names, feed):
        shapes.append(feed["input_ids"].shape)
        return run(names, feed)

    monkeypatch.setattr(onnx.session, "run", recording)
    got = onnx.encode(texts, "query", batch_size=2)
    # the two longest (#1, #3) together at the longer one's width, then the two shortest
    assert shapes == [(2, len(pieces[1])), (2, max(len(pieces[0]), len(pieces[2])))]
    assert len(pieces[1]) > len(pieces[3]) > len(pieces[2]) > len(pieces[0])  # the sort had something to do
    assert compare(splade.encode_query(texts), got).max_abs_diff <= TOLERANCE  # rows back in input order

    def nan_for_reset_password(names, feed):
        weights = run(names, feed)[0]
        for row, ids in enumerate(feed["input_ids"]):
            if list(ids[: len(pieces[2])]) == pieces[2] and feed["attention_mask"][row].sum() == len(pieces[2]):
                weights[row, 7] = np.nan
        return [weights]

    monkeypatch.setattr(onnx.session, "run", nan_for_reset_password)
    with pytest.raises(NonFiniteError, match=r"NaN or infinite weights for query #2 .*not a usable model"):
        onnx.encode(texts, "query", batch_size=2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_half_precision_model_exports_as_its_float32_copy(dtype, tmp_path):
    # ONNX Runtime has no bf16 Add on CPU and an fp16 graph drifted past the tolerance: both were refused
    from sparse_adapt.modeling.fingerprint import model_sha256

    half = _sparser_tiny()
    half.mlm.to(dtype)
    meta = export_onnx(half, tmp_path / "onnx")
    assert next(half.mlm.parameters()).dtype == dtype  # the caller's model is left as it was
    assert meta.model_sha256 == model_sha256(half)  # the model as saved, which `export` records for an index
    runtime = OnnxSpladeEncoder(tmp_path / "onnx").encode(QUERIES[:3], "query").toarray()
    half.mlm.float()  # what the graph computes: the half weights, widened
    np.testing.assert_allclose(runtime, half.encode(QUERIES[:3], "query").toarray(), atol=TOLERANCE)


@pytest.mark.parametrize("setting, seen", [(None, "1"), ("0", "0")])
def test_onnx_runtime_writes_no_telemetry_into_the_home_folder_unless_asked(exported, tmp_path, setting, seen):
    """ONNX Runtime 1.32 kept a telemetry database in $XDG_CACHE_HOME (else ~/.cache)/Microsoft/
    DeveloperTools on every session: a write outside --out. Off by default; a user's own
    ORT_DISABLE_TELEMETRY=0 reaches ONNX Runtime unchanged. Whether ONNX Runtime then writes is its
    own business (a CI machine wrote nothing with it on), so only the default's silence is checked
    on disk."""
    import os
    import subprocess
    import sys

    _, out, _ = exported
    # both places ONNX Runtime looks are pinned inside tmp_path: a machine's own XDG_CACHE_HOME
    # would otherwise send the database where this test does not look
    env = {k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME")}
    env.update(HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "xdg"),
               **({} if setting is None else {"ORT_DISABLE_TELEMETRY": setting}))
    code = ("import os; from sparse_adapt.modeling.onnx import OnnxSpladeEncoder; "
            f"assert OnnxSpladeEncoder({str(out)!r}, threads=1).encode_query(['a query']).shape[0] == 1; "
            "print(os.environ['ORT_DISABLE_TELEMETRY'])")
    done = subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120,
                          capture_output=True, text=True)
    assert done.stdout.strip() == seen
    if setting is None:
        assert not (tmp_path / "home" / ".cache" / "Microsoft").exists()
        assert not (tmp_path / "xdg" / "Microsoft").exists()


def test_compare_counts_top_k_ids_in_order_non_zero_sets_and_the_largest_absolute_difference():
    """Hand-worked: row 0 has the same three terms, 2 and 3 swapped in rank; row 1 gains a
    term (id 4, weight 2) that outranks its only one."""
    import scipy.sparse as sp

    a = sp.csr_matrix(np.array([[0, 3, 2, 1, 0], [1, 0, 0, 0, 0]], dtype=np.float32))
    b = sp.csr_matrix(np.array([[0, 3, 1, 2, 0], [1, 0, 0, 0, 2]], dtype=np.float32))
    got = compare(a, b)
    assert got.max_abs_diff == 2.0  # |0 - 2| at (1, 4): a difference where b is the larger counts too
    assert got.top_identical == 0 and got.rows == 2  # [1, 2, 3] vs [1, 3, 2]; [0] vs [4, 0]
    assert got.same_nonzeros is False  # row 0's sets agree, row 1's do not
    assert compare(a, b, k=1).top_identical == 1  # the top term alone: row 0 agrees
    assert compare(a, a) == Agreement(0.0, 2, 2, True)


@pytest.mark.parametrize("agreement, refused", [
    (Agreement(2e-4, 4, 4, True), True),  # every top-10 identical, but beyond the tolerance
    (Agreement(5e-5, 3, 4, True), True),  # within the tolerance, but one text's top-10 differs
    (Agreement(5e-5, 4, 4, False), False),  # a weight near zero on one side only: within the tolerance is fine
    (Agreement(TOLERANCE, 4, 4, True), False),  # at the tolerance itself: only beyond it is refused
])
def test_verification_refuses_a_difference_beyond_the_tolerance_or_any_differing_top10(
    exported, monkeypatch, agreement, refused,
):
    from sparse_adapt.modeling import onnx as onnx_module

    splade, out, _ = exported
    monkeypatch.setattr(onnx_module, "compare", lambda a, b: agreement)
    if refused:
        with pytest.raises(OnnxExportError, match=rf"max \|diff\| {agreement.max_abs_diff:.2e} \(tolerance 1e-04\), "
                                                  rf"top-10 identical for {agreement.top_identical}/4 texts"):
            verify_export(splade, out)
    else:
        assert verify_export(splade, out) is agreement
    assert TOLERANCE == 1e-4


def test_the_thread_count_reaches_onnx_runtime_and_the_vocabulary_list_is_the_callers_copy(exported):
    _, out, _ = exported
    onnx = OnnxSpladeEncoder(out, threads=1)
    assert onnx.session.get_session_options().intra_op_num_threads == 1
    vocab = onnx.id_to_token()
    vocab.clear()  # the caller's list: the encoder's own is untouched
    assert len(onnx.id_to_token()) == onnx.vocab_size


def test_an_onnx_graph_given_by_its_own_path_names_the_folder_to_give(tmp_path):
    # "no model.onnx" beside a model.onnx would puzzle: the line says which folder to pass instead
    import re

    graph = tmp_path / "model.onnx"
    graph.write_bytes(b"")
    where = f"{re.escape(str(graph))} is a file; give the folder .*\\({re.escape(str(tmp_path))}\\)"
    with pytest.raises(ModelLoadError, match=where):
        OnnxSpladeEncoder(graph)


def test_metadata_names_the_base_and_the_difference_verification_measured(exported):
    splade, out, meta = exported
    assert meta.source == splade.settings.base == "tiny-bert"  # exported from Python, no source given
    # float32 in two runtimes: the recorded number is the measured one (0 only where both agree to the bit)
    assert meta.max_abs_diff == pytest.approx(verify_export(splade, out).max_abs_diff, rel=0.5)


def test_an_export_whose_tokenizer_was_replaced_is_refused(exported, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(exported[1], copy)
    onnx = OnnxSpladeEncoder(copy)
    onnx.tokenizer.add_tokens(["zzqqword"])
    onnx.tokenizer.save_pretrained(copy)
    with pytest.raises(ModelLoadError, match=r"its tokenizer has \d+ tokens but the graph scores \d+"):
        OnnxSpladeEncoder(copy)


def test_an_export_scores_the_tokenizers_terms_only_and_bakes_the_exclusion_in_again(tmp_path):
    """A head padded past its tokenizer (ModernBERT) must not give the graph extra columns, and
    special tokens whose bias was overwritten in memory (a shared-bias change) are excluded
    again by the export itself."""
    from sparse_adapt.modeling.encoder import SpladeEncoder

    splade = _sparser_tiny()
    vocab = splade.vocab_size
    splade.mlm.resize_token_embeddings(vocab + 16, mean_resizing=False)
    splade = SpladeEncoder(splade.mlm, splade.tokenizer, splade.settings)
    special = splade.excluded_ids()
    with torch.no_grad():
        splade.mlm.get_output_embeddings().bias[special] = 0.0  # [CLS] fires with it (see above)
    export_onnx(splade, tmp_path / "o")
    session = ort.InferenceSession(str(tmp_path / "o" / ONNX_FILE), providers=["CPUExecutionProvider"])
    assert session.get_outputs()[0].shape[1] == vocab
    theirs = OnnxSpladeEncoder(tmp_path / "o").encode(QUERIES, "query")
    assert theirs.shape == (len(QUERIES), vocab) and theirs.nnz > 0 and theirs[:, special].nnz == 0
