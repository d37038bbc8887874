"""The staged pipeline on a tiny random model: every stage, resume, refusal, bad input."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from sparse_adapt.training import stages as stages_mod
from sparse_adapt.training.config import ConfigError, TrainConfig
from sparse_adapt.training.config_files import config_from_dict, load_config
from sparse_adapt.data import DataError
from sparse_adapt.losses import TERMS
from sparse_adapt.training.masking import IGNORE, mask_tokens, occurrences, span_occurrences
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.modeling.vocabulary import domain_token_ids as domain_ids_for
from sparse_adapt.progress import Hooks
from sparse_adapt.training.pipeline import RunMismatchError, run_pipeline
from sparse_adapt.training.stages import EXPERIMENTS, parse_stages
from tests.conftest import make_tiny_bert

DOCS = [
    {"doc_id": "d1", "text": "Zorblatt metrics track spending across departments."},
    {"doc_id": "d2", "text": "Install the agent with apt-get and check the API."},
    {"doc_id": "d3", "text": "Zorblatt review of budgets each fiscal quarter."},
]
TRAIN = [
    {"qid": "q1", "query": "monitoring company spending", "doc_ids": ["d1", "d3", "d2"],
     "doc_texts": [DOCS[0]["text"], DOCS[2]["text"], DOCS[1]["text"]], "teacher_scores": [10.0, 8.0, -8.0]},
    {"qid": "q2", "query": "install the agent", "doc_ids": ["d2", "d1"],
     "doc_texts": [DOCS[1]["text"], DOCS[0]["text"]], "teacher_scores": [10.0, -8.0]},
]
# Validation queries held out of TRAIN (their own ids and texts, the same documents).
VALID = [
    {"qid": "v1", "query": "tracking corporate spending", "doc_ids": ["d1", "d2"],
     "doc_texts": [DOCS[0]["text"], DOCS[1]["text"]], "teacher_scores": [10.0, -8.0]},
    {"qid": "v2", "query": "agent installation", "doc_ids": ["d2", "d3"],
     "doc_texts": [DOCS[1]["text"], DOCS[2]["text"]], "teacher_scores": [10.0, -8.0]},
]
DICTIONARY = [
    {"term": "Zorblatt", "definition": "the tracking of corporate spending", "examples": ["Zorblatt metrics", "a Zorblatt review"]},
    {"term": "API", "definition": "an application programming interface", "examples": ["the API docs"]},
]
TERMS_JSON = {"acronyms": ["API"], "jargon": ["Zorblatt"]}
SMALL = {
    "warmup": {"epochs": 2, "batch_size": 2, "lr": 1e-3},
    "dictionary": {"epochs": 2, "batch_size": 2, "lr": 1e-3},
    "distill": {"epochs": 2, "batch_size": 2, "lr": 1e-3, "log_every": 1, "sp_warmup_steps": 2},
}


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tiny") / "model"
    make_tiny_bert().save_pretrained(d)
    return d


@pytest.fixture
def inputs(tmp_path) -> dict:
    (tmp_path / "terms.json").write_text(json.dumps(TERMS_JSON), encoding="utf-8")
    return {
        "corpus": _jsonl(tmp_path / "docs.jsonl", DOCS),
        "terms": tmp_path / "terms.json",
        "dictionary": _jsonl(tmp_path / "dict.jsonl", DICTIONARY),
        "train": _jsonl(tmp_path / "train.jsonl", TRAIN),
    }


@pytest.fixture
def valid_file(tmp_path) -> Path:
    """VALID as a --valid file."""
    return _jsonl(tmp_path / "valid.jsonl", VALID)


class Messages(list):
    """Hooks that record the messages of a run."""

    def hooks(self) -> Hooks:
        return Hooks(message=self.append)

    def text(self) -> str:
        return "\n".join(self)


def _run(tiny_dir, inputs, out, stages=EXPERIMENTS["H4"], config=None, messages=None):
    return run_pipeline(
        base=str(tiny_dir), out=out, stages=stages, config=config_from_dict(config or SMALL), seed=3,
        hooks=messages.hooks() if messages is not None else Hooks(), **inputs,
    )


def _params(path: Path) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in SpladeEncoder.from_pretrained(path).mlm.state_dict().items()}


def test_every_stage_runs_and_saves_a_loadable_checkpoint(tiny_dir, inputs, tmp_path):
    out = tmp_path / "run"
    buf = Messages()
    final = _run(tiny_dir, inputs, out, messages=buf)
    assert final == out / "final"
    for name in ("extend", "warmup", "dictionary", "distill", "final"):
        assert (out / name / "sparse_adapt.json").is_file(), name
    model = SpladeEncoder.from_pretrained(final)
    zid = model.tokenizer.convert_tokens_to_ids("zorblatt")
    assert model.tokenizer("Zorblatt", add_special_tokens=False)["input_ids"] == [zid]
    assert zid in model.settings.domain_token_ids
    # each training stage changed the weights it was given
    for before, after in (("extend", "warmup"), ("warmup", "dictionary"), ("dictionary", "distill")):
        a, b = _params(out / before), _params(out / after)
        assert any(not torch.equal(a[k], b[k]) for k in a), f"{after} changed nothing"
    records = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    distill = [r for r in records if r.get("stage") == "distill" and "step" in r]
    assert len(distill) == 2 * 1  # 2 epochs x ceil(2 examples / batch 2)
    assert all(set(TERMS) | {"loss"} <= set(r) for r in distill)
    assert {r["stage"] for r in records if r.get("event") == "stage_end"} == {"extend", "warmup", "dictionary", "distill"}
    for stage in ("warmup", "dictionary"):  # the loss of the last epoch (2), not the first
        [end] = [r for r in records if r.get("event") == "stage_end" and r["stage"] == stage]
        last = [r["loss"] for r in records if r.get("stage") == stage and r.get("epoch") == 2 and "step" in r]
        assert end["final_epoch_loss"] == pytest.approx(sum(last) / len(last), rel=1e-6), stage
    [end] = [r for r in records if r.get("event") == "stage_end" and r["stage"] == "distill"]
    assert end["last"] == {"total": distill[-1]["loss"], **{k: distill[-1][k] for k in TERMS}}  # the card's names
    text = buf.text()
    assert "Step 1 | Loss" in text and "| QExp " in text
    assert "windows of" not in text  # every document fits one window: no split is reported


def test_interrupted_stage_resumes_and_matches_an_uninterrupted_run(tiny_dir, inputs, tmp_path, monkeypatch):
    reference = _params(_run(tiny_dir, inputs, tmp_path / "ref"))

    class Crash(Exception):
        pass

    def crash(self, splade, ctx):
        raise Crash("power cut inside the dictionary stage")

    out = tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr(stages_mod.DictionaryStage, "run", crash)
        with pytest.raises(Crash):
            _run(tiny_dir, inputs, out)
    assert (out / "warmup" / "sparse_adapt.json").is_file()
    assert not (out / "dictionary").exists() and not (out / "final").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".dictionary")], "temp dir left behind"

    buf = Messages()
    _run(tiny_dir, inputs, out, messages=buf)
    assert "resuming: extend, warmup already complete" in buf.text()
    resumed = _params(out / "final")
    for k in reference:
        torch.testing.assert_close(resumed[k], reference[k], msg=k)


def test_a_rerun_names_the_changed_settings_of_stages_still_to_run(tiny_dir, inputs, tmp_path, monkeypatch):
    out = tmp_path / "run"

    def crash(self, splade, ctx):
        raise RuntimeError("killed inside distill")

    with monkeypatch.context() as m:
        m.setattr(stages_mod.DistillStage, "run", crash)
        with pytest.raises(RuntimeError):
            _run(tiny_dir, inputs, out, stages="extend,distill")
    changed = json.loads(json.dumps(SMALL))
    changed["distill"]["lr"] = 5e-4
    buf = Messages()
    _run(tiny_dir, inputs, out, stages="extend,distill", config=changed, messages=buf)
    assert f"{out}: settings of stages still to run changed (distill.lr); completed stages are reused" in buf.text()


def test_rerun_with_other_settings_is_refused(tiny_dir, inputs, tmp_path):
    out = tmp_path / "run"
    _run(tiny_dir, inputs, out, stages="distill")
    changed = json.loads(json.dumps(SMALL))
    changed["distill"]["lr"] = 5e-4
    with pytest.raises(RunMismatchError, match=r"changes its config \[distill\]"):
        _run(tiny_dir, inputs, out, stages="distill", config=changed)
    with pytest.raises(RunMismatchError, match="changes its stages"):
        _run(tiny_dir, inputs, out, stages="extend,distill")
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(RunMismatchError, match="not empty"):
        _run(tiny_dir, inputs, foreign, stages="distill")
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_a_rerun_with_other_settings_of_a_stage_it_does_not_run_reuses_the_run(tiny_dir, inputs, tmp_path):
    # The benchmark and tune share an MLM prefix across distill settings.
    out = tmp_path / "run"
    _run(tiny_dir, inputs, out, stages="extend")
    changed = json.loads(json.dumps(SMALL))
    changed["distill"]["lr"] = 5e-4
    buf = Messages()
    _run(tiny_dir, inputs, out, stages="extend", config=changed, messages=buf)
    assert "up to date" in buf.text()


def test_a_stage_trains_alike_after_its_predecessor_in_the_same_run_or_an_earlier_one(tiny_dir, inputs, tmp_path):
    # A stage's seed follows the stage, not its place in the selection.
    together = tmp_path / "together"
    _run(tiny_dir, inputs, together, stages="extend,warmup")
    alone = _run(together / "extend", inputs, tmp_path / "alone", stages="warmup")
    a, b = _params(together / "warmup"), _params(alone)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_dictionary_entry_naming_no_domain_term_is_warned_about_by_a_run_of_the_dictionary_stage(tiny_dir, inputs,
                                                                                                       tmp_path):
    # "Zorblat" (a typo) names no term; "zorblatt clause" names Zorblatt, in another case.
    extra = [{"term": "Zorblat", "definition": "a typo", "examples": ["x"]},
             {"term": "zorblatt clause", "definition": "a clause", "examples": ["y"]}]
    _jsonl(inputs["dictionary"], [*DICTIONARY, *extra])
    warning = (f"warning: {inputs['dictionary']}: 1 of 4 entries define a term that is not in {inputs['terms']} "
               "(e.g. 'Zorblat'); no domain token learns from them")
    said = Messages()
    _run(tiny_dir, inputs, tmp_path / "run", stages="extend,dictionary", messages=said)
    assert warning in said
    said = Messages()  # a run without the dictionary stage never reads an entry: nothing to say
    _run(tiny_dir, inputs, tmp_path / "other", stages="extend", messages=said)
    assert not any("entries define" in m for m in said)


def test_teacher_score_length_mismatch_fails_before_training(tiny_dir, inputs, tmp_path):
    bad = dict(TRAIN[0], teacher_scores=[10.0, 8.0])
    inputs["train"] = _jsonl(tmp_path / "bad.jsonl", [TRAIN[1], bad])
    with pytest.raises(DataError, match=r"bad\.jsonl:2: field 'teacher_scores': has 2 entries but doc_ids has 3"):
        _run(tiny_dir, inputs, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_terms_file_without_terms_fails(tiny_dir, inputs, tmp_path):
    inputs["terms"].write_text(json.dumps({"acronyms": [], "jargon": []}))
    with pytest.raises(DataError, match="no terms"):
        _run(tiny_dir, inputs, tmp_path / "run")


@pytest.mark.parametrize(
    "value, message",
    [("extend,pretrain", "unknown stage 'pretrain'; valid stages: extend, warmup, dictionary, distill"),
     ("distill,extend", "must follow the pipeline order"), ("", "empty"), ("warmup,warmup", "twice")],
)
def test_bad_stage_selections(value, message):
    with pytest.raises(ConfigError, match=message):
        parse_stages(value)


def test_a_stage_selection_may_space_its_names_and_commas():
    assert parse_stages(" extend , warmup,distill ") == ["extend", "warmup", "distill"]
    assert parse_stages([" extend", "distill "]) == ["extend", "distill"]


def test_experiments_are_stage_selections():
    assert {k: parse_stages(",".join(v)) for k, v in EXPERIMENTS.items()} == {
        "H1": ["distill"], "H2": ["extend", "distill"], "H3": ["extend", "warmup", "distill"],
        "H4": ["extend", "warmup", "dictionary", "distill"],
    }


@pytest.mark.parametrize("extra, message", [
    (" {term:{term}<5}", r"may hold only \{term\}, \{definition\} and \{examples\}, got \{term:\{term\}<5\}"),
    (" {term!r}", r"got \{term!r\}"),
    (" {term!r:>5}", r"got \{term!r:>5\}$"),  # shown as written: the conversion before the spec
    (" {foo}", r"got \{foo\}"),  # a field no entry has: a KeyError on the first entry, after warmup
    (" {0}", r"got \{0\}"),
    (" {", "is not a valid template"),
    (" \ud800", "contains an unpaired surrogate"),
])
def test_a_dictionary_template_that_would_fail_on_a_real_term_is_refused_up_front(extra, message):
    """Checked by formatting one-letter samples, "{term:{term}<5}" passed and then failed on a real
    term in the dictionary stage, after warmup had trained."""
    with pytest.raises(ConfigError, match=message):
        config_from_dict({"dictionary": {"template": TrainConfig().dictionary.template + extra}})


@pytest.mark.parametrize("escaped", [False, True], ids=["left out", "escaped"])
@pytest.mark.parametrize("field", ["term", "definition", "examples"])
def test_a_dictionary_template_without_one_of_its_fields_is_refused(field, escaped):
    # Each entry field left out of the text is one the dictionary stage silently never trains on;
    # escaped as "{{term}}", it renders the literal text "{term}", no term either.
    import re

    template = TrainConfig().dictionary.template.replace("{" + field + "}", "{{" + field + "}}" if escaped else "it")
    with pytest.raises(ConfigError, match=re.escape(f"dictionary.template must contain {{{field}}}")):
        config_from_dict({"dictionary": {"template": template}})


def test_a_reworded_dictionary_template_with_text_after_its_last_field_is_taken():
    # The text after the last field is no field: a config may end its wording there.
    template = "Term: {term}. Meaning: {definition}. Seen in: {examples}. (glossary)"
    assert config_from_dict({"dictionary": {"template": template}}).dictionary.template == template


def test_an_entry_renders_through_the_spec_pattern_with_its_examples_joined_by_semicolons():
    # "TERM is defined as DEFINITION. TERM is used in contexts such as EXAMPLES.", the examples
    # joined by "; ": a comma would run into examples that hold commas themselves
    from sparse_adapt.data import DictionaryEntry
    from sparse_adapt.training.template import render_entry

    entry = DictionaryEntry("Zorblatt", "a coolant pump", ("the Zorblatt seal, replaced", "a Zorblatt XR-7200 install"))
    assert render_entry(entry, TrainConfig().dictionary.template) == (
        "Zorblatt is defined as a coolant pump. Zorblatt is used in contexts such as "
        "the Zorblatt seal, replaced; a Zorblatt XR-7200 install.")


def test_an_integer_setting_is_bounded():
    with pytest.raises(ConfigError, match="distill.max_steps: expected at most 2,147,483,647"):
        config_from_dict({"distill": {"max_steps": 10**400}})


def test_an_integer_setting_is_bounded_at_the_largest_32_bit_integer():
    assert config_from_dict({"distill": {"max_steps": 2**31 - 1}}).distill.max_steps == 2**31 - 1
    for value in (2**31, -(2**31)):  # one past it, either sign
        with pytest.raises(ConfigError, match=f"distill.max_steps: expected at most 2,147,483,647, got {value}"):
            config_from_dict({"distill": {"max_steps": value}})


def test_config_files_json_and_toml(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('[distill]\nepochs = 3\ntau_min = 1.5\n[warmup]\ndomain_focused = false\n')
    cfg = load_config(toml)
    assert (cfg.distill.epochs, cfg.distill.tau_min, cfg.warmup.domain_focused) == (3, 1.5, False)
    assert cfg.dictionary == TrainConfig().dictionary
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps({"distill": {"temprature": 2.0}}))
    with pytest.raises(ConfigError, match=r"c\.json: unknown key distill\.temprature"):
        load_config(bad)
    bad.write_text(json.dumps({"distill": {"epochs": "ten"}}))
    with pytest.raises(ConfigError, match=r"c\.json: distill\.epochs: expected int"):
        load_config(bad)
    bad.write_text(json.dumps({"warmup": {"mask_rate": 1.5}}))
    with pytest.raises(ConfigError, match=r"c\.json: warmup\.mask_rate must be in \[0, 1\)"):
        load_config(bad)
    bad.write_text(json.dumps({"finetune": {}}))
    with pytest.raises(ConfigError, match="unknown section 'finetune'"):
        load_config(bad)


def test_a_builtin_base_brings_its_recommended_settings_and_a_config_key_overrides_them(tmp_path):
    from sparse_adapt.training.config_files import recommended_in_effect

    default = TrainConfig().validate()
    assert load_config(None, "offline-splade-tiny").distill.pres_form == "all-texts"
    assert default.distill.pres_form == "vectors"
    # no recommendation: the defaults as they are
    assert load_config(None, "offline-minilm") == default
    assert load_config(None, str(tmp_path)) == default  # a directory is not the built-in name
    assert load_config(None) == default
    # a file merges over the recommendation key by key ...
    other = tmp_path / "other.toml"
    other.write_text("[distill]\nepochs = 3\n")
    cfg = load_config(other, "offline-splade-tiny")
    assert (cfg.distill.epochs, cfg.distill.pres_form) == (3, "all-texts")
    assert recommended_in_effect(cfg, "offline-splade-tiny") == "distill.pres_form = 'all-texts'"
    # ... and a key it sets wins
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"distill": {"pres_form": "vectors"}}))
    assert load_config(mine, "offline-splade-tiny").distill.pres_form == "vectors"
    assert recommended_in_effect(load_config(mine, "offline-splade-tiny"), "offline-splade-tiny") == ""
    # the report and the benchmark read their base's recommendation too; a TrainConfig is taken as given
    from sparse_adapt.report.benchmark import BenchmarkInputs
    from sparse_adapt.report.inputs import ReportInputs

    for inputs in (ReportInputs(out=tmp_path, base="offline-splade-tiny"), BenchmarkInputs(out=tmp_path, base="offline-splade-tiny")):
        assert inputs.train_config().distill.pres_form == "all-texts"
        assert replace(inputs, config=default).train_config().distill.pres_form == "vectors"
    report = ReportInputs(out=tmp_path, base="offline-splade-tiny", config={"distill": {"epochs": 3}})
    assert (report.train_config().distill.epochs, report.train_config().distill.pres_form) == (3, "all-texts")
    # a bad file is still named, with or without a recommendation underneath
    mine.write_text(json.dumps({"distill": 3}))
    with pytest.raises(ConfigError, match=r"mine\.json: section 'distill' must be a table"):
        load_config(mine, "offline-splade-tiny")


def test_the_pipeline_trains_with_a_builtin_bases_recommended_settings(tiny_dir, inputs, tmp_path, monkeypatch):
    from sparse_adapt.modeling import builtin

    fake = builtin.BuiltinBase(
        "fake-splade", "fake==1", lambda: str(tiny_dir), lambda: builtin._load_masked_lm(str(tiny_dir)),
        "a tiny random model", recommended={"distill": {"pres_form": "all-texts", "margin": 3.0}},
    )
    monkeypatch.setitem(builtin.BUILTIN_BASES, "fake-splade", fake)
    config = _jsonl(tmp_path / "small.json", [])
    config.write_text(json.dumps({**SMALL, "distill": {**SMALL["distill"], "margin": 4.0}}), encoding="utf-8")
    buf = Messages()
    out = tmp_path / "run"
    run_pipeline(base="fake-splade", out=out, stages="distill", config=config, seed=3, hooks=buf.hooks(), **inputs)
    settings = json.loads((out / "run.json").read_text())["config"]["distill"]
    assert (settings["pres_form"], settings["margin"], settings["epochs"]) == ("all-texts", 4.0, 2)
    assert "settings recommended for fake-splade: distill.pres_form = 'all-texts'" in buf.text()
    assert "margin" not in buf.text()  # the file's 4.0 won, so the recommendation is not in effect
    quiet = Messages()  # a run without the distill stage has nothing to recommend
    run_pipeline(base="fake-splade", out=tmp_path / "mlm", stages="extend", config=config, seed=3, hooks=quiet.hooks(), **inputs)
    assert "recommended" not in quiet.text()


def test_the_pipeline_takes_a_config_file_s_overrides_as_a_dict(tiny_dir, inputs, tmp_path, monkeypatch):
    """`config={"distill": {...}}` (the shape config.py's docstring shows) was a TypeError from
    deep in path handling; it is read like the file, over the base's recommended settings."""
    from sparse_adapt.modeling import builtin

    fake = builtin.BuiltinBase(
        "fake-splade", "fake==1", lambda: str(tiny_dir), lambda: builtin._load_masked_lm(str(tiny_dir)),
        "a tiny random model", recommended={"distill": {"pres_form": "all-texts", "margin": 3.0}},
    )
    monkeypatch.setitem(builtin.BUILTIN_BASES, "fake-splade", fake)
    overrides = {**SMALL, "distill": {**SMALL["distill"], "margin": 4.0}}
    out = tmp_path / "run"
    run_pipeline(base="fake-splade", out=out, stages="distill", config=overrides, seed=3, hooks=Hooks(), **inputs)
    settings = json.loads((out / "run.json").read_text())["config"]["distill"]
    assert (settings["pres_form"], settings["margin"], settings["epochs"]) == ("all-texts", 4.0, 2)
    with pytest.raises(ConfigError, match=r"^config: .*distill\.epoch\b"):
        run_pipeline(base="fake-splade", out=tmp_path / "typo", stages="distill", config={"distill": {"epoch": 3}},
                     **inputs)
    assert not (tmp_path / "typo").exists()


def test_domain_focused_masking_always_masks_domain_tokens():
    ids = torch.tensor([[101, 7, 9, 7, 5, 102]])
    maskable = torch.tensor([[False, True, True, True, True, False]])
    always = occurrences(ids, [7])
    inputs, labels = mask_tokens(ids, maskable, rate=0.0, mask_token_id=103, vocab_size=50,
                                 generator=torch.Generator().manual_seed(0), always=always)
    assert inputs.tolist() == [[101, 103, 9, 103, 5, 102]]
    assert labels.tolist() == [[IGNORE, 7, IGNORE, 7, IGNORE, IGNORE]]
    # without forcing, rate 0 masks nothing
    inputs, labels = mask_tokens(ids, maskable, rate=0.0, mask_token_id=103, vocab_size=50,
                                 generator=torch.Generator().manual_seed(0))
    assert torch.equal(inputs, ids) and (labels == IGNORE).all()
    assert span_occurrences(torch.tensor([[1, 4, 5, 2, 4, 5]]), [4, 5]).tolist() == [[False, True, True, False, True, True]]


def test_random_masking_rate_and_never_special_tokens():
    ids = torch.randint(1000, 2000, (64, 100))
    maskable = torch.ones_like(ids, dtype=torch.bool)
    maskable[:, 0] = False
    _, labels = mask_tokens(ids, maskable, rate=0.15, mask_token_id=103, vocab_size=3000,
                            generator=torch.Generator().manual_seed(1))
    picked = labels != IGNORE
    assert not picked[:, 0].any()
    assert 0.13 < picked.float().mean().item() < 0.17


def test_picked_positions_split_80_10_10_and_forced_ones_always_become_mask():
    # 6,400 picks: each fraction's standard error is under 0.5 points
    ids = torch.randint(1000, 2000, (64, 100), generator=torch.Generator().manual_seed(0))
    maskable = torch.ones_like(ids, dtype=torch.bool)
    inputs, labels = mask_tokens(ids, maskable, rate=1.0, mask_token_id=103, vocab_size=3000,
                                 generator=torch.Generator().manual_seed(1))
    assert (labels == ids).all()  # every position is a target
    masked = (inputs == 103).float().mean().item()
    kept = (inputs == ids).float().mean().item()
    replaced = ((inputs != 103) & (inputs != ids)).float().mean().item()
    assert 0.77 < masked < 0.83 and 0.08 < kept < 0.12 and 0.08 < replaced < 0.12
    # a domain position (always) is [MASK] every time, never a random token or itself
    inputs, _ = mask_tokens(ids, maskable, rate=1.0, mask_token_id=103, vocab_size=3000,
                            generator=torch.Generator().manual_seed(1), always=maskable)
    assert (inputs == 103).all()


def test_no_domain_tokens_force_no_position():
    # warmup without an extended vocabulary has no domain ids: masking is the random kind alone
    ids = torch.tensor([[101, 7, 5, 102]])
    assert not occurrences(ids, []).any() and not span_occurrences(ids, []).any()


def test_the_80_10_10_split_holds_for_the_positions_a_partial_rate_picks():
    # At rate 0.5 each picked position rolls its own split; reusing the pick's draw would make
    # every pick (a draw under 0.5) a [MASK]. 3,200 picks: standard errors under 0.75 points.
    ids = torch.randint(1000, 2000, (64, 100), generator=torch.Generator().manual_seed(0))
    inputs, labels = mask_tokens(ids, torch.ones_like(ids, dtype=torch.bool), rate=0.5, mask_token_id=103,
                                 vocab_size=3000, generator=torch.Generator().manual_seed(2))
    picked = labels != IGNORE
    assert 0.47 < picked.float().mean().item() < 0.53
    assert (inputs[~picked] == ids[~picked]).all()  # unpicked positions are left as they are
    masked = (inputs[picked] == 103).float().mean().item()
    kept = (inputs[picked] == ids[picked]).float().mean().item()
    assert 0.76 < masked < 0.84 and 0.07 < kept < 0.13


def test_a_span_as_long_as_the_text_is_found_and_a_forced_special_position_stays_as_it_is():
    # a one-piece query that is the term itself: the window is the whole row
    assert span_occurrences(torch.tensor([[4, 5], [4, 6]]), [4, 5]).tolist() == [[True, True], [False, False]]
    # "always" comes from the ids alone; [CLS]/[SEP]/padding are not maskable and are never targets
    ids = torch.tensor([[101, 7, 5, 102, 0]])
    maskable = torch.tensor([[False, True, True, False, False]])
    inputs, labels = mask_tokens(ids, maskable, rate=0.0, mask_token_id=103, vocab_size=50,
                                 generator=torch.Generator().manual_seed(0), always=torch.ones_like(maskable))
    assert inputs.tolist() == [[101, 103, 103, 102, 0]]
    assert labels.tolist() == [[IGNORE, 7, 5, IGNORE, IGNORE]]


def test_a_random_replacement_draws_from_the_whole_vocabulary_domain_tokens_at_its_end_included():
    # every position picked, ids outside the 4-token vocabulary: a replaced position shows its draw
    ids = torch.full((64, 100), 500)
    inputs, _ = mask_tokens(ids, torch.ones_like(ids, dtype=torch.bool), rate=1.0, mask_token_id=103, vocab_size=4,
                            generator=torch.Generator().manual_seed(0))
    drawn = inputs[(inputs != 103) & (inputs != 500)]
    assert sorted(set(drawn.tolist())) == [0, 1, 2, 3]


def test_masking_draws_only_from_its_generator_so_a_seed_repeats_it():
    # A resumed run restores the generator and must corrupt the same positions the same way;
    # torch's global RNG, advanced between the calls, must not take part.
    ids = torch.randint(1000, 2000, (8, 50), generator=torch.Generator().manual_seed(0))
    maskable = torch.ones_like(ids, dtype=torch.bool)
    runs = [mask_tokens(ids, maskable, rate=0.5, mask_token_id=103, vocab_size=3000,
                        generator=torch.Generator().manual_seed(5)) for _ in range(2)]
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])


