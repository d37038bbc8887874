"""WiSE-FT interpolation (sparse_adapt/training/interpolation.py) on tiny random models, and
the pipeline's `distill.interpolate`: the saved final is the stated blend of `extend` and `distill`."""

from __future__ import annotations

import json

import pytest
import torch

from sparse_adapt.modeling.vocabulary import extend_vocabulary
from sparse_adapt.training.config import ConfigError
from sparse_adapt.training.config_files import config_from_dict
from sparse_adapt.training.interpolation import InterpolationError, interpolate
from sparse_adapt.training.pipeline import RunMismatchError
from tests.conftest import make_tiny_bert
from tests.training.test_stages import SMALL, Messages, _params, _run, inputs, tiny_dir  # noqa: F401  (fixtures)


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.mlm.state_dict().items()}


@pytest.mark.parametrize("alpha", [0.0, 0.25, 1.0])
def test_interpolation_is_the_weighted_average_of_every_float_tensor(alpha):
    trained, anchor = make_tiny_bert(seed=0), make_tiny_bert(seed=1)
    a, b = _weights(trained), _weights(anchor)
    interpolate(trained, anchor, alpha)
    got = _weights(trained)
    bias = "cls.predictions.decoder.bias"
    excluded = trained.excluded_ids()
    for key, value in got.items():
        if not value.is_floating_point():
            assert torch.equal(value, a[key]), key
            continue
        expected = (1 - alpha) * a[key] + alpha * b[key]
        if key.endswith("predictions.bias") or key == bias:
            keep = torch.ones(len(expected), dtype=torch.bool)
            keep[excluded] = False
            expected, value = expected[keep], value[keep]
        torch.testing.assert_close(value, expected, rtol=0, atol=1e-6, msg=key)
    assert not torch.equal(got["bert.embeddings.word_embeddings.weight"], a["bert.embeddings.word_embeddings.weight"]) or alpha == 0


def test_special_tokens_stay_excluded_after_interpolation():
    trained, anchor = make_tiny_bert(seed=0), make_tiny_bert(seed=1)
    with torch.no_grad():  # an anchor whose special rows are not excluded: the blend alone gives -5000
        anchor.mlm.get_output_embeddings().bias[anchor.excluded_ids()] = 0.0
    interpolate(trained, anchor, 0.5)
    bias = trained.mlm.get_output_embeddings().bias
    assert bool((bias[trained.excluded_ids()] == -1.0e4).all())


def test_models_with_different_vocabularies_are_refused():
    trained, anchor = make_tiny_bert(seed=0), make_tiny_bert(seed=1)
    extend_vocabulary(trained, {"jargon": ["zorblatt"]})
    with pytest.raises(InterpolationError, match="different vocabularies"):
        interpolate(trained, anchor, 0.5)


def test_models_with_different_parameters_are_refused_and_left_as_they_were():
    # Same tokenizer, so the vocabulary check passes: a BERT and a DistilBERT hold different
    # tensors, a 16-wide BERT the same names in other shapes. Refused in one line, not a KeyError
    # or torch's shape error, and before any weight of the trained model changed.
    from tests.conftest import make_tiny_distilbert

    trained = make_tiny_bert(seed=0)
    before = _weights(trained)
    with pytest.raises(InterpolationError, match=r"the models hold different parameters \(e\.g\. "):
        interpolate(trained, make_tiny_distilbert(seed=1), 0.5)
    with pytest.raises(InterpolationError, match=r"bert\.embeddings\.word_embeddings\.weight: shape \(30522, 32\) "
                                                 r"vs the anchor's \(30522, 16\)"):
        interpolate(trained, make_tiny_bert(seed=1, hidden=16), 0.5)
    assert all(torch.equal(value, before[key]) for key, value in _weights(trained).items())


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan")])
def test_alpha_outside_zero_one_is_refused(alpha):
    with pytest.raises(InterpolationError):
        interpolate(make_tiny_bert(seed=0), make_tiny_bert(seed=1), alpha)
    with pytest.raises(ConfigError, match="distill.interpolate"):
        config_from_dict({"distill": {"interpolate": alpha}})


def _log(out) -> list[dict]:
    return [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]


