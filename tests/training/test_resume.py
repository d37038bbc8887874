"""Reruns after a stop: what a mid-stage checkpoint may and may not carry into the next attempt."""

from __future__ import annotations

import json
import math
import re
from collections import Counter

import pytest
import torch

from sparse_adapt.errors import ConfigError
from sparse_adapt.progress import Hooks
from sparse_adapt.training import loop as loop_mod
from sparse_adapt.training.config_files import config_from_dict
from sparse_adapt.training.loop import NonFiniteError
from sparse_adapt.training.pipeline import run_pipeline
from tests.training.test_scale import _log, _weights, files, tiny_dir  # noqa: F401 - fixtures

WARMUP = {"warmup": {"epochs": 2, "batch_size": 3, "lr": 1e-3, "checkpoint_every": 1}}


class PowerCut(Exception):
    pass


def _cut_at(monkeypatch, step: int, then=PowerCut):
    """Make the ``step``-th optimiser step fail before it is taken (``then``: what it raises)."""
    real = loop_mod.nn.utils.clip_grad_norm_
    calls = []

    def clip(parameters, max_norm):
        calls.append(1)
        if len(calls) == step:
            if then is PowerCut:
                raise PowerCut()
            return torch.tensor(float("nan"))  # a gradient gone non-finite
        return real(parameters, max_norm)

    monkeypatch.setattr(loop_mod.nn.utils, "clip_grad_norm_", clip)


def _reference_and_cut_run(files, tmp_path, monkeypatch, reference_config=WARMUP):
    """(weights of an unbroken run with ``reference_config``, OUT of a WARMUP run cut at step 4)."""
    reference = _weights(run_pipeline(out=tmp_path / "ref", stages="extend,warmup",
                                      config=config_from_dict(reference_config), seed=3, **files))
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        _cut_at(m, 4)
        with pytest.raises(PowerCut):
            run_pipeline(out=out, stages="extend,warmup", config=config_from_dict(WARMUP), seed=3, **files)
    return reference, out


def _said(run, **kwargs) -> list[str]:
    messages: list[str] = []
    run(hooks=Hooks(message=messages.append), **kwargs)
    return messages


def test_a_checkpoint_without_a_complete_model_is_none_and_a_missing_key_reads_as_its_default(tiny_bert, tmp_path):
    from sparse_adapt.training.checkpoint import MODEL, load_partial, partial_value, save_partial

    path = tmp_path / "distill.partial"
    save_partial(path, tiny_bert, {"steps": 3})
    assert partial_value(path, "steps", 0) == 3
    # a checkpoint saved before "world" was recorded is a single process's: the caller's default
    assert partial_value(path, "world", 1) == 1
    assert load_partial(path)[1] == {"steps": 3}
    # loop state beside a model folder that lost its config: nothing a rerun can continue from
    (path / MODEL / "config.json").unlink()
    assert load_partial(path) is None


def test_a_checkpoint_without_its_loop_state_is_none_and_its_values_read_as_defaults(tiny_bert, tmp_path):
    # A model folder alone holds no position to continue from: the stage starts afresh.
    from sparse_adapt.training.checkpoint import TRAINER_STATE, load_partial, partial_value, save_partial

    path = tmp_path / "distill.partial"
    assert load_partial(path) is None and partial_value(path, "steps", 0) == 0  # no checkpoint at all
    save_partial(path, tiny_bert, {"steps": 3})
    (path / TRAINER_STATE).unlink()
    assert load_partial(path) is None and partial_value(path, "steps", 0) == 0


def test_a_checkpoint_loads_its_model_onto_the_device_the_run_asked_for(tiny_bert, tmp_path, monkeypatch):
    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.training.checkpoint import load_partial, save_partial

    save_partial(tmp_path / "p", tiny_bert, {"steps": 1})
    real, asked = SpladeEncoder.from_pretrained.__func__, []

    def spy(cls, path, **kwargs):
        asked.append(kwargs.get("device"))
        return real(cls, path, **kwargs)

    monkeypatch.setattr(SpladeEncoder, "from_pretrained", classmethod(spy))
    load_partial(tmp_path / "p", torch.device("cpu"))
    assert asked == [torch.device("cpu")]


