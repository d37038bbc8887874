"""Training at scale on CPU: devices, token-budget batches from a streamed corpus, gradient
accumulation, max_steps, mid-stage checkpoints with bit-identical resume (also after SIGKILL)."""

from __future__ import annotations

import copy
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from sparse_adapt.cli import main
from sparse_adapt.data import load_documents
from sparse_adapt.device import resolve_device
from sparse_adapt.errors import ConfigError
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.progress import Hooks
from sparse_adapt.training import loop as loop_mod
from sparse_adapt.training.config_files import config_from_dict
from sparse_adapt.training.mlm_data import CorpusTexts, plan_epoch
from sparse_adapt.training.pipeline import run_pipeline
from tests.conftest import make_tiny_bert
from tests.training.test_stages import DICTIONARY, DOCS, TERMS_JSON, TRAIN, _jsonl

ROOT = Path(__file__).resolve().parents[2]
MORE_DOCS = DOCS + [{"doc_id": f"x{i}", "text": " ".join(["budget review of spending"] * (1 + i % 5))} for i in range(9)]


@pytest.fixture
def files(tmp_path, tiny_dir):
    (tmp_path / "terms.json").write_text(json.dumps(TERMS_JSON))
    return {
        "base": str(tiny_dir), "corpus": _jsonl(tmp_path / "docs.jsonl", MORE_DOCS), "terms": tmp_path / "terms.json",
        "dictionary": _jsonl(tmp_path / "dict.jsonl", DICTIONARY), "train": _jsonl(tmp_path / "train.jsonl", TRAIN),
    }


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    from tests.conftest import make_tiny_bert

    d = tmp_path_factory.mktemp("tiny") / "model"
    make_tiny_bert().save_pretrained(d)
    return d


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return SpladeEncoder.from_pretrained(path).mlm.state_dict()


def _log(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]


# ------------------------------------------------------------------------------ devices
def test_device_names_resolve_and_unavailable_ones_are_errors(monkeypatch):
    # tests/conftest.py makes CUDA unavailable for every test; each branch is set here explicitly.
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == "cpu"
    with pytest.raises(ConfigError, match="must be one of"):
        resolve_device("tpu")
    # torch.device("cpu:abc") raised RuntimeError (a traceback in every command); "auto:3" lost its ":3"
    for bad in ("cpu:abc", "cpu:", "cpu:-1", "cpu:0:0", "auto:3", "cuda:x"):
        with pytest.raises(ConfigError, match=f"must be one of .* got '{bad}'"):
            resolve_device(bad)
    assert resolve_device("cpu:0") == torch.device("cpu:0")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    with pytest.raises(ConfigError, match="no CUDA device"):
        resolve_device("cuda")
    with pytest.raises(ConfigError, match="no CUDA device"):  # a torch.device too (was a bare AssertionError later)
        resolve_device(torch.device("cuda:0"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")


def test_mps_is_refused_where_torch_has_none(monkeypatch):
    # a Mac-only backend asked for elsewhere: one line now, not a torch error deep inside a command
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="device 'mps': no MPS device is available"):
        resolve_device("mps")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert resolve_device("mps:0") == torch.device("mps:0")


def test_a_torch_device_of_ours_is_checked_and_one_of_another_backend_is_the_caller_s(monkeypatch):
    # an API caller's torch.device("mps") is checked like the name "mps"; meta/xpu are left to torch
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="device 'mps': no MPS device is available"):
        resolve_device(torch.device("mps"))
    assert resolve_device(torch.device("meta")) == torch.device("meta")
    assert resolve_device(torch.device("xpu:1")) == torch.device("xpu:1")


def test_the_process_default_is_the_device_a_call_without_one_resolves_and_a_bad_one_is_never_set(monkeypatch):
    """The CLI's global --device sets the default every command then uses: `--device cpu` on a
    GPU machine must keep the GPU out, and a typo must fail when given, before any work."""
    from sparse_adapt.device import set_default_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # "auto" would be CUDA here
    set_default_device("cpu")  # the autouse fixture puts "auto" back afterwards
    assert resolve_device() == torch.device("cpu")
    with pytest.raises(ConfigError, match="got 'cpu:x'"):
        set_default_device("cpu:x")
    assert resolve_device(None) == torch.device("cpu")


def test_cuda_runs_under_bf16_autocast_and_other_devices_under_none():
    import contextlib
    import warnings

    from sparse_adapt.device import autocast

    assert isinstance(autocast(torch.device("cpu")), contextlib.nullcontext)
    with warnings.catch_warnings():  # torch disables it here, without CUDA, and says so
        warnings.simplefilter("ignore")
        cuda = autocast(torch.device("cuda"))
        # MPS (and any other backend) trains in fp32: CUDA's bf16 autocast is no setting for it
        assert all(isinstance(autocast(torch.device(kind)), contextlib.nullcontext) for kind in ("mps", "meta"))
    assert (cuda.device, cuda.fast_dtype) == ("cuda", torch.bfloat16)


def test_train_device_cuda_without_gpu_is_one_line_exit_2(files, tmp_path, capsys):
    argv = ["train", "--device", "cuda", "--out", str(tmp_path / "run")]
    argv += [x for k, v in files.items() for x in (f"--{k}", str(v))]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no CUDA device" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_from_pretrained_refuses_an_absent_device_before_reading_the_weights(tmp_path, monkeypatch):
    from sparse_adapt.modeling import encoder

    make_tiny_bert().save_pretrained(tmp_path / "m")
    monkeypatch.setattr(encoder, "model_directory", lambda *a, **k: pytest.fail("read the model first"))
    with pytest.raises(ConfigError, match="no CUDA device"):
        SpladeEncoder.from_pretrained(tmp_path / "m", device="cuda")


# ------------------------------------------------------------------------------ batches
def test_token_budget_batches_cover_every_text_once_within_budget():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 120, size=500).astype(np.int32)
    gen = torch.Generator().manual_seed(3)
    batches = plan_epoch(lengths, batch_size=64, batch_tokens=1000, window=128, generator=gen)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(500))
    for b in batches:
        assert len(b) <= 64
        assert len(b) == 1 or max(lengths[i] for i in b) * len(b) <= 1000
    padded = sum(max(lengths[i] for i in b) * len(b) for b in batches)
    fixed = plan_epoch(lengths, 8, 0, 128, torch.Generator().manual_seed(3))
    padded_fixed = sum(max(lengths[i] for i in b) * len(b) for b in fixed)
    assert padded < padded_fixed  # bucketing removes padding
    again = plan_epoch(lengths, 64, 1000, 128, torch.Generator().manual_seed(3))
    assert again == batches