def test_the_pipeline_saves_the_blend_of_extend_and_distill_and_keeps_distill(tiny_dir, inputs, tmp_path):
    config = {**SMALL, "distill": {**SMALL["distill"], "interpolate": 0.25}}
    out = tmp_path / "run"
    buf = Messages()
    _run(tiny_dir, inputs, out, config=config, messages=buf)
    [event] = [r for r in _log(out) if r.get("event") == "final"]
    assert event["interpolate"] == 0.25 and event["anchor"] == str(out / "extend")
    assert set(event["doc_terms"]) == {"distilled", "final"} and event["doc_terms"]["final"] > 0
    assert f"documents activate {event['doc_terms']['final']:.0f} terms on average" in buf.text()
    assert "--max-active-dims" in buf.text()
    start, trained, final = _params(out / "extend"), _params(out / "distill"), _params(out / "final")
    moved = [k for k in final if final[k].is_floating_point() and not torch.equal(start[k], trained[k])]
    assert moved, "distill changed nothing: the test could not tell the blend from either end"
    for key in moved:
        expected = 0.75 * trained[key] + 0.25 * start[key]
        if key.endswith("bias"):
            expected[expected < -1.0e3] = -1.0e4  # excluded ids stay excluded
        torch.testing.assert_close(final[key], expected, rtol=0, atol=1e-5, msg=key)
    # Without the setting, final is the distilled model itself.
    plain = tmp_path / "plain"
    _run(tiny_dir, inputs, plain)
    a, b = _params(plain / "distill"), _params(plain / "final")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_interpolation_without_extend_blends_with_the_base(tiny_dir, inputs, tmp_path):
    config = {**SMALL, "distill": {**SMALL["distill"], "interpolate": 1.0}}
    out = tmp_path / "h1"
    _run(tiny_dir, inputs, out, stages="distill", config=config)
    base, trained, final = _params(tiny_dir), _params(out / "distill"), _params(out / "final")
    assert any(not torch.equal(base[k], trained[k]) for k in base)
    for key in base:
        if base[key].is_floating_point() and not key.endswith("bias"):
            torch.testing.assert_close(final[key], base[key], rtol=0, atol=1e-6, msg=key)


def test_a_rerun_with_another_alpha_rewrites_final_without_retraining(tiny_dir, inputs, tmp_path):
    out = tmp_path / "run"
    _run(tiny_dir, inputs, out)
    log = (out / "train_log.jsonl").read_text()
    stamps = {n: (out / n / "model.safetensors").stat().st_mtime_ns for n in ("extend", "warmup", "dictionary", "distill")}
    said = Messages()
    _run(tiny_dir, inputs, out, config={**SMALL, "distill": {**SMALL["distill"], "interpolate": 1.0}}, messages=said)
    assert f"{out}: distill.interpolate changed; final is made again from the completed stages" in said.text()
    assert "stages still to run" not in said.text()
    # The earlier records stay; one "final" record says what the rewritten final is.
    before, after = log.splitlines(), (out / "train_log.jsonl").read_text().splitlines()
    assert after[: len(before)] == before and len(after) == len(before) + 1
    assert [r.get("event") for r in _log(out)].count("final") == 2
    last = json.loads(after[-1])
    assert (last["event"], last["interpolate"], last["anchor"]) == ("final", 1.0, str(out / "extend"))
    # And back to the distilled model itself: logged too, so the last record never goes stale.
    _run(tiny_dir, inputs, out)
    last = _log(out)[-1]
    assert (last["event"], last["interpolate"], last["anchor"]) == ("final", 0.0, None) and "doc_terms" not in last
    a, b = _params(out / "distill"), _params(out / "final")
    assert all(torch.equal(a[k], b[k]) for k in a)
    _run(tiny_dir, inputs, out, config={**SMALL, "distill": {**SMALL["distill"], "interpolate": 1.0}})
    assert {n: (out / n / "model.safetensors").stat().st_mtime_ns for n in stamps} == stamps
    start, final = _params(out / "extend"), _params(out / "final")
    assert all(torch.equal(start[k], final[k]) for k in start if not k.endswith("bias"))
    # Any other distill setting still changes what OUT/distill would be: refused as before.
    with pytest.raises(RunMismatchError, match=r"config \[distill\]"):
        _run(tiny_dir, inputs, out, config={**SMALL, "distill": {**SMALL["distill"], "lr": 5e-4}})