_UNPICKLED: list[str] = []


def _ran_on_load() -> str:
    _UNPICKLED.append("ran")
    return "ran"


class _RunsCodeWhenLoaded:
    def __reduce__(self):
        return (_ran_on_load, ())


def test_a_checkpoint_whose_loop_state_would_run_code_is_refused_unrun(tiny_bert, tmp_path):
    # trainer_state.pt holds tensors and plain values only; a pickled callable in a file someone
    # put in the run folder is refused, never called.
    import pickle

    from sparse_adapt.training.checkpoint import TRAINER_STATE, load_partial, save_partial

    path = tmp_path / "distill.partial"
    save_partial(path, tiny_bert, {"steps": 1})
    torch.save({"steps": 1, "hook": _RunsCodeWhenLoaded()}, path / TRAINER_STATE)
    with pytest.raises(pickle.UnpicklingError):
        load_partial(path)
    assert _UNPICKLED == []


def test_reading_one_value_of_a_checkpoint_whose_loop_state_would_run_code_is_refused_unrun(tiny_bert, tmp_path):
    # A rerun reads "steps"/"world" before loading the checkpoint: that read is as strict.
    import pickle

    from sparse_adapt.training.checkpoint import TRAINER_STATE, partial_value, save_partial

    path = tmp_path / "distill.partial"
    save_partial(path, tiny_bert, {"steps": 1})
    torch.save({"steps": 1, "hook": _RunsCodeWhenLoaded()}, path / TRAINER_STATE)
    with pytest.raises(pickle.UnpicklingError):
        partial_value(path, "steps", 0)
    assert _UNPICKLED == []


def test_a_stage_stopped_by_a_non_finite_gradient_restarts_afresh(files, tmp_path, monkeypatch):
    """Its partial checkpoint led to the NaN (and holds the optimiser's lr): the rerun the error
    advises starts the stage from the last good checkpoint, as an unbroken run would."""
    reference = _weights(run_pipeline(out=tmp_path / "ref", stages="extend,warmup",
                                      config=config_from_dict(WARMUP), seed=3, **files))
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        _cut_at(m, 4, then="nan")
        with pytest.raises(NonFiniteError, match=f"Last good checkpoint: {out / 'extend'}; rerun to resume from it"):
            run_pipeline(out=out, stages="extend,warmup", config=config_from_dict(WARMUP), seed=3, **files)
    assert not (out / "warmup.partial").exists()
    said = _said(run_pipeline, out=out, stages="extend,warmup", config=config_from_dict(WARMUP), seed=3, **files)
    assert not any(s.startswith("resuming warmup at step") for s in said)
    resumed = _weights(out / "final")
    assert all(torch.equal(resumed[k], reference[k]) for k in reference)


def test_an_interrupted_stage_rerun_with_other_settings_starts_afresh_on_them(files, tmp_path, monkeypatch):
    lower = {"warmup": {**WARMUP["warmup"], "lr": 5e-4}}
    reference, out = _reference_and_cut_run(files, tmp_path, monkeypatch, reference_config=lower)
    assert (out / "warmup.partial").is_dir()
    said = _said(run_pipeline, out=out, stages="extend,warmup", config=config_from_dict(lower), seed=3, **files)
    assert any("the [warmup] config changed since warmup was interrupted" in s for s in said)
    steps = [r for r in _log(out) if r.get("stage") == "warmup" and "step" in r]
    assert steps[0]["step"] == 1 and steps[0]["lr"] == pytest.approx(5e-4)  # not the saved optimiser's 1e-3
    resumed = _weights(out / "final")
    assert all(torch.equal(resumed[k], reference[k]) for k in reference)


