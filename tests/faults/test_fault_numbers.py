"""Issue rows: a NaN teacher score, a NaN config weight, a loss that stops being finite.
NaN never becomes a model: bad numbers in files are errors naming file, line and field,
and a step whose loss or gradient is not finite stops the run before it touches the
weights, keeping the last good checkpoint."""

from __future__ import annotations

import json

import pytest
import torch

from sparse_adapt.errors import SparseAdaptError
from sparse_adapt.losses import DistillationLoss
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.progress import Hooks
from sparse_adapt.training.config_files import load_config
from sparse_adapt.training.pipeline import run_pipeline
from tests.faults.conftest import assert_one_line_error, cli, train_argv
from tests.training.test_stages import TRAIN


@pytest.mark.parametrize("score", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_teacher_score_names_file_line_and_field(score, tiny_model_dir, train_inputs, tmp_path, capsys):
    bad = json.dumps({**TRAIN[0], "teacher_scores": "S"}).replace('"S"', f"[10.0, {score}, -8.0]")
    train_inputs["train"].write_text(json.dumps(TRAIN[1]) + "\n" + bad + "\n")
    out = tmp_path / "run"
    result = cli(capsys, train_argv(tiny_model_dir, train_inputs, out, stages="distill"))
    assert_one_line_error(result, f"{train_inputs['train']}:2: field 'teacher_scores[1]'", "finite number")
    assert not out.exists()


@pytest.mark.parametrize(
    "name, text",
    [("c.json", '{"distill": {"kd": NaN}}'), ("c.json", '{"distill": {"kd": Infinity}}'),
     ("c.json", '{"distill": {"kd": 1e999}}'), ("c.toml", "[distill]\nkd = nan\n"), ("c.toml", "[distill]\nkd = inf\n")],
)
def test_non_finite_config_weight_names_file_and_key(name, text, tiny_model_dir, train_inputs, tmp_path, capsys):
    config = tmp_path / name
    config.write_text(text)
    with pytest.raises(SparseAdaptError, match="distill.kd"):
        load_config(config)
    train_inputs["config"] = config
    out = tmp_path / "run"
    result = cli(capsys, train_argv(tiny_model_dir, train_inputs, out, stages="distill"))
    assert_one_line_error(result, str(config), "distill.kd")
    assert not out.exists()


def test_nan_in_a_config_built_in_python_is_refused():
    from sparse_adapt.training.config import DistillConfig, TrainConfig

    with pytest.raises(SparseAdaptError, match="distill.kd"):
        TrainConfig(distill=DistillConfig(kd=float("nan"))).validate()


@pytest.fixture
def nan_from_step_2(monkeypatch):
    """The distillation loss turns NaN from optimiser step 2 on (the rest of the model is untouched)."""
    original = DistillationLoss.forward

    def forward(self, *args, step, **kwargs):
        terms = original(self, *args, step=step, **kwargs)
        if step >= 2:
            terms["total"] = terms["total"] * float("nan")
        return terms

    monkeypatch.setattr(DistillationLoss, "forward", forward)


def _pipeline(model, inputs, out, **kw):
    return run_pipeline(
        base=str(model), corpus=inputs["corpus"], terms=inputs["terms"], dictionary=inputs["dictionary"],
        train=inputs["train"], out=out, stages="extend,distill", config=inputs["config"], seed=3, **kw,
    )


def test_non_finite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(
    tiny_model_dir, train_inputs, tmp_path, nan_from_step_2, monkeypatch
):
    out = tmp_path / "run"
    with pytest.raises(SparseAdaptError, match=r"distill: epoch 2, step 2: the loss is not finite") as e:
        _pipeline(tiny_model_dir, train_inputs, out)
    assert f"Last good checkpoint: {out / 'extend'}" in str(e.value)
    assert not (out / "distill").exists() and not (out / "final").exists()
    good = SpladeEncoder.from_pretrained(out / "extend")
    assert all(bool(torch.isfinite(p).all()) for p in good.mlm.parameters())
    events = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "stopped" and events[-1]["stage"] == "distill"
    # with the cause gone (and, as a user would, a lower distill.lr), the run resumes from the good checkpoint
    monkeypatch.undo()
    config = json.loads(train_inputs["config"].read_text())
    config["distill"]["lr"] /= 10
    train_inputs["config"].write_text(json.dumps(config))
    messages: list[str] = []
    final = _pipeline(tiny_model_dir, train_inputs, out, hooks=Hooks(message=messages.append))
    assert "resuming: extend already complete" in "\n".join(messages)
    assert all(bool(torch.isfinite(p).all()) for p in SpladeEncoder.from_pretrained(final).mlm.parameters())


def test_non_finite_loss_through_the_cli_is_one_line(tiny_model_dir, train_inputs, tmp_path, nan_from_step_2, capsys):
    result = cli(capsys, train_argv(tiny_model_dir, train_inputs, tmp_path / "run"))
    assert_one_line_error(result, "the loss is not finite", "Last good checkpoint")


def test_a_finite_loss_with_a_non_finite_gradient_also_stops():
    from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, shuffled_batches

    model = torch.nn.Linear(2, 1)
    before = {k: v.clone() for k, v in model.state_dict().items()}

    def step(idx, n):
        w = model.weight
        return StepResult({"loss": torch.sqrt(((w - w.detach()) ** 2).sum())}, 1)  # value 0, gradient 0/0

    cfg = LoopConfig("toy", epochs=1, batch_size=1, lr=0.1, weight_decay=0.0, max_grad_norm=1.0)
    with pytest.raises(SparseAdaptError, match="toy: epoch 1, step 1: the gradient is not finite"):
        run_loop(model, shuffled_batches(2, 1), cfg, step, torch.Generator().manual_seed(0), log=lambda r: None)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_base_with_a_nan_bias_is_refused(tmp_path, capsys):
    result = cli(capsys, ["base", "--from-encoder", "offline-minilm", "--bias", "nan", "--out", tmp_path / "b"])
    assert_one_line_error(result, "--bias must be a finite number")
    assert not (tmp_path / "b").exists()