def test_a_commands_defaults_sit_under_the_bases_recommendation_and_the_users_file(tmp_path):
    from sparse_adapt.modeling.builtin import RECOMMENDED_FILE
    from sparse_adapt.training.config_files import load_config

    base = tmp_path / "base"
    base.mkdir()
    (base / RECOMMENDED_FILE).write_text(json.dumps({"distill": {"interpolate": 0.25}}))
    defaults = {"distill": {"interpolate": 0.5, "pres": 1.0}}
    cfg = load_config(None, base, defaults)
    assert (cfg.distill.interpolate, cfg.distill.pres) == (0.25, 1.0)
    mine = tmp_path / "mine.toml"
    mine.write_text("[distill]\ninterpolate = 0.1\n")
    cfg = load_config(mine, base, defaults)
    assert (cfg.distill.interpolate, cfg.distill.pres) == (0.1, 1.0)
    assert load_config(None, None, defaults).distill.interpolate == 0.5
    assert defaults == {"distill": {"interpolate": 0.5, "pres": 1.0}}  # not mutated by the merge
    assert load_config(None).distill.interpolate == 0.0


def test_a_rerun_that_trains_nothing_keeps_final_and_its_edited_card(tiny_dir, inputs, tmp_path):
    config = {**SMALL, "distill": {**SMALL["distill"], "interpolate": 0.5}}
    out = tmp_path / "run"
    _run(tiny_dir, inputs, out, config=config)
    card = out / "final" / "README.md"
    card.write_text("my own notes on this model\n")
    weights = (out / "final" / "model.safetensors").stat().st_mtime_ns
    said = Messages()
    _run(tiny_dir, inputs, out, config=config, messages=said)
    assert card.read_text() == "my own notes on this model\n"
    assert (out / "final" / "model.safetensors").stat().st_mtime_ns == weights
    assert "is up to date with its checkpoints; kept as it is" in said.text()
    # Another weight makes another final: rewritten, card included.
    _run(tiny_dir, inputs, out, config={**SMALL, "distill": {**SMALL["distill"], "interpolate": 1.0}})
    assert card.read_text() != "my own notes on this model\n"
    start, final = _params(out / "extend"), _params(out / "final")
    assert all(torch.equal(start[k], final[k]) for k in start if not k.endswith("bias"))
    assert json.loads((out / "final" / "made_from.json").read_text())["interpolate"] == 1.0


def test_a_stage_that_trains_again_makes_final_stale_even_when_the_attempt_is_killed(tiny_dir, inputs, tmp_path, monkeypatch):
    import shutil

    from sparse_adapt.training import pipeline

    config = {**SMALL, "distill": {**SMALL["distill"], "interpolate": 0.5}}
    out = tmp_path / "run"
    _run(tiny_dir, inputs, out, config=config)
    card = out / "final" / "README.md"
    card.write_text("edited\n")
    shutil.rmtree(out / "distill")

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "interpolate", killed)
    with pytest.raises(KeyboardInterrupt):  # distill is saved again, final is not written
        _run(tiny_dir, inputs, out, config=config)
    assert (out / "distill" / "model.safetensors").is_file() and card.read_text() == "edited\n"
    monkeypatch.undo()
    said = Messages()
    _run(tiny_dir, inputs, out, config=config, messages=said)
    assert "kept as it is" not in said.text() and card.read_text() != "edited\n"
    start, trained, final = _params(out / "extend"), _params(out / "distill"), _params(out / "final")
    moved = [k for k in final if final[k].is_floating_point() and not k.endswith("bias") and not torch.equal(start[k], trained[k])]
    assert moved
    for key in moved:
        torch.testing.assert_close(final[key], 0.5 * trained[key] + 0.5 * start[key], rtol=0, atol=1e-5, msg=key)


def test_a_run_without_distill_saves_its_last_stage_as_final_whatever_interpolate_says(tiny_dir, inputs, tmp_path):
    # distill.interpolate blends the distilled model; a run of the MLM stages has none to blend.
    out = tmp_path / "run"
    _run(tiny_dir, inputs, out, stages="extend,warmup",
         config={**SMALL, "warmup": {**SMALL["warmup"], "epochs": 1}, "distill": {**SMALL["distill"], "interpolate": 0.5}})
    a, b = _params(out / "warmup"), _params(out / "final")
    assert all(torch.equal(a[k], b[k]) for k in a)
    # and its record and log say no blend was made
    made = json.loads((out / "final" / "made_from.json").read_text())
    assert (made["interpolate"], made["anchor"]) == (0.0, None)
    final = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines() if '"final"' in line]
    assert [(r["interpolate"], r["anchor"]) for r in final if r.get("event") == "final"] == [(0.0, None)]