def test_token_budget_batches_resume_bit_identically_across_epochs_of_other_lengths(files, tmp_path, monkeypatch):
    """Each epoch packs its own number of batches: the resumed schedule is the one the first
    epoch sized, not one sized from the epoch the checkpoint was in."""
    import random

    words = "budget review of spending zorblatt metrics track departments agent install quarter fiscal".split()
    r = random.Random(0)
    texts = [" ".join(r.choice(words) for _ in range(r.choice([2, 3, 12, 20, 30]))) for _ in range(16)]
    corpus = tmp_path / "varied.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": f"v{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    data = {**files, "corpus": corpus}
    cfg = {"warmup": {"epochs": 3, "batch_size": 16, "batch_tokens": 48, "bucket_window": 4, "mask_rate": 0.5,
                      "lr": 1e-3, "checkpoint_every": 1}}
    ref = run_pipeline(out=tmp_path / "ref", stages="extend,warmup", config=config_from_dict(cfg), seed=0, **data)
    per_epoch = Counter(r["epoch"] for r in _log(ref.parent) if r.get("stage") == "warmup" and "step" in r)
    later = next(e for e in (2, 3) if per_epoch[e] != per_epoch[1])  # else this test could not fail
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        _cut_at(m, sum(per_epoch[e] for e in range(1, later)) + 2)  # inside that epoch
        with pytest.raises(PowerCut):
            run_pipeline(out=out, stages="extend,warmup", config=config_from_dict(cfg), seed=0, **data)
    run_pipeline(out=out, stages="extend,warmup", config=config_from_dict(cfg), seed=0, **data)
    reference, resumed = _weights(ref), _weights(out / "final")
    assert all(torch.equal(resumed[k], reference[k]) for k in reference)


@pytest.mark.parametrize("section, message", [
    ({"warmup": {"lr": 1.0}}, "warmup.lr must be < 1, got 1.0"),
    ({"distill": {"lr": 1e14}}, "distill.lr must be < 1, got 100000000000000.0"),
    ({"warmup": {"mask_rate": 0.0, "domain_focused": False}}, "warmup.mask_rate is 0 and warmup.domain_focused is false"),
    ({"dictionary": {"max_steps": 6, "step_cap": 2}}, "dictionary.max_steps (6) is above dictionary.step_cap (2)"),
    ({"warmup": {"grad_accum": 0}}, "warmup.grad_accum must be > 0, got 0"),
    ({"warmup": {"mask_rate": 1.0}}, "warmup.mask_rate must be in [0, 1), got 1.0"),
    ({"distill": {"valid_fraction": 1.0}}, "distill.valid_fraction must be in [0, 1), got 1.0"),
    ({"warmup": {"max_length": 2}}, "warmup.max_length must be >= 3 (the special tokens take 2), got 2"),
    ({"dictionary": {"max_length": 1}}, "dictionary.max_length must be >= 3"),
    # 1 - lr x weight_decay: 1 - 2e-4 x 1e34 = -2e30, every weight flipped and blown up in one step
    ({"warmup": {"weight_decay": 1e34}}, "warmup.weight_decay 1e+34 x warmup.lr 0.0002 must be < 1"),
    ({"distill": {"lr": 0.5, "weight_decay": 2.0}}, "distill.weight_decay 2 x distill.lr 0.5 must be < 1"),
    ({"distill": {"epochs": -1}}, "distill.epochs must be >= 0, got -1"),
    ({"warmup": {"epochs": -1}}, "warmup.epochs must be >= 0, got -1"),
    ({"distill": {"max_steps": -1}}, "distill.max_steps must be >= 0, got -1"),
    ({"warmup": {"bucket_window": 0}}, "warmup.bucket_window must be > 0, got 0"),
    ({"distill": {"log_every": 0}}, "distill.log_every must be > 0, got 0"),
    ({"warmup": {"checkpoint_every": -1}}, "warmup.checkpoint_every must be >= 0, got -1"),
    ({"dictionary": {"batch_size": 0}}, "dictionary.batch_size must be > 0, got 0"),
    ({"distill": {"valid_fraction": -0.1}}, "distill.valid_fraction must be in [0, 1), got -0.1"),
    ({"distill": {"margin": -1.0}}, "distill.margin must be >= 0, got -1.0"),
    ({"distill": {"tau_min": -0.5}}, "distill.tau_min must be >= 0, got -0.5"),
    ({"warmup": {"lr": 0.0}}, "warmup.lr must be > 0, got 0.0"),  # an MLM stage that cannot move a weight
    ({"distill": {"patience": -1}}, "distill.patience must be >= 0, got -1"),
    ({"warmup": {"batch_tokens": -1}}, "warmup.batch_tokens must be >= 0, got -1"),
    ({"distill": {"step_cap": -1}}, "distill.step_cap must be >= 0, got -1"),
])
def test_settings_that_cannot_train_as_written_are_refused(section, message):
    with pytest.raises(ConfigError) as e:
        config_from_dict(section).validate()
    assert message in str(e.value)