def test_domain_ids_without_extension_are_existing_single_tokens(tiny_bert):
    ids = domain_ids_for(tiny_bert, {"acronyms": ["API", "data"], "jargon": ["Zorblatt"]})
    tok = tiny_bert.tokenizer
    assert ids == sorted(tok.convert_tokens_to_ids(["api", "data"]))


def test_windows_cover_a_long_text_between_words_and_leave_short_texts_whole():
    from tests.conftest import _tokenizer
    from sparse_adapt.training.mlm_data import ListTexts, WindowedTexts

    tok = _tokenizer()
    long = " ".join(f"Zorblatt review {i} of departmental spending, quarterly." for i in range(40))
    giant = "zx" * 45  # one word of 90 pieces, longer than a window: cut inside it, never stuck
    texts = ["A short budget note.", long, giant]
    windows = WindowedTexts(ListTexts(texts), tok, max_length=24)
    assert windows.texts == 3 and windows.truncated == 0
    by_text = {i: [w for w in range(len(windows)) if windows.records[w] == i] for i in range(3)}
    assert [windows.text(w) for w in by_text[0]] == [texts[0]]
    for i in (1, 2):
        pieces = [tok(windows.text(w), add_special_tokens=False)["input_ids"] for w in by_text[i]]
        assert len(pieces) > 1 and all(len(p) <= 22 for p in pieces)  # 24 with [CLS] and [SEP]
        assert "".join(windows.text(w) for w in by_text[i]).replace(" ", "") == texts[i].replace(" ", "")
    # cut between words, the windows are exactly the text's pieces, in order
    pieces = [tok(windows.text(w), add_special_tokens=False)["input_ids"] for w in by_text[1]]
    assert [t for p in pieces for t in p] == tok(long, add_special_tokens=False)["input_ids"]
    assert [len(p) + 2 for p in pieces] == [int(windows.lengths[w]) for w in by_text[1]]
    # the long text's windows start at words: none begins with a continuation piece
    assert not any(tok.tokenize(windows.text(w))[0].startswith("##") for w in by_text[1])
    # consecutive spans: joined, the windows are the text itself, spaces included (a window's
    # leading space is part of its first word for byte-level and SentencePiece tokenizers)
    for i in (1, 2):
        assert "".join(windows.text(w) for w in by_text[i]) == texts[i]