def test_fixed_batches_are_the_shuffled_order_in_chunks():
    gen = torch.Generator().manual_seed(5)
    order = torch.randperm(10, generator=torch.Generator().manual_seed(5)).tolist()
    assert plan_epoch(np.ones(10, dtype=np.int32), 4, 0, 100, gen) == [order[0:4], order[4:8], order[8:10]]


def test_streamed_texts_equal_the_loaded_documents(tmp_path):
    path = _jsonl(tmp_path / "d.jsonl", MORE_DOCS)
    path.write_text(path.read_text().replace("\n", "\n\n", 2))  # blank lines are skipped by both
    source = CorpusTexts(path)
    assert [source.text(i) for i in range(len(source))] == [d.text for d in load_documents(path)]
    assert [source.text(i) for i in (4, 0, 4)] == [MORE_DOCS[4]["text"], MORE_DOCS[0]["text"], MORE_DOCS[4]["text"]]
    assert source.offsets.dtype == np.int64 and not hasattr(source, "texts")


@pytest.mark.parametrize("blank", ["\u00a0", "\u3000 \u2028", "\ufeff"])
def test_a_line_the_loader_reads_as_blank_is_no_streamed_text(tmp_path, blank):
    """By bytes, a line of a no-break space (or a first line of a BOM alone) was a record: the
    corpus validated, then warmup failed on it with a JSON traceback."""
    path = tmp_path / "d.jsonl"
    path.write_text(blank + "\n" + '{"doc_id": "a", "text": "alpha"}\n' + blank.lstrip("\ufeff") + "\n", encoding="utf-8")
    source = CorpusTexts(path)
    assert [source.text(i) for i in range(len(source))] == [d.text for d in load_documents(path)] == ["alpha"]


def test_streamed_texts_keep_non_ascii_text_as_the_loader_reads_it(tmp_path):
    docs = [{"doc_id": "a", "text": "Fenwärra café: a naïve “starter” — 面包"}, {"doc_id": "b", "text": "plain"}]
    path = tmp_path / "d.jsonl"  # UTF-8 as written, not \u escapes: records sit at byte offsets
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    source = CorpusTexts(path)
    assert [source.text(i) for i in range(len(source))] == [d["text"] for d in docs]
    source.close()


def test_a_corpus_read_by_streaming_is_checked_by_default(tmp_path):
    from sparse_adapt.data import DataError

    path = tmp_path / "d.jsonl"
    path.write_text('{"doc_id": "a", "text": "alpha"}\n{"doc_id": "a", "text": "again"}\n', encoding="utf-8")
    with pytest.raises(DataError, match="d.jsonl:2"):
        CorpusTexts(path)
    assert len(CorpusTexts(path, validate=False)) == 2  # the stage's reader: checked when the inputs loaded


def test_token_budget_batches_of_equal_lengths_are_the_random_order_cut_not_the_index_order():
    # The length sort is stable, so ties keep the epoch's random order: equal-length texts
    # meet other texts each epoch instead of always forming the same batches.
    g = torch.Generator().manual_seed(5)
    order = torch.randperm(6, generator=g).tolist()
    served = torch.randperm(3, generator=g).tolist()
    cut = [order[0:2], order[2:4], order[4:6]]
    assert sorted(map(sorted, cut)) != [[0, 1], [2, 3], [4, 5]]
    assert plan_epoch(np.full(6, 10, dtype=np.int32), 2, 1000, 100, torch.Generator().manual_seed(5)) == [
        cut[j] for j in served]


# ------------------------------------------------------------------------------ steps
def test_max_steps_and_grad_accum_set_the_number_of_optimiser_steps(files, tmp_path):
    out = tmp_path / "run"
    cfg = {"warmup": {"epochs": 50, "batch_size": 2, "lr": 1e-3, "max_steps": 3},
           "distill": {"epochs": 2, "batch_size": 1, "grad_accum": 2, "lr": 1e-3}}
    run_pipeline(out=out, stages="warmup,distill", config=config_from_dict(cfg), seed=1, **files)
    records = [r for r in _log(out) if "step" in r]
    assert [r["step"] for r in records if r["stage"] == "warmup"] == [1, 2, 3]
    # 2 examples, batch 1, 2 micro-batches per step: one optimiser step per epoch
    assert [r["step"] for r in records if r["stage"] == "distill"] == [1, 2]
    assert all(r["tokens"] > 0 and r["tokens_per_s"] > 0 for r in records)