def test_a_decay_that_never_applies_is_not_judged():
    # train_rows = "domain" trains with no weight decay at all (training/freezing.py)
    assert config_from_dict({"warmup": {"train_rows": "domain", "weight_decay": 1e34}}).warmup.weight_decay == 1e34


def test_the_dictionary_stage_may_mask_its_terms_alone():
    # It always masks the entry's term, so mask_rate 0 without domain focus still trains.
    cfg = config_from_dict({"dictionary": {"mask_rate": 0.0, "domain_focused": False}}).validate()
    assert cfg.dictionary.mask_rate == 0.0


def test_the_shortest_mlm_length_leaves_one_piece_beside_the_special_tokens():
    # 3 = [CLS] + one maskable piece + [SEP]: the smallest length that can still train.
    assert config_from_dict({"warmup": {"max_length": 3}}).validate().warmup.max_length == 3


def test_a_warmup_masking_its_domain_tokens_alone_is_taken():
    # mask_rate 0 is refused only when nothing at all would be masked.
    cfg = config_from_dict({"warmup": {"mask_rate": 0.0, "domain_focused": True}}).validate()
    assert cfg.warmup.mask_rate == 0.0


def test_a_json_config_naming_a_key_twice_is_refused_as_a_toml_one_is(tmp_path):
    from sparse_adapt.training.config_files import load_config

    path = tmp_path / "c.json"
    path.write_text('{"distill": {"lr": 1e-4}, "distill": {"epochs": 2}}')
    with pytest.raises(ConfigError, match=r"c\.json: cannot parse \(key 'distill' is given twice\)"):
        load_config(path)
    cfg = tmp_path / "c.cfg"
    cfg.write_text("[distill]\nlr = 1e-4\n")
    with pytest.raises(ConfigError, match="read as JSON: only a .toml file is read as TOML"):
        load_config(cfg)


def test_an_mlm_length_beyond_the_models_positions_is_refused_before_training(files, tmp_path):
    cfg = config_from_dict({"dictionary": {"max_length": 512}, "warmup": {"epochs": 1}})
    with pytest.raises(ConfigError, match="dictionary.max_length 512 is above the 128 pieces this model has position"):
        run_pipeline(out=tmp_path / "run", stages="extend,warmup,dictionary", config=cfg, seed=0, **files)
    assert not (tmp_path / "run" / "extend").exists()  # refused before the first stage, not after warmup
    written = tmp_path / "long.toml"  # from a file, the error names it as every other config error does
    written.write_text("[dictionary]\nmax_length = 512\n")
    with pytest.raises(ConfigError, match=f"^{re.escape(str(written))}: dictionary.max_length 512 is above the 128"):
        run_pipeline(out=tmp_path / "run", stages="extend,warmup,dictionary", config=written, seed=0, **files)
    # read by a command first (adapt, report, benchmark, tune): the TrainConfig comes with its file's name
    with pytest.raises(ConfigError, match=f"^{re.escape(str(written))}: dictionary.max_length 512 is above the 128"):
        run_pipeline(out=tmp_path / "run", stages="extend,warmup,dictionary", config=cfg, seed=0,
                     config_source=written, **files)


def test_a_valid_file_and_a_valid_fraction_are_not_both_taken(files, tmp_path):
    cfg = config_from_dict({"distill": {"valid_fraction": 0.5}})
    with pytest.raises(ConfigError, match="both choose the validation queries: give one"):
        run_pipeline(out=tmp_path / "run", stages="distill", config=cfg, seed=0, valid=files["train"], **files)
    run_pipeline(out=tmp_path / "ok", stages="warmup", config=config_from_dict({"warmup": {"epochs": 1},
                 "distill": {"valid_fraction": 0.5}}), seed=0, valid=files["train"], **files)  # no distill: no choice