def test_a_word_that_fits_a_window_is_moved_whole_to_the_next_one():
    from tests.conftest import _tokenizer
    from sparse_adapt.training.mlm_data import ListTexts, WindowedTexts

    tok = _tokenizer()
    word = "zx" * 11  # 22 pieces: a window of its own at max_length 24, not after "a" (1 + 22)
    windows = WindowedTexts(ListTexts([f"a {word}"]), tok, max_length=24)
    assert [windows.text(w) for w in range(len(windows))] == ["a", f" {word}"]
    assert windows.lengths.tolist() == [3, 24]


def test_windows_need_one_piece_of_room_besides_the_special_tokens():
    from tests.conftest import _tokenizer
    from sparse_adapt.training.mlm_data import ListTexts, WindowedTexts

    tok = _tokenizer()  # adds [CLS] and [SEP]
    with pytest.raises(ValueError, match="max_length 2 leaves no room"):
        WindowedTexts(ListTexts([]), tok, max_length=2)
    windows = WindowedTexts(ListTexts(["budget note"]), tok, max_length=3)  # one piece per window
    assert [windows.text(w) for w in range(len(windows))] == ["budget", " note"]


class _NoOffsets:
    """A tokenizer without offsets (not fast): one piece per word, [CLS] and [SEP] around."""

    is_fast = False

    def num_special_tokens_to_add(self, pair=False):
        return 2

    def __call__(self, texts, add_special_tokens=True, verbose=True):
        return {"input_ids": [list(range(len(t.split()))) for t in texts]}