def test_step_cap_stops_a_long_stage_and_leaves_a_short_one_to_its_epochs(files, tmp_path):
    n_docs = len(MORE_DOCS)
    messages: list[str] = []
    capped = tmp_path / "capped"
    cfg = {"warmup": {"epochs": 50, "batch_size": 2, "lr": 1e-3, "step_cap": 3}}
    run_pipeline(out=capped, stages="warmup", config=config_from_dict(cfg), seed=1,
                 hooks=Hooks(message=messages.append), **files)
    assert f"warmup: 3 optimiser steps (its step_cap), not the {50 * -(-n_docs // 2):,} of 50 epochs" in messages
    steps = [r for r in _log(capped) if r.get("stage") == "warmup" and "step" in r]
    assert [r["step"] for r in steps] == [1, 2, 3]
    # The rate each step applied: the linear schedule spans the 3 capped steps, not 50 epochs
    # (warm-up 1 step, then (3 - k) / 2 of the peak at step k = 1, 2).
    assert [r["lr"] for r in steps] == pytest.approx([1e-3, 1e-3, 5e-4])
    free = tmp_path / "free"
    cfg = {"warmup": {"epochs": 2, "batch_size": 2, "lr": 1e-3, "step_cap": 1000}}
    run_pipeline(out=free, stages="warmup", config=config_from_dict(cfg), seed=1,
                 hooks=Hooks(message=(quiet := []).append), **files)
    assert quiet and not any("(its step_cap)" in m for m in quiet)
    steps = [r for r in _log(free) if r.get("stage") == "warmup" and "step" in r]
    assert len(steps) == 2 * -(-n_docs // 2)  # unlike max_steps = 1000, the cap is not a target
    total = len(steps)
    assert steps[-1]["lr"] == pytest.approx(1e-3 / (total - 1))  # step total-1 of the decay after 1 warm-up step


def test_a_long_uncapped_stage_says_how_to_bound_it(files, tmp_path, monkeypatch):
    monkeypatch.setattr(loop_mod, "LONG_STAGE", 5)
    per_epoch = -(-len(MORE_DOCS) // 2)
    said: dict[str, list[str]] = {}
    for name, section in {"long": {"epochs": 2}, "short": {"epochs": 1, "max_steps": 6},
                          "capped": {"epochs": 2, "step_cap": 4}}.items():
        cfg = {"warmup": {"batch_size": 2, "lr": 1e-3, **section}}
        run_pipeline(out=tmp_path / name, stages="warmup", config=config_from_dict(cfg), seed=1,
                     hooks=Hooks(message=said.setdefault(name, []).append), **files)
    assert f"warmup: {2 * per_epoch} optimiser steps (2 epochs of {per_epoch}); warmup.step_cap in --config bounds them" \
        in said["long"]
    assert not any("bounds them" in m for m in said["short"] + said["capped"])


def test_token_budget_warmup_trains(files, tmp_path):
    out = tmp_path / "run"
    cfg = {"warmup": {"epochs": 1, "batch_size": 16, "batch_tokens": 40, "bucket_window": 8, "lr": 1e-3}}
    run_pipeline(out=out, stages="warmup", config=config_from_dict(cfg), seed=1, **files)
    steps = [r for r in _log(out) if r.get("stage") == "warmup" and "step" in r]
    assert len(steps) > len(MORE_DOCS) // 16  # the budget, not batch_size, cut the batches
    assert any(not torch.equal(a, b) for a, b in zip(_weights(out / "final").values(), _weights(files["base"]).values()))


# ------------------------------------------------------------------------------ resume
CKPT = {
    "warmup": {"epochs": 2, "batch_size": 3, "lr": 1e-3, "checkpoint_every": 1},
    "dictionary": {"epochs": 1, "batch_size": 1, "lr": 1e-3, "checkpoint_every": 1},
    "distill": {"epochs": 2, "batch_size": 1, "lr": 1e-3, "checkpoint_every": 1, "sp_warmup_steps": 2},
}


def test_crash_mid_stage_resumes_from_the_checkpoint_bit_identically(files, tmp_path, monkeypatch):
    reference = _weights(run_pipeline(out=tmp_path / "ref", config=config_from_dict(CKPT), seed=2, **files))
    out = tmp_path / "run"
    real = loop_mod.nn.utils.clip_grad_norm_
    calls = []

    class PowerCut(Exception):
        pass

    def clip_then_cut(parameters, max_norm):
        calls.append(1)
        if len(calls) == 5:  # warmup's 5th optimiser step, before it is taken
            raise PowerCut()
        return real(parameters, max_norm)

    with monkeypatch.context() as m:
        m.setattr(loop_mod.nn.utils, "clip_grad_norm_", clip_then_cut)
        with pytest.raises(PowerCut):
            run_pipeline(out=out, config=config_from_dict(CKPT), seed=2, **files)
    assert (out / "warmup.partial" / "trainer_state.pt").is_file() and not (out / "warmup").exists()
    messages = []
    from sparse_adapt.progress import Hooks

    run_pipeline(out=out, config=config_from_dict(CKPT), seed=2, hooks=Hooks(message=messages.append), **files)
    assert any(m.startswith("resuming warmup at step 4") for m in messages)
    assert not (out / "warmup.partial").exists()
    resumed = _weights(out / "final")
    assert all(torch.equal(resumed[k], reference[k]) for k in reference)


# Logged optimiser steps of the CKPT run (the log counts on across stages): 1-8 warmup,
# 9-10 dictionary, 11-14 distill. One kill mid-epoch in each stage, in the same run folder.
KILL_AT = (3, 10, 13)


def test_sigkill_in_each_stage_then_rerun_equals_an_uninterrupted_run(files, tmp_path):
    argv = [x for k, v in files.items() for x in (f"--{k}", str(v))]
    config = tmp_path / "ckpt.json"
    config.write_text(json.dumps(CKPT))
    argv += ["--config", str(config), "--seed", "4"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "sparse_adapt", "--device", "cpu", "--threads", "1", "train"]
    subprocess.run(cmd + argv + ["--out", str(tmp_path / "ref")], check=True, env=env, capture_output=True, cwd=ROOT)

    out = tmp_path / "run"
    log = out / "train_log.jsonl"
    for kill_at in KILL_AT:
        proc = subprocess.Popen(cmd + argv + ["--out", str(out)], env=env, cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            steps = sum(1 for line in log.read_text().splitlines() if '"step"' in line) if log.exists() else 0
            if steps >= kill_at:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.005)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL, f"the run ended before step {kill_at}"
    subprocess.run(cmd + argv + ["--out", str(out)], check=True, env=env, capture_output=True, cwd=ROOT)
    reference, resumed = _weights(tmp_path / "ref" / "final"), _weights(out / "final")
    assert all(torch.equal(resumed[k], reference[k]) for k in reference), f"killed at steps {KILL_AT}"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_cleans_up_says_one_line_and_the_rerun_resumes(files, tmp_path, signum):
    """SIGTERM ended the process at once: its temporaries and the lock stayed, and Ctrl-C said nothing."""
    stop_and_rerun(files, tmp_path, signum, device="cpu")


def _as_in_the_foreground() -> None:
    """In the child, before it runs the CLI: a shell's background job (`&`) starts with SIGINT
    ignored, which the CLI rightly leaves so; the test's Ctrl-C is a foreground process's."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def stop_and_rerun(files, tmp_path, signum: int, device: str) -> None:
    """``train`` on ``device`` in a child process, stopped by ``signum`` after its third logged
    step: one line, exit 128+N, no temporary or lock left; the rerun resumes and ends with 0."""
    argv = [x for k, v in files.items() for x in (f"--{k}", str(v))]
    config = tmp_path / "ckpt.json"
    config.write_text(json.dumps(CKPT))
    argv += ["--config", str(config), "--seed", "4", "--out", str(tmp_path / "run")]
    # ROOT first, the rest kept: on a GPU machine the packages may come through PYTHONPATH.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    cmd = [sys.executable, "-m", "sparse_adapt", "--device", device, "--threads", "1", "train"]
    proc = subprocess.Popen(cmd + argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_as_in_the_foreground)
    log = tmp_path / "run" / "train_log.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if log.exists() and sum('"step"' in line for line in log.read_text().splitlines()) >= 3:
            proc.send_signal(signum)
            break
        time.sleep(0.005)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 128 + signum, err
    name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    assert err.strip().splitlines()[-1].startswith(f"stopped by {name}: nothing half-written is left")
    assert "Traceback" not in err
    left = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert not [n for n in left if ".tmp-" in n or n.endswith(".lock")], left
    done = subprocess.run(cmd + argv, env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and "resuming" in done.stdout + done.stderr, done.stderr


def test_a_completed_stages_leftover_partial_checkpoint_is_removed_by_the_rerun(files, tmp_path):
    """Killed between saving a stage and removing its partial checkpoint: no later rerun looked
    at that stage again, so its model and optimiser state stayed."""
    import shutil

    cfg = config_from_dict(CKPT)
    run_pipeline(out=tmp_path / "run", config=cfg, seed=2, stages="extend,warmup", **files)
    (tmp_path / "run" / "warmup.partial").mkdir()
    shutil.copytree(tmp_path / "run" / "warmup", tmp_path / "run" / "warmup.partial" / "model")
    (tmp_path / "run" / "warmup.partial" / "trainer_state.pt").write_bytes(b"state")
    run_pipeline(out=tmp_path / "run", config=cfg, seed=2, stages="extend,warmup", **files)
    assert not (tmp_path / "run" / "warmup.partial").exists() and (tmp_path / "run" / "warmup").is_dir()


def test_a_stage_saved_just_before_a_kill_keeps_its_log_line_and_card_row(files, tmp_path, monkeypatch):
    """The stage was saved, then its stage_end line logged: a kill between the two left a complete
    stage the rerun skipped, with no line, so its row was missing from the model card."""
    import shutil

    from sparse_adapt.training.rundir import stage_ends

    cfg, out = config_from_dict(CKPT), tmp_path / "run"
    real = shutil.rmtree

    def killed_after_the_save(path, *args, **kwargs):  # the step right after the stage's save
        if Path(path) == out / "warmup.partial":
            raise KeyboardInterrupt
        return real(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", killed_after_the_save)
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(out=out, config=cfg, seed=2, stages="extend,warmup", **files)
    monkeypatch.setattr(shutil, "rmtree", real)
    run_pipeline(out=out, config=cfg, seed=2, stages="extend,warmup", **files)
    assert [r["stage"] for r in stage_ends(out / "train_log.jsonl")] == ["extend", "warmup"]
    assert "| warmup |" in (out / "final" / "README.md").read_text(encoding="utf-8")


def test_a_stage_whose_save_failed_leaves_one_line_after_the_rerun(files, tmp_path, monkeypatch):
    """stage_end is logged before the save: a save that fails (a full disk) leaves a line for a
    stage that is not there, which the rerun drops with the attempt before training it again."""
    import errno

    from sparse_adapt.training.rundir import stage_ends

    cfg, out = config_from_dict(CKPT), tmp_path / "run"
    real = SpladeEncoder.save_pretrained

    def full(self, path, *args, **kwargs):
        if Path(path) == out / "warmup":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(SpladeEncoder, "save_pretrained", full)
    with pytest.raises(OSError):
        run_pipeline(out=out, config=cfg, seed=2, stages="extend,warmup", **files)
    assert not (out / "warmup").exists()
    monkeypatch.setattr(SpladeEncoder, "save_pretrained", real)
    run_pipeline(out=out, config=cfg, seed=2, stages="extend,warmup", **files)
    assert [r["stage"] for r in stage_ends(out / "train_log.jsonl")] == ["extend", "warmup"]


def test_a_stop_after_the_command_finished_is_raised_again_for_the_handlers_main_found():
    """Once the command has its code, main()'s handlers let a stop pass (its outputs are complete)
    and note it, for main() to raise again after putting back the handlers it found: a library
    caller's own handler still hears it."""
    from sparse_adapt.cli import _stop_handlers

    late: list[int] = []
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    hook = sys.unraisablehook
    try:
        handlers = _stop_handlers([], done=[0], late=late)
        signal.raise_signal(signal.SIGTERM)  # no KeyboardInterrupt: the command is done
        assert late == [signal.SIGTERM]
    finally:
        sys.unraisablehook = hook
        for s, handler in before.items():
            signal.signal(s, handler)
    assert signal.SIGTERM in handlers


def test_a_signal_set_to_be_ignored_stays_ignored(monkeypatch):
    """`nohup` ignores SIGHUP: the stop handlers replaced that, and a nohup'd run stopped at logout."""
    from sparse_adapt.cli import _stop_handlers

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        handlers = _stop_handlers([])
        assert signal.SIGHUP not in handlers and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.SIGTERM in handlers
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    finally:
        signal.signal(signal.SIGHUP, previous)


TWO_SIGNALS = """
import os, signal, sys, threading, time
from sparse_adapt.cli import app, main

started = threading.Event()

@app.command("slow-cleanup")
def slow_cleanup():
    started.set()
    try:
        time.sleep(30)
    finally:
        time.sleep(1.0)  # cleanup a second signal arrives in the middle of
        print("cleanup finished", file=sys.stderr, flush=True)

def fire():
    started.wait(60)
    os.kill(os.getpid(), signal.SIGTERM)
    # the second only once the first's handler ran: two pending signals run lowest number first
    # (SIGHUP before SIGTERM), which a loaded machine made happen after a fixed 0.3 s
    deadline = time.time() + 60
    while getattr(signal.getsignal(signal.SIGHUP), "__name__", "") != "noted" and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGHUP)

threading.Thread(target=fire, daemon=True).start()
sys.exit(main(["slow-cleanup"]))
"""


def test_a_second_stop_signal_lets_the_first_ones_cleanup_finish():
    proc = subprocess.run([sys.executable, "-c", TWO_SIGNALS], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr[-2000:]
    assert "cleanup finished" in proc.stderr and "stopped by SIGTERM" in proc.stderr


STOP_IN_A_C_CALLBACK = """
import ctypes, os, signal, sys, time
from sparse_adapt.cli import app, main

@app.command("callback-then-work")
def callback_then_work():
    def inside():  # as llvmlite's object-cache callback while numba compiles for ranx
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100_000):  # the handler runs here, inside the callback, which swallows its interrupt
            pass
    ctypes.CFUNCTYPE(None)(inside)()
    time.sleep(20)
    print("ran on to the end", flush=True)

sys.exit(main(["callback-then-work"]))
"""


def test_a_stop_swallowed_by_a_c_callback_still_stops_the_run_with_one_line():
    """A SIGTERM caught inside a ctypes callback printed "Exception ignored ... KeyboardInterrupt"
    with a traceback, and the command ran on to the end before saying it was stopped."""
    proc = subprocess.run([sys.executable, "-c", STOP_IN_A_C_CALLBACK], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr[-2000:]
    assert "ran on to the end" not in proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("stopped by SIGTERM"), proc.stderr[-2000:]


@pytest.mark.parametrize("skip, want", [
    (None, [[0, 1], [2]]),  # the epoch's last step holds batch 2 alone
    (0, [[1], [2]]),  # batch 0 had nothing to learn from: the first step holds batch 1 alone
])
def test_an_accumulated_step_s_gradient_is_the_mean_over_the_batches_it_holds(skip, want, monkeypatch):
    from torch import nn

    from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, seed_everything

    torch.manual_seed(0)
    X = torch.randn(3, 4)
    model = nn.Linear(4, 1, bias=False)
    nn.init.ones_(model.weight)

    def step(indices, number):
        if indices[0] == skip:
            return None
        return StepResult({"loss": (model(X[indices]) ** 2).mean()}, 1)

    seen, adamw_step = [], torch.optim.AdamW.step

    def spy(self, *args, **kwargs):
        seen.append(model.weight.grad.clone())
        return adamw_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", spy)
    cfg = LoopConfig("t", epochs=1, batch_size=1, lr=0.0, weight_decay=0.0, max_grad_norm=1e9, grad_accum=2)
    run_loop(model, lambda g: [[0], [1], [2]], cfg, step, seed_everything(0), lambda record: None)

    def mean_gradient(rows):  # lr 0: the weights never move, so each step's gradient is known by hand
        w = torch.ones(1, 4, requires_grad=True)
        losses = [(X[[i]] @ w.T).pow(2).mean() for i in rows]
        return torch.autograd.grad(sum(losses) / len(losses), w)[0]

    assert len(seen) == len(want)
    for got, rows in zip(seen, want):
        torch.testing.assert_close(got, mean_gradient(rows))


def test_a_longer_later_epoch_still_trains_every_step_at_a_decaying_rate():
    # Token-budget epochs differ in length: sized by the first (4 steps of 2 epochs: 8), the
    # second's 8 steps ran its last 4 at a rate of 0
    from torch import nn

    from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, seed_everything

    model = nn.Linear(2, 1)
    lengths = iter([4, 8])
    logged = []

    def step(indices, number):
        return StepResult({"loss": model(torch.ones(1, 2)).sum() ** 2}, 1)

    cfg = LoopConfig("t", epochs=2, batch_size=1, lr=1.0, weight_decay=0.0, max_grad_norm=1e9)
    run_loop(model, lambda g: [[i] for i in range(next(lengths))], cfg, step, seed_everything(0), logged.append)
    lrs = [r["lr"] for r in logged if "step" in r]
    assert len(lrs) == 12 and min(lrs) > 0  # the decay now ends with the last step of the last epoch
    decay = lrs[4:]  # the second epoch: 8 steps to a horizon of 12 (warm-up: the first of 8 planned)
    assert decay == sorted(decay, reverse=True) and decay[-1] == pytest.approx(1.0 / (12 - 1))


@pytest.mark.parametrize("lengths, cap, steps", [
    ([4, 8], 10, 10),  # not reached by the first epoch's plan (8 steps), passed by the longer second
    ([8, 4], 10, 10),  # reached in the second epoch, though it is shorter
])
def test_step_cap_holds_whatever_the_epochs_lengths(lengths, cap, steps):
    from torch import nn

    from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, seed_everything

    model = nn.Linear(2, 1)
    plans, logged = iter(lengths), []

    def step(indices, number):
        return StepResult({"loss": model(torch.ones(1, 2)).sum() ** 2}, 1)

    cfg = LoopConfig("t", epochs=2, batch_size=1, lr=1.0, weight_decay=0.0, max_grad_norm=1e9, step_cap=cap)
    run_loop(model, lambda g: [[i] for i in range(next(plans))], cfg, step, seed_everything(0), logged.append)
    lrs = [r["lr"] for r in logged if "step" in r]
    assert len(lrs) == steps and min(lrs) > 0


def test_a_distill_stage_resumed_mid_stage_reports_what_an_uninterrupted_one_reports(files, tmp_path, monkeypatch):
    """The stage_end record of a resumed distill (the density before it, counted on the model it
    started from, not the half-trained one; the last losses; the steps) equals the unbroken run's."""
    def stage_end(out):
        [end] = [r for r in _log(out) if r.get("event") == "stage_end" and r["stage"] == "distill"]
        return {k: v for k, v in end.items() if k != "seconds"}

    run_pipeline(out=tmp_path / "ref", stages="extend,distill", config=config_from_dict(CKPT), seed=2, **files)
    out, real, calls = tmp_path / "run", loop_mod.nn.utils.clip_grad_norm_, []

    class PowerCut(Exception):
        pass

    def clip_then_cut(parameters, max_norm):
        calls.append(1)
        if len(calls) == 3:  # distill's 3rd optimiser step of 4, before it is taken
            raise PowerCut()
        return real(parameters, max_norm)

    with monkeypatch.context() as m:
        m.setattr(loop_mod.nn.utils, "clip_grad_norm_", clip_then_cut)
        with pytest.raises(PowerCut):
            run_pipeline(out=out, stages="extend,distill", config=config_from_dict(CKPT), seed=2, **files)
    assert (out / "distill.partial" / "trainer_state.pt").is_file()
    run_pipeline(out=out, stages="extend,distill", config=config_from_dict(CKPT), seed=2, **files)
    assert stage_end(out) == stage_end(tmp_path / "ref")


def test_token_budget_batches_are_cut_longest_first_and_served_in_a_seeded_random_order():
    """Within a window the texts are sorted by length and cut; the batches are then shuffled, or
    every epoch would open with its longest batch and close with its shortest."""
    lengths = np.arange(10, 0, -1, dtype=np.int32)  # text i has 10 - i pieces
    g = torch.Generator().manual_seed(5)
    torch.randperm(10, generator=g)  # the epoch's order, which the length sort then overrides
    served = torch.randperm(5, generator=g).tolist()
    cut = [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    assert served != list(range(5))
    assert plan_epoch(lengths, 2, 1000, 10, torch.Generator().manual_seed(5)) == [cut[j] for j in served]


def test_a_token_budget_batch_may_fill_the_budget_exactly_and_never_holds_more_than_batch_size():
    lengths = np.full(7, 10, dtype=np.int32)  # 3 texts of 10 pieces fill a budget of 30 exactly
    for budget in (30, 1000):
        batches = plan_epoch(lengths, 3, budget, 100, torch.Generator().manual_seed(0))
        assert sorted(len(b) for b in batches) == [1, 3, 3], budget


# ------------------------------------------------------------------------------ the loop itself
def _toy_loop(resume=None, crash_at=None, weights=None, epochs=6, **kw):
    """A linear model trained by run_loop on epochs of other lengths (the plan draws each
    epoch's batch size from the generator, as token budgets vary): the records it logs, its
    result, its weights and the checkpoint saved at step ``crash_at`` (then stopped)."""
    from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, seed_everything

    data = torch.Generator().manual_seed(1)
    X, y = torch.randn(12, 3, generator=data), torch.randn(12, 1, generator=data)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 1))
    if weights is not None:
        model.load_state_dict(weights)

    def plan(g):
        size = int(torch.randint(2, 6, (1,), generator=g))
        order = torch.randperm(12, generator=g).tolist()
        return [order[b: b + size] for b in range(0, 12, size)]

    def step(idx, number):
        return StepResult({"loss": ((model(X[idx]) - y[idx]) ** 2).mean()}, len(idx))

    saved = {}

    def checkpoint(state):
        if state["steps"] == crash_at:
            saved.update(state=copy.deepcopy(state), weights=copy.deepcopy(model.state_dict()))
            raise KeyboardInterrupt

    logged = []
    cfg = LoopConfig("toy", epochs=epochs, batch_size=1, lr=0.05, weight_decay=0.1, max_grad_norm=0.5,
                     checkpoint_every=1, **kw)
    result = None
    try:
        result = run_loop(model, plan, cfg, step, seed_everything(3), logged.append, resume=resume,
                          checkpoint=checkpoint)
    except KeyboardInterrupt:
        pass
    records = [{k: v for k, v in r.items() if k != "tokens_per_s"} for r in logged]
    return records, result, model.state_dict(), saved


@pytest.mark.parametrize("crash_at", [5, 11])
def test_a_loop_resumed_from_its_checkpoint_equals_the_uninterrupted_loop_step_for_step(crash_at):
    """Every piece of the loop's state comes back from the checkpoint: the plan and position,
    the optimiser and schedule (the warm-up sized by the first epoch), the RNG streams (dropout,
    the next epoch's plan), the step count and the partial epoch's loss sums."""
    whole, result, weights, _ = _toy_loop()
    first, _, _, saved = _toy_loop(crash_at=crash_at)
    assert saved and first == whole[:crash_at]
    torch.manual_seed(1234)  # the resumed process's own state is replaced by the checkpoint's
    rest, resumed, resumed_weights, _ = _toy_loop(resume=saved["state"], weights=saved["weights"])
    assert rest == whole[crash_at:]
    assert resumed.steps == result.steps and resumed.epoch_means == result.epoch_means
    assert resumed.tokens == result.tokens and resumed.last == result.last
    for k in weights:
        assert torch.equal(resumed_weights[k], weights[k]), k


@pytest.mark.parametrize("max_steps, want", [(0, [(3, 3), (6, 6)]), (6, [(3, 3)])])
def test_checkpoints_are_saved_every_checkpoint_every_steps_and_not_once_max_steps_is_reached(max_steps, want):
    from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, seed_everything

    model = nn.Linear(2, 1)
    saved = []

    def step(idx, number):
        return StepResult({"loss": model(torch.ones(1, 2)).sum() ** 2}, 1)

    cfg = LoopConfig("toy", epochs=1, batch_size=1, lr=0.01, weight_decay=0.0, max_grad_norm=1.0, checkpoint_every=3,
                     max_steps=max_steps)
    run_loop(model, lambda g: [[i] for i in range(8)], cfg, step, seed_everything(0), lambda r: None,
             checkpoint=lambda state: saved.append((state["steps"], state["position"])))
    assert saved == want  # at max_steps the stage is done: its save is the stage's own


def test_the_seed_decides_the_data_order_and_the_global_random_streams():
    import random

    import numpy as np

    from sparse_adapt.training.loop import seed_everything

    def draws(seed):
        g = seed_everything(seed)
        return (torch.randperm(20, generator=g).tolist(), torch.rand(3).tolist(), random.random(), float(np.random.rand()))

    assert draws(7) == draws(7)
    one, other = draws(7), draws(8)
    assert all(a != b for a, b in zip(one, other))  # each stream follows the seed, the plan's generator too


def test_biases_and_layer_norm_weights_take_no_weight_decay_and_frozen_weights_are_not_optimised():
    from sparse_adapt.training.loop import make_optimizer

    model = nn.Sequential(nn.Linear(3, 2), nn.LayerNorm(2), nn.Linear(2, 2))
    model[2].weight.requires_grad_(False)
    opt = make_optimizer(model, lr=1e-3, weight_decay=0.5)
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.5 and no_decay["weight_decay"] == 0.0
    assert [id(p) for p in decay["params"]] == [id(model[0].weight)]
    assert [id(p) for p in no_decay["params"]] == [id(model[0].bias), id(model[1].weight), id(model[1].bias),
                                                   id(model[2].bias)]


def test_an_infinite_loss_with_a_finite_gradient_stops_before_the_step():
    """loss + inf has the loss's own (finite) gradient: only the loss check can catch it."""
    from sparse_adapt.errors import NonFiniteError
    from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, shuffled_batches

    model = nn.Linear(2, 1)
    before = {k: v.clone() for k, v in model.state_dict().items()}

    def step(idx, n):
        return StepResult({"loss": model(torch.ones(1, 2)).sum() + math.inf}, 1)

    cfg = LoopConfig("toy", epochs=1, batch_size=1, lr=0.1, weight_decay=0.0, max_grad_norm=1.0)
    with pytest.raises(NonFiniteError, match=r"toy: epoch 1, step 1: the loss is not finite \(loss=inf\)"):
        run_loop(model, shuffled_batches(2, 1), cfg, step, torch.Generator().manual_seed(0), log=lambda r: None)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_steps_train_with_dropout_on_and_the_epoch_callback_sees_it_off():
    from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, seed_everything

    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    model.eval()  # as a loaded model comes
    modes = []

    def step(idx, number):
        modes.append(("step", model.training))
        return StepResult({"loss": model(torch.ones(1, 2)).sum() ** 2}, 1)

    def on_epoch_end(epoch):
        modes.append(("epoch", model.training))
        return False

    cfg = LoopConfig("toy", epochs=2, batch_size=1, lr=0.01, weight_decay=0.0, max_grad_norm=1.0)
    run_loop(model, lambda g: [[0], [1]], cfg, step, seed_everything(0), lambda r: None, on_epoch_end=on_epoch_end)
    assert modes == [("step", True), ("step", True), ("epoch", False)] * 2 and not model.training


def test_each_steps_gradient_is_clipped_to_max_grad_norm_before_the_optimiser_steps(monkeypatch):
    from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, seed_everything

    model = nn.Linear(2, 1)
    norms, adamw_step = [], torch.optim.AdamW.step

    def spy(self, *args, **kwargs):
        norms.append(float(torch.cat([p.grad.flatten() for p in model.parameters()]).norm()))
        return adamw_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", spy)

    def step(idx, number):  # a gradient of norm ~100 or more
        return StepResult({"loss": 100.0 * model(torch.ones(1, 2)).sum()}, 1)

    cfg = LoopConfig("toy", epochs=1, batch_size=1, lr=0.01, weight_decay=0.0, max_grad_norm=0.25)
    run_loop(model, lambda g: [[0], [1]], cfg, step, seed_everything(0), lambda r: None)
    assert norms == [pytest.approx(0.25, rel=1e-4)] * 2


def test_a_step_cap_inside_a_longer_later_epoch_is_where_the_rate_decays_to():
    """Epochs of 4 then 8 steps under a cap of 10: the second epoch moves the horizon to the cap,
    not to the 12 steps its length plans, so the last step runs at (10 - 9) / (10 - 1) of lr."""
    from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, seed_everything

    model = nn.Linear(2, 1)
    plans, logged = iter([4, 8]), []

    def step(indices, number):
        return StepResult({"loss": model(torch.ones(1, 2)).sum() ** 2}, 1)

    cfg = LoopConfig("t", epochs=2, batch_size=1, lr=1.0, weight_decay=0.0, max_grad_norm=1e9, step_cap=10)
    run_loop(model, lambda g: [[i] for i in range(next(plans))], cfg, step, seed_everything(0), logged.append)
    lrs = [r["lr"] for r in logged if "step" in r]
    assert lrs[4:] == pytest.approx([(10 - s) / 9 for s in range(4, 10)])  # warm-up: 1 step of the first 8


def test_an_epoch_ending_in_a_short_group_counts_it_as_a_step_of_the_schedule():
    # 5 batches, 2 a step: 3 steps, the last of one batch. The decay ends after the third
    # (warm-up 1 step): rates 1, (3-1)/2, (3-2)/2. Counting only full groups (2 steps) would
    # train the third at a rate of 0.
    from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, seed_everything

    model, logged = nn.Linear(2, 1), []

    def step(indices, number):
        return StepResult({"loss": model(torch.ones(1, 2)).sum() ** 2}, 1)

    cfg = LoopConfig("t", epochs=1, batch_size=1, lr=1.0, weight_decay=0.0, max_grad_norm=1e9, grad_accum=2)
    run_loop(model, lambda g: [[i] for i in range(5)], cfg, step, seed_everything(0), logged.append)
    assert [r["lr"] for r in logged] == pytest.approx([1.0, 1.0, 0.5])


def test_each_epoch_s_mean_loss_is_over_that_epoch_s_steps_alone():
    # Step n's loss is n (its gradient 0): epochs of 2 steps have the means 1.5 and 3.5.
    from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, seed_everything

    model = nn.Linear(2, 1)

    def step(indices, number):
        return StepResult({"loss": model(torch.ones(1, 2)).sum() * 0 + number}, 1)

    cfg = LoopConfig("t", epochs=2, batch_size=1, lr=1.0, weight_decay=0.0, max_grad_norm=1e9)
    result = run_loop(model, lambda g: [[0], [1]], cfg, step, seed_everything(0), lambda r: None)
    assert result.epoch_means == [{"loss": 1.5}, {"loss": 3.5}] and result.steps == 4


def test_fixed_size_batches_hold_every_item_once_when_the_last_batch_is_short():
    from sparse_adapt.training.loop import shuffled_batches

    batches = shuffled_batches(5, 2)(torch.Generator().manual_seed(0))
    assert [len(b) for b in batches] == [2, 2, 1] and sorted(sum(batches, [])) == list(range(5))


def test_each_rank_past_zero_draws_a_stream_of_its_own():
    # with three processes, ranks 1 and 2 must not mask alike either
    from sparse_adapt.training.loop import seed_apart

    def draws(rank):
        g = torch.Generator().manual_seed(7)
        seed_apart(g, rank)
        return torch.rand(4, generator=g).tolist()

    assert draws(1) != draws(2) and draws(1) == draws(1)


def _constant_loop(cfg_kw, plan_lengths, losses=None, on_epoch_end=None, skip=(), tokens=None, step_line=None):
    """run_loop on a 2-weight model whose batch i has loss ``losses[i]`` (gradient 0 unless none
    given) and ``tokens[i]`` tokens (1 unless given); returns the logged step records, the result
    and the console messages."""
    from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, seed_everything

    model, logged, said = nn.Linear(2, 1), [], []
    plans = iter(plan_lengths)

    def step(indices, number):
        if indices[0] in skip:
            return None
        out = model(torch.ones(1, 2)).sum()
        return StepResult({"loss": out * 0 + losses[indices[0]] if losses else out ** 2},
                          tokens[indices[0]] if tokens else 1)

    cfg = LoopConfig("t", batch_size=1, weight_decay=0.0, max_grad_norm=1e9, **{"lr": 1.0, **cfg_kw})
    result = run_loop(model, lambda g: [[i] for i in range(next(plans))], cfg, step, seed_everything(0),
                      logged.append, Hooks(message=said.append), step_line, on_epoch_end=on_epoch_end)
    return logged, result, said


def test_an_accumulated_steps_logged_losses_are_the_mean_over_its_batches():
    logged, result, _ = _constant_loop({"epochs": 1, "grad_accum": 2}, [3], losses=[1.0, 3.0, 8.0])
    assert [r["loss"] for r in logged] == [2.0, 8.0] and result.last == {"loss": 8.0}
    assert result.epoch_means == [{"loss": 5.0}]


def test_a_later_epoch_as_long_as_the_first_still_moves_the_decay_back():
    # epochs of 4, 8 then 4 steps: the third ends the decay at step 16, not at the 20 the
    # second epoch planned (its last step runs at (16 - 15) / (16 - 1) of lr)
    logged, _, _ = _constant_loop({"epochs": 3}, [4, 8, 4])
    lrs = [r["lr"] for r in logged]
    assert len(lrs) == 16 and lrs[-1] == pytest.approx(1 / 15)


def test_a_batch_with_nothing_to_learn_from_takes_no_optimiser_step():
    logged, result, _ = _constant_loop({"epochs": 1}, [3], losses=[1.0, 2.0, 3.0], skip={0})
    assert result.steps == 2 and [r["loss"] for r in logged] == [2.0, 3.0]


def test_an_epoch_callback_that_stops_the_stage_is_called_once():
    calls = []
    _, result, _ = _constant_loop({"epochs": 3}, [2, 2, 2], on_epoch_end=lambda e: calls.append(e) or True)
    assert calls == [1] and result.steps == 2


def test_a_step_cap_equal_to_the_epochs_steps_and_a_stage_of_exactly_long_stage_steps_say_nothing(monkeypatch):
    monkeypatch.setattr(loop_mod, "LONG_STAGE", 4)
    _, result, said = _constant_loop({"epochs": 2, "step_cap": 4}, [2, 2])
    assert result.steps == 4 and not any("step_cap" in m for m in said)
    _, result, said = _constant_loop({"epochs": 2}, [2, 2])
    assert result.steps == 4 and not any("bounds them" in m for m in said)
    _, _, said = _constant_loop({"epochs": 1}, [5])
    assert any("bounds them" in m for m in said)


def test_the_console_line_comes_every_log_every_steps_only():
    _, _, said = _constant_loop({"epochs": 1, "lr": 0.01, "log_every": 2}, [5],
                                step_line=lambda n, losses: f"Step {n}")
    assert [m for m in said if m.startswith("Step")] == ["Step 2", "Step 4"]


def test_each_step_logs_its_own_tokens_and_the_result_counts_them_all():
    # batches of 5, 7 and 11 tokens, 2 a step: the steps hold 12 and 11
    logged, result, _ = _constant_loop({"epochs": 1, "lr": 0.01, "grad_accum": 2}, [3], tokens=[5, 7, 11])
    assert [r["tokens"] for r in logged] == [12, 11] and result.tokens == 23


def test_a_resumed_loops_progress_starts_at_the_steps_already_taken():
    from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, seed_everything

    model, saved = nn.Linear(2, 1), []

    def step(indices, number):
        return StepResult({"loss": model(torch.ones(1, 2)).sum() ** 2}, 1)

    def checkpoint(state):
        saved.append(copy.deepcopy(state))
        raise KeyboardInterrupt

    cfg = LoopConfig("t", epochs=1, batch_size=1, lr=0.01, weight_decay=0.0, max_grad_norm=1e9, checkpoint_every=3)
    plan = lambda g: [[i] for i in range(5)]  # noqa: E731
    with pytest.raises(KeyboardInterrupt):
        run_loop(model, plan, cfg, step, seed_everything(0), lambda r: None, checkpoint=checkpoint)
    bars = []

    class Bar:
        def __init__(self, name, total):
            self.total, self.done = total, 0
            bars.append(self)

        def advance(self, steps=1, description=None):
            self.done += steps

    run_loop(model, plan, cfg, step, seed_everything(0), lambda r: None, Hooks(task=Bar), resume=saved[0])
    assert [(b.total, b.done) for b in bars] == [(5, 5)]  # 3 before the stop, 2 after


def test_an_epoch_whose_every_batch_had_nothing_to_learn_from_has_no_mean_and_the_next_still_trains():
    logged, result, said = _constant_loop({"epochs": 2}, [2, 3], losses=[1.0, 2.0, 4.0], skip={0, 1})
    assert result.steps == 1 and result.epoch_means == [{"loss": 4.0}] and [r["loss"] for r in logged] == [4.0]


def test_a_single_process_masks_from_the_seeds_own_stream_and_logs_each_steps_epoch():
    # reseeding is for ranks past 0 only: one process's draws follow the seed (as before multi-process runs)
    from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, seed_everything

    model, drawn, logged = nn.Linear(2, 1), [], []

    def plan(g):
        order = torch.randperm(2, generator=g).tolist()
        return [[i] for i in order]

    def step(indices, number):
        drawn.append(float(torch.rand(1, generator=gen)))
        return StepResult({"loss": model(torch.ones(1, 2)).sum() ** 2}, 1)

    gen = seed_everything(4)
    cfg = LoopConfig("t", epochs=2, batch_size=1, lr=0.01, weight_decay=0.0, max_grad_norm=1e9)
    run_loop(model, plan, cfg, step, gen, logged.append)
    own = torch.Generator().manual_seed(4)
    want = [(torch.randperm(2, generator=own), torch.rand(2, generator=own).tolist())[1] for _ in range(2)]
    assert drawn == sum(want, [])
    assert [r["epoch"] for r in logged] == [1, 1, 2, 2]


def test_a_restored_random_state_replays_every_stream():
    import random

    from sparse_adapt.training.loop import rng_state, seed_everything, set_rng_state

    def draws(g):
        return (torch.rand(2, generator=g).tolist(), torch.rand(2).tolist(), random.random(), float(np.random.rand()))

    g = seed_everything(5)
    state = rng_state(g)
    first = draws(g)
    set_rng_state(state, g)
    assert draws(g) == first


def test_a_checkpoint_written_without_a_gpu_resumes_on_a_machine_with_one(monkeypatch):
    from sparse_adapt.training.loop import rng_state, seed_everything, set_rng_state

    g = seed_everything(5)
    state = rng_state(g)
    assert state["cuda"] == []  # this suite runs on CPU
    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_rng_state", restored.append)
    set_rng_state(state, g)  # no GPU state to restore: the GPU keeps its own
    assert restored == []


def test_the_numbers_the_training_loop_states_are_its_own_and_the_warmup_defaults():
    """The loop's text sizes the warm-up of its schedule and a default warmup stage: a default
    changed in config.py or in linear_schedule leaves the prose with the old one."""
    import inspect
    import re

    from sparse_adapt.training.config import WarmupConfig

    text = Path(loop_mod.__file__).read_text(encoding="utf-8")
    sized = re.search(r"warmup's (\d+) epochs: ([\d.]+) steps a document", text)
    warmup = WarmupConfig()
    assert (int(sized[1]), float(sized[2])) == (warmup.epochs, warmup.epochs / warmup.batch_size)
    share = re.search(r"over the first (\d+)% of steps", loop_mod.linear_schedule.__doc__)
    assert int(share[1]) / 100 == inspect.signature(loop_mod.linear_schedule).parameters["warmup_frac"].default


def test_the_device_error_names_the_kinds_that_take_an_index_and_exactly_those_do(monkeypatch):
    # it said "(or cuda:N)" while cpu:N and mps:N were accepted too
    import re

    from sparse_adapt.device import CHOICES

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    with pytest.raises(ConfigError) as refused:
        resolve_device("tpu:1")
    named = re.search(r"; ([\w, ]+) may take an index", str(refused.value)).group(1).split(", ")
    for kind in CHOICES:
        if kind in named:
            assert resolve_device(f"{kind}:1") == torch.device(f"{kind}:1")
        else:
            with pytest.raises(ConfigError, match="must be one of"):
                resolve_device(f"{kind}:1")
    assert set(named) < set(CHOICES)