def test_a_base_spelled_another_way_is_the_same_run_and_another_base_is_not(files, tmp_path):
    import shutil

    from sparse_adapt.training.pipeline import RunMismatchError

    base = files["base"]
    run_pipeline(out=tmp_path / "run", stages="extend", config=config_from_dict({}), seed=0, **files)
    respelled = {**files, "base": f"{base}/../{base.rsplit('/', 1)[1]}"}
    said = _said(run_pipeline, out=tmp_path / "run", stages="extend", config=config_from_dict({}), seed=0, **respelled)
    assert any("already complete" in s for s in said)
    assert f"{tmp_path / 'run'}: completed stages are reused" in said  # nothing changed, nothing to name
    copy = tmp_path / "copy"
    shutil.copytree(base, copy)
    with pytest.raises(RunMismatchError, match=r"\(this command changes its base\)"):
        run_pipeline(out=tmp_path / "run", stages="extend", config=config_from_dict({}), seed=0,
                     **{**files, "base": str(copy)})


def test_a_partial_checkpoint_left_beside_its_completed_stage_is_removed_by_the_rerun(files, tmp_path):
    """Killed between saving a stage and removing its partial: a model and its optimiser state
    would otherwise stay in OUT for good."""
    import shutil

    out = tmp_path / "run"
    run_pipeline(out=out, stages="extend", config=config_from_dict({}), seed=0, **files)
    shutil.copytree(out / "extend", out / "extend.partial")
    said = _said(run_pipeline, out=out, stages="extend", config=config_from_dict({}), seed=0, **files)
    assert any("already complete" in s for s in said)
    assert not (out / "extend.partial").exists() and (out / "extend").is_dir()


def test_an_interrupted_stage_keeps_its_checkpoint_when_only_a_later_stage_changed(files, tmp_path, monkeypatch):
    """No stage completed yet (no extend first): a change to distill alone leaves warmup's resumable."""
    both = {**WARMUP, "distill": {"epochs": 1, "batch_size": 2, "lr": 1e-4}}
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        _cut_at(m, 4)
        with pytest.raises(PowerCut):
            run_pipeline(out=out, stages="warmup,distill", config=config_from_dict(both), seed=3, **files)
    later = {**both, "distill": {**both["distill"], "lr": 2e-4}}
    said = _said(run_pipeline, out=out, stages="warmup,distill", config=config_from_dict(later), seed=3, **files)
    assert any(s.startswith("resuming warmup at step 3") for s in said), said
    assert not any("partial checkpoint is discarded" in s for s in said)
    other_seed = tmp_path / "run2"
    with monkeypatch.context() as m:
        _cut_at(m, 4)
        with pytest.raises(PowerCut):
            run_pipeline(out=other_seed, stages="warmup,distill", config=config_from_dict(both), seed=3, **files)
    said = _said(run_pipeline, out=other_seed, stages="warmup,distill", config=config_from_dict(both), seed=4, **files)
    assert any("the run's seed changed since warmup was interrupted" in s for s in said), said


def test_a_stage_interrupted_on_another_number_of_processes_starts_afresh(files, tmp_path, monkeypatch):
    """Its schedule and data position were sized for that many processes: resumed 2 -> 1, a
    run took 31 of its 20 steps, the last at lr 0."""
    reference, out = _reference_and_cut_run(files, tmp_path, monkeypatch)
    state_path = out / "warmup.partial" / "trainer_state.pt"
    state = torch.load(state_path, weights_only=True)
    assert state["world"] == 1
    state["world"] = 2  # as a run of two processes saves it
    torch.save(state, state_path)
    said = _said(run_pipeline, out=out, stages="extend,warmup", config=config_from_dict(WARMUP), seed=3, **files)
    assert any("warmup was interrupted on 2 processes and this run has 1; its partial checkpoint is discarded" in s
               for s in said)
    assert not any(s.startswith("resuming warmup at step") for s in said)
    resumed = _weights(out / "final")
    assert all(torch.equal(resumed[k], reference[k]) for k in reference)