def test_without_offsets_long_texts_stay_whole_and_count_as_truncated_at_the_limit():
    from sparse_adapt.training.mlm_data import ListTexts, WindowedTexts

    texts = ["a b c", "a b c d e", "a"]  # 3 pieces fit max_length 5 exactly; 5 do not
    windows = WindowedTexts(ListTexts(texts), _NoOffsets(), max_length=5)
    assert [windows.text(w) for w in range(len(windows))] == texts
    assert windows.truncated == 1
    assert windows.lengths.tolist() == [5, 5, 3]  # the truncated text's batch rows hold 5 pieces


def test_the_dictionary_lengths_are_counted_after_truncation():
    from tests.conftest import _tokenizer
    from sparse_adapt.training.mlm_data import ListTexts, token_lengths

    long = " ".join(["budget"] * 40)
    lengths = token_lengths(_tokenizer(), ListTexts([long, "A short budget note."]), max_length=8)
    assert lengths.tolist() == [8, 7]  # the token budget sees what a batch will hold


def test_a_corpus_longer_than_one_read_is_windowed_and_counted_as_if_read_at_once():
    """Texts are tokenised ``chunk`` at a time; a corpus of more than one chunk (512 documents
    by default) must give every text's windows and lengths, not the first chunk's again."""
    from tests.conftest import _tokenizer
    from sparse_adapt.training.mlm_data import ListTexts, WindowedTexts, token_lengths

    tok = _tokenizer()
    long = " ".join(f"Zorblatt review {i} of departmental spending." for i in range(6))
    texts = ["A short budget note.", long, "Check the API.", long.upper(), "Zorblatt metrics."]
    for make in (lambda: tok, _NoOffsets):
        whole, chunked = (WindowedTexts(ListTexts(texts), make(), max_length=16, chunk=c) for c in (512, 2))
        assert chunked.records.tolist() == whole.records.tolist()
        assert sorted(set(whole.records.tolist())) == [0, 1, 2, 3, 4]
        assert chunked.spans.tolist() == whole.spans.tolist() and chunked.lengths.tolist() == whole.lengths.tolist()
        assert chunked.truncated == whole.truncated
    # a short text is one window whose length is what its batch row holds, [CLS] and [SEP] included
    windows = WindowedTexts(ListTexts(texts), tok, max_length=16, chunk=2)
    for i in (0, 2, 4):
        [w] = [w for w in range(len(windows)) if windows.records[w] == i]
        assert windows.text(w) == texts[i] and windows.lengths[w] == len(tok(texts[i])["input_ids"])
    want = [len(ids) for ids in tok(texts, truncation=True, max_length=16)["input_ids"]]
    assert token_lengths(tok, ListTexts(texts), max_length=16, chunk=2).tolist() == want


