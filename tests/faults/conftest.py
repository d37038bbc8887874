"""Shared pieces of the fault suite: a tiny saved model, tiny training inputs, the CLI run
in-process with its exit code and streams, and a directory nobody can write to."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparse_adapt.cli import main
from tests.conftest import make_tiny_bert
from tests.training.test_stages import DICTIONARY, DOCS, TERMS_JSON, TRAIN, _jsonl

# Two quick distill steps: enough to reach a second optimiser step.
SMALL = {"distill": {"epochs": 2, "batch_size": 2, "lr": 1e-3, "log_every": 1, "sp_warmup_steps": 2}}


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def err_line(self) -> str:
        return " ".join(self.err.split())  # rich may wrap long lines


def cli(capsys, argv: list[str]) -> Result:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.code == 2, (result.code, result.out[-2000:], result.err[-2000:])
    assert "Traceback" not in result.err + result.out
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.err
    for fragment in fragments:
        assert fragment in result.err_line, (fragment, result.err)


def hidden_leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random BERT made sparse (a decoder bias of -0.3 leaves a few dozen active terms)."""
    import torch

    splade = make_tiny_bert()
    with torch.no_grad():
        splade.mlm.get_output_embeddings().bias -= 0.3
    return splade.save_pretrained(tmp_path_factory.mktemp("faults") / "tiny")


@pytest.fixture
def train_inputs(tmp_path) -> dict[str, Path]:
    (tmp_path / "terms.json").write_text(json.dumps(TERMS_JSON), encoding="utf-8")
    config = tmp_path / "small.json"
    config.write_text(json.dumps(SMALL), encoding="utf-8")
    return {
        "corpus": _jsonl(tmp_path / "docs.jsonl", DOCS), "terms": tmp_path / "terms.json",
        "dictionary": _jsonl(tmp_path / "dict.jsonl", DICTIONARY), "train": _jsonl(tmp_path / "train.jsonl", TRAIN),
        "config": config,
    }


def train_argv(model: Path, inputs: dict[str, Path], out: Path, stages: str = "extend,distill") -> list[str]:
    return [
        "train", "--base", model, "--corpus", inputs["corpus"], "--terms", inputs["terms"],
        "--dictionary", inputs["dictionary"], "--train", inputs["train"], "--config", inputs["config"],
        "--out", out, "--stages", stages, "--seed", "3",
    ]


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory no process may create files in: permission bits, plus the immutable
    attribute when running as root (root ignores permission bits)."""
    d = tmp_path / "read-only"
    d.mkdir()
    (d / "existing.txt").write_text("mine")
    d.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    immutable = False
    if os.geteuid() == 0:
        chattr = shutil.which("chattr")
        proc = subprocess.run([chattr, "+i", str(d)], capture_output=True) if chattr else None
        if proc is None or proc.returncode != 0:
            d.chmod(0o755)
            pytest.skip("running as root on a filesystem without chattr +i: no way to make a read-only directory")
        immutable = True
    try:
        probe = d / "probe"
        probe.write_text("x")
    except OSError:
        pass
    else:  # pragma: no cover - the environment gives no read-only directory
        probe.unlink()
        pytest.skip("cannot make a read-only directory here")
    yield d
    if immutable:
        subprocess.run(["chattr", "-i", str(d)], check=True)
    d.chmod(0o755)