def test_a_partial_checkpoint_saved_before_the_process_count_was_recorded_is_resumed(files, tmp_path, monkeypatch):
    # Versions before `world` ran one process only: a missing count is 1, not another number.
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        _cut_at(m, 4)
        with pytest.raises(PowerCut):
            run_pipeline(out=out, stages="extend,warmup", config=config_from_dict(WARMUP), seed=3, **files)
    state_path = out / "warmup.partial" / "trainer_state.pt"
    state = torch.load(state_path, weights_only=True)
    del state["world"]
    torch.save(state, state_path)
    said = _said(run_pipeline, out=out, stages="extend,warmup", config=config_from_dict(WARMUP), seed=3, **files)
    assert any(s.startswith("resuming warmup at step 3") for s in said), said
    assert not any("partial checkpoint is discarded" in s for s in said)


def test_a_model_whose_finite_weights_give_non_finite_outputs_is_not_saved(files, tmp_path, monkeypatch):
    """A step that leaves every weight finite but ~1e30 (a decay far too large) gave a saved
    model whose every vector was NaN; the last guard runs the model once."""
    from sparse_adapt.training.stages import STAGES

    real = STAGES["warmup"].run  # STAGES holds the classes

    def blown_up(self, splade, ctx):
        real(self, splade, ctx)
        with torch.no_grad():
            for p in splade.mlm.parameters():
                p.mul_(-2e30)
        assert all(bool(torch.isfinite(p).all()) for p in splade.mlm.parameters())  # else the weight check would catch it

    monkeypatch.setattr(STAGES["warmup"], "run", blown_up)
    out = tmp_path / "run"
    with pytest.raises(NonFiniteError, match="warmup: the model's outputs are not finite .* not saved"):
        run_pipeline(out=out, stages="extend,warmup", config=config_from_dict(WARMUP), seed=3, **files)
    assert not (out / "warmup").exists() and not (out / "final").exists()


def test_the_output_probe_leaves_every_modules_mode_as_it_was(tiny_bert):
    """model.train(True) afterwards would switch on dropout in a part kept in eval mode on purpose."""
    from sparse_adapt.training.loop import require_finite

    mlm = tiny_bert.mlm
    mlm.train()
    frozen = mlm.get_input_embeddings()
    frozen.eval()
    modes = {name: m.training for name, m in mlm.named_modules()}
    state = torch.random.get_rng_state()
    require_finite(mlm, "warmup")
    assert {name: m.training for name, m in mlm.named_modules()} == modes and not frozen.training
    assert torch.equal(torch.random.get_rng_state(), state)  # no random draw moved a seeded run


def test_max_steps_may_equal_the_step_cap_that_bounds_it():
    cfg = config_from_dict({"warmup": {"max_steps": 4, "step_cap": 4}, "distill": {"max_steps": 4, "step_cap": 4}})
    assert cfg.validate().warmup.max_steps == cfg.distill.step_cap == 4


def test_every_stage_saves_a_mid_stage_checkpoint_by_default():
    """A crash costs at most checkpoint_every steps in each stage, distillation too, without a
    --config saying so."""
    from sparse_adapt.training.config import TrainConfig

    cfg = TrainConfig()
    assert [getattr(cfg, s).checkpoint_every for s in ("warmup", "dictionary", "distill")] == [200, 200, 200]


def test_a_non_finite_weight_the_output_probe_cannot_see_is_still_refused(tiny_bert):
    """The probe runs 16 positions: a NaN in a later row of the position embeddings leaves its
    logits finite, so only the weight check keeps the model from being saved."""
    from sparse_adapt.training.loop import _outputs_finite, require_finite

    mlm = tiny_bert.mlm
    with torch.no_grad():
        mlm.bert.embeddings.position_embeddings.weight[100, 0] = math.nan
    assert _outputs_finite(mlm)
    with pytest.raises(NonFiniteError, match="warmup: 1 weight tensors are not finite .*position_embeddings.*not saved"):
        require_finite(mlm, "warmup")


def test_an_infinite_setting_of_a_config_built_in_python_is_refused():
    """report, tune and benchmark pass a TrainConfig built in Python, past the file reader's check."""
    from dataclasses import replace

    from sparse_adapt.training.config import TrainConfig

    cfg = TrainConfig()
    for section, key in (("distill", "kd"), ("distill", "temperature"), ("warmup", "max_grad_norm")):
        bad = replace(cfg, **{section: replace(getattr(cfg, section), **{key: math.inf})})
        with pytest.raises(ConfigError, match=rf"{section}\.{key} must be > ?=? ?0, got inf"):
            bad.validate()