def test_warmup_trains_on_a_term_that_only_a_long_documents_tail_uses(tiny_dir, inputs, tmp_path, monkeypatch):
    from sparse_adapt.training import stages

    head = " ".join(["Install the agent with apt-get and check the logs."] * 30)  # ~360 pieces
    docs = [DOCS[1], {"doc_id": "long", "text": f"{head} A Zorblatt review closes the quarter."}]
    inputs["corpus"] = _jsonl(tmp_path / "long.jsonl", docs)
    seen: list[torch.Tensor] = []
    real = stages.mlm_loss

    def recording(mlm, input_ids, attention_mask, labels):
        seen.append(labels.clone())
        return real(mlm, input_ids, attention_mask, labels)

    monkeypatch.setattr(stages, "mlm_loss", recording)
    buf = Messages()
    out = tmp_path / "run"
    _run(tiny_dir, inputs, out, stages="extend,warmup",
         config={**SMALL, "warmup": {**SMALL["warmup"], "epochs": 1}}, messages=buf)
    zorblatt = SpladeEncoder.from_pretrained(out / "warmup").tokenizer.convert_tokens_to_ids("zorblatt")
    # the long document's only "Zorblatt" sits past piece 128: truncation would never show it
    assert any((labels == zorblatt).any() for labels in seen)
    assert "warmup: 2 documents -> " in buf.text() and "windows of <= 128 pieces" in buf.text()


def test_the_dictionary_stage_masks_every_occurrence_of_the_term_on_byte_level_bpe():
    """Matched by its pieces at a text's start, a term recurring inside the entry (other
    pieces for RoBERTa) was masked only where it opened the entry."""
    from types import SimpleNamespace

    from sparse_adapt.data import DictionaryEntry
    from sparse_adapt.training.config import TrainConfig
    from tests.conftest import make_tiny_roberta

    enc = make_tiny_roberta()
    entry = DictionaryEntry("gatrocraptic", "a made-up condition", ("a gatrocraptic case", "gatrocraptic again"))
    cfg = TrainConfig()
    cfg.dictionary.domain_focused = False  # the term's own spans only
    ctx = SimpleNamespace(config=cfg, data=SimpleNamespace(dictionary=[entry], terms={"jargon": ["gatrocraptic"]}))
    stage = stages_mod.DictionaryStage()
    text = stage.texts(enc, ctx).text(0)
    assert text.lower().count("gatrocraptic") >= 3
    ids = enc.tokenizer([text], return_tensors="pt")["input_ids"]
    masked = stage.forced(enc, ctx, ids, [0])[0]
    pieces = enc.tokenizer.convert_ids_to_tokens(ids[0])
    words = "".join(p for p, m in zip(pieces, masked) if m).replace("Ġ", " ").split()
    assert words == ["gatrocraptic"] * text.lower().count("gatrocraptic"), (text, words)