@pytest.mark.parametrize("section, message", [
    ({"warmup": {"epochs": True}}, "warmup.epochs: expected int, got True"),
    ({"distill": {"kd": math.inf}}, "distill.kd: expected a finite number, got inf"),
    ({"warmup": {"domain_focused": 1}}, "warmup.domain_focused: expected bool, got 1"),  # JSON 1 is no true
    ({"dictionary": {"template": 5}}, "dictionary.template: expected str, got 5"),
])
def test_a_config_value_of_the_wrong_kind_is_named_as_such(section, message):
    with pytest.raises(ConfigError) as e:
        config_from_dict(section, "cfg.json")
    assert f"cfg.json: {message}" in str(e.value)


def test_finite_weights_that_overflow_a_single_vocabulary_column_are_refused(tiny_bert):
    """One token's logit overflowing is enough: the saved model would score that token inf."""
    from sparse_adapt.training.loop import require_finite

    mlm = tiny_bert.mlm
    decoder = mlm.get_output_embeddings()
    with torch.no_grad():  # id 20 is outside the probe's pieces, so its (tied) embedding is never read
        decoder.weight[20] = 0.0
        decoder.weight[20, 0] = 1e36  # the bias at float32's largest: a positive h[0] overflows it
        decoder.bias[20] = torch.finfo(torch.float32).max
    ids = torch.tensor([[*range(1, 9)]])
    with torch.no_grad():
        logits = mlm.eval()(input_ids=ids).logits
    assert not torch.isfinite(logits).all() and torch.isfinite(logits[..., :20]).all()  # that column alone
    with pytest.raises(NonFiniteError, match="warmup: the model's outputs are not finite"):
        require_finite(mlm, "warmup")


def test_the_files_the_training_modules_name_in_their_text_are_the_ones_the_code_uses():
    """A file or folder that a training module's docstrings and comments name in ``code`` is one
    the run writes under that name, a bundled input's name, or a source file that exists: a
    renamed constant or module leaves prose that names the old one."""
    from pathlib import Path

    from sparse_adapt.defaults import BUNDLED
    from sparse_adapt.training import checkpoint, rundir
    from sparse_adapt.training.stages import ORDER

    root = Path(rundir.__file__).parents[2]
    holders = {"OUT", "DIR", "NAME", "<stage>", *ORDER}  # the run's folder, adapt's folder, a stage
    written = {rundir.RUN_FILE, rundir.LOG_FILE, rundir.FINAL, rundir.FINAL_RECORD, checkpoint.TRAINER_STATE,
               checkpoint.MODEL, *holders, *(f"{h}{rundir.PARTIAL}" for h in holders)}
    inputs = {p.name for p in BUNDLED._asdict().values() if isinstance(p, Path)}
    sources = {p.name for p in (root / "sparse_adapt").rglob("*.py")}
    modules = ("loop", "stages", "pipeline", "rundir", "checkpoint", "density", "reference", "freezing",
               "interpolation", "general", "mlm_data", "definitions")
    checked = []
    for module in modules:
        text = (root / "sparse_adapt" / "training" / f"{module}.py").read_text(encoding="utf-8")
        for span in re.findall(r"``([^`\s]+)``", text):
            if span.startswith("./"):  # a user's spelling of a path, not a file of ours
                continue
            if "/" in span and span.endswith((".py", ".md")):
                assert (root / span).is_file(), f"{module}.py names {span}, which does not exist"
            elif span.endswith(".py"):
                assert span in sources, f"{module}.py names {span}, no module of sparse_adapt"
            elif "/" in span or span.endswith((".json", ".jsonl", ".pt")):
                unknown = [p for p in span.split("/") if p and p not in written | inputs]
                assert not unknown, f"{module}.py names {span}: {unknown} is no name the run writes or reads"
            else:
                continue
            checked.append(span)
    assert len(checked) > 30  # the pattern still finds the names (about 40 today)