def test_warmup_closes_the_corpus_file_it_reads(tiny_dir, inputs, tmp_path):
    """Left to the garbage collector ("ResourceWarning: unclosed file"), the handle outlived the
    stage for as long as anything still referred to the texts."""
    import gc
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        _run(tiny_dir, inputs, tmp_path / "run", stages="extend,warmup")
        gc.collect()
    assert (tmp_path / "run" / "warmup").is_dir()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning) and "docs.jsonl" in str(w.message)]


@pytest.mark.parametrize("warmup_focused, dictionary_focused", [(False, True), (True, False)])
def test_the_mlm_stages_mask_text_pieces_only_and_force_domain_tokens_as_each_section_says(
    tiny_dir, inputs, tmp_path, monkeypatch, warmup_focused, dictionary_focused
):
    """[CLS], [SEP] and padding are never picked. Warmup forces every domain token only with
    warmup.domain_focused; the dictionary stage always masks the entry's own term and, with
    dictionary.domain_focused, another domain term its entry names ("API" in Zorblatt's)."""
    seen = []
    real = stages_mod.mask_tokens

    def spy(ids, maskable, **kw):
        seen.append((ids.clone(), maskable.clone(), kw["always"]))
        return real(ids, maskable, **kw)

    monkeypatch.setattr(stages_mod, "mask_tokens", spy)
    entries = [{**DICTIONARY[0], "definition": "the API tracking of corporate spending"}, DICTIONARY[1]]
    inputs = {**inputs, "dictionary": _jsonl(tmp_path / "dict2.jsonl", entries)}
    cfg = {"warmup": {"epochs": 1, "batch_size": 3, "max_steps": 1, "domain_focused": warmup_focused},
           "dictionary": {"epochs": 1, "batch_size": 2, "max_steps": 1, "domain_focused": dictionary_focused}}
    run_pipeline(base=str(tiny_dir), out=tmp_path / "run", stages="extend,warmup,dictionary",
                 config=config_from_dict(cfg), **inputs)
    model = SpladeEncoder.from_pretrained(tmp_path / "run" / "dictionary")
    tok, domain = model.tokenizer, torch.tensor(model.domain_token_ids)
    zorblatt, api = tok.convert_tokens_to_ids("zorblatt"), tok.convert_tokens_to_ids("api")
    assert len(seen) == 2
    for ids, maskable, _ in seen:
        special = torch.isin(ids, torch.tensor(tok.all_special_ids))
        assert (ids == tok.pad_token_id).any()  # texts of other lengths: padding to leave alone
        assert torch.equal(maskable, ~special)
    (w_ids, _, w_always), (d_ids, _, d_always) = seen
    if warmup_focused:
        assert torch.equal(w_always, torch.isin(w_ids, domain))
    else:
        assert w_always is None
    [row] = [r for r in range(len(d_ids)) if (d_ids[r] == zorblatt).any()]
    assert d_always[row][d_ids[row] == zorblatt].all()  # the entry's own term: always
    assert d_always[row][d_ids[row] == api].tolist() == [dictionary_focused]


def test_a_distill_batch_encodes_each_candidate_once_and_masks_only_the_padding(tiny_bert, tmp_path):
    """q1 ranks d1, d3, d2 and q2 ranks d2, d1: three documents encoded, q2's short list padded
    with -1, and every real candidate (d1 at row 0 too) inside the loss's mask."""
    from sparse_adapt.data import load_train

    batch = load_train(_jsonl(tmp_path / "train.jsonl", TRAIN))
    got = {}

    def loss_fn(**kw):
        got.update(kw)
        return {"total": torch.tensor(0.0)}

    stages_mod.DistillStage._step(tiny_bert, batch, loss_fn, [], 1)
    assert got["doc_index"].tolist() == [[0, 1, 2], [2, 0, -1]]
    assert got["mask"].tolist() == [[True, True, True], [True, True, False]]
    assert got["teacher"].tolist() == [[10.0, 8.0, -8.0], [10.0, -8.0, 0.0]]
    assert got["doc_weights"].shape[0] == 3 and got["query_weights"].shape[0] == 2


def test_a_batch_where_no_position_is_picked_is_skipped_not_trained_on(tiny_dir, inputs, tmp_path):
    # a rate of 0.001 picks nothing in most batches of these short texts: no NaN loss stops the run
    config = {"warmup": {"epochs": 1, "batch_size": 1, "lr": 1e-3, "mask_rate": 0.001, "domain_focused": False}}
    out = tmp_path / "run"
    _run(tiny_dir, inputs, out, stages=("warmup",), config=config)
    records = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    [end] = [r for r in records if r.get("event") == "stage_end" and r["stage"] == "warmup"]
    assert end["steps"] < len(DOCS)


def test_the_distill_console_line_shows_each_term_under_its_own_name():
    terms = {"loss": 1.5, "kd": 0.1, "ret": 0.2, "sp": 0.3, "dom": 0.4, "ctr": 0.5, "qexp": 0.6, "pres": 0.7}
    assert stages_mod.format_step(50, terms) == ("Step 50 | Loss 1.5000 | KD 0.1000 | Ret 0.2000 | Sp 0.3000 | "
                                                 "Dom 0.4000 | Ctr 0.5000 | QExp 0.6000 | Pres 0.7000")


def test_the_distillation_terms_the_training_text_counts_and_names_are_the_losses_terms():
    """The distill stage's "seven-term distillation", the definition queries' "all seven
    distillation terms", the distill step's "eight" host values (its terms and the objective)
    and the console line's names follow losses.TERMS: a term added or dropped leaves the prose
    counting the old ones."""
    import re

    from sparse_adapt.training import definitions, loop

    numbers = {w: n for n, w in enumerate("zero one two three four five six seven eight nine ten eleven".split())}
    said = [numbers[w.lower()] for module in (stages_mod, definitions)
            for w in re.findall(r"\b(\w+)(?:-term distillation| distillation terms)\b",
                                Path(module.__file__).read_text(encoding="utf-8")) if w.lower() in numbers]
    assert len(said) >= 2 and set(said) == {len(TERMS)}
    values = re.search(r"a distill step has (\w+) of them", loop._host_values.__doc__)
    assert numbers[values[1]] == len(TERMS) + 1  # the objective beside each term
    line = stages_mod.format_step(50, {k: 0.0 for k in ("loss", *TERMS)})
    labels = re.compile(r"(\w+) (?:\.\.\.|[\d.]+)")
    assert labels.findall(stages_mod.format_step.__doc__) == labels.findall(line)
