"""Config files (``training/config_files.py``): which parser reads a file, the recommended
settings a run reports, and a config written back as TOML."""

from __future__ import annotations

import re
import tomllib

import pytest

from sparse_adapt.errors import ConfigError
from sparse_adapt.training.config import TrainConfig
from sparse_adapt.training.config_files import config_to_toml, load_config, recommended_in_effect


def test_a_toml_suffix_in_any_case_is_read_as_toml_and_only_other_suffixes_get_the_json_hint(tmp_path):
    # Windows and some editors save "C.TOML": it is still a TOML file, not broken JSON.
    upper = tmp_path / "c.TOML"
    upper.write_text("[distill]\nepochs = 3\n")
    assert load_config(upper).distill.epochs == 3
    broken = "[distill\n"
    for name, hinted in (("c.json", False), ("c.JSON", False), ("c.cfg", True)):
        path = tmp_path / name
        path.write_text(broken)
        with pytest.raises(ConfigError) as e:
            load_config(path)
        assert str(e.value).startswith(f"{path}: cannot parse (")
        assert ("read as JSON: only a .toml file is read as TOML" in str(e.value)) == hinted


def test_the_recommended_settings_in_effect_are_only_those_of_the_stages_asked_about():
    cfg = load_config(None, "offline-splade-tiny")
    held = "distill.pres_form = 'all-texts'"
    assert recommended_in_effect(cfg, "offline-splade-tiny") == held
    assert recommended_in_effect(cfg, "offline-splade-tiny", ["warmup", "distill"]) == held
    # A run of no stage that a recommendation touches (an empty list is no stage, not every stage).
    assert recommended_in_effect(cfg, "offline-splade-tiny", ["warmup"]) == ""
    assert recommended_in_effect(cfg, "offline-splade-tiny", []) == ""


def test_a_config_written_as_toml_reads_back_equal_and_keeps_its_text_as_written(tmp_path):
    cfg = TrainConfig().validate()
    plain = config_to_toml(cfg)
    assert plain.startswith("[warmup]\n")  # no blank first line without a header
    headed = config_to_toml(cfg, "best of 4 trials\nseed 0")
    assert headed.startswith("# best of 4 trials\n# seed 0\n\n[warmup]\n")
    assert "\n\n[dictionary]\n" in plain and "\n\n[distill]\n" in plain
    # A non-ASCII template stays readable in the file (best.toml is meant to be read and edited).
    path = tmp_path / "best.toml"
    raw = {"dictionary": {"template": "{term} – {definition}; z. B. {examples}"}}
    path.write_text(config_to_toml(_built(raw)), encoding="utf-8")
    text = path.read_text(encoding="utf-8")
    assert 'template = "{term} – {definition}; z. B. {examples}"' in text
    assert load_config(path) == _built(raw)
    assert tomllib.loads(text)["dictionary"]["template"] == raw["dictionary"]["template"]


def _built(raw: dict) -> TrainConfig:
    from sparse_adapt.training.config_files import config_from_dict

    return config_from_dict(raw)


def test_an_unknown_key_holding_a_line_break_is_named_escaped_on_one_line():
    from sparse_adapt.training.config_files import config_from_dict

    # Printed as is, "x\nerror: ..." would forge a second error line under the real one.
    with pytest.raises(ConfigError) as e:
        config_from_dict({"distill": {"x\nerror: all fine": 1}}, "c.json")
    assert str(e.value).startswith("c.json: unknown key 'distill.x\\nerror: all fine'; valid: ")
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=r"^c\.json: unknown key distill\.epoch; valid: "):
        config_from_dict({"distill": {"epoch": 1}}, "c.json")


def test_a_file_section_the_recommendation_lacks_is_laid_over_the_defaults(tmp_path):
    # offline-splade-tiny recommends distill settings only; a [warmup] table must still merge.
    path = tmp_path / "c.toml"
    path.write_text("[warmup]\nepochs = 2\n")
    cfg = load_config(path, "offline-splade-tiny")
    assert (cfg.warmup.epochs, cfg.distill.pres_form) == (2, "all-texts")
    assert cfg.dictionary == TrainConfig().dictionary


@pytest.mark.parametrize("value, message", [
    (True, "distill.kd: expected float, got True"),  # a bool is an int to Python, not a weight
    (10**400, "distill.kd: expected a finite number, got inf"),  # beyond float range: not 0, not a traceback
], ids=["bool", "huge-int"])
def test_a_float_setting_refuses_a_bool_and_an_integer_beyond_float_range(value, message):
    from sparse_adapt.training.config_files import config_from_dict

    with pytest.raises(ConfigError, match=f"^c.json: {message}"):
        config_from_dict({"distill": {"kd": value}}, "c.json")


@pytest.mark.parametrize("base", [None, "offline-splade-tiny"])
def test_a_config_file_that_is_no_table_is_named_whatever_the_base(tmp_path, base):
    # With a base the file is merged over its recommendation first: a list must not reach .items().
    path = tmp_path / "c.json"
    path.write_text("[1, 2]")
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))}: expected a table of stage sections"):
        load_config(path, base)


def test_a_config_nested_too_deeply_to_parse_is_one_error_naming_the_file(tmp_path):
    path = tmp_path / "c.json"
    path.write_text("[" * 100_000)  # json recurses per level: a RecursionError, not a ValueError
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))}: cannot parse \\("):
        load_config(path)


def test_an_error_of_a_builtin_bases_settings_names_them_not_a_file_in_a_folder_of_that_name():
    # offline-splade-tiny is no directory: "offline-splade-tiny/<file>" would send the user looking for one.
    recommended = r"^the settings recommended for offline-splade-tiny: distill\.lr must be < 1"
    with pytest.raises(ConfigError, match=recommended):
        load_config(None, "offline-splade-tiny", {"distill": {"lr": 5.0}})


def _config_comments(cls) -> str:
    """The comments and docstring of a config dataclass as one line of words (no '#', no line breaks)."""
    import inspect

    return " ".join(inspect.getsource(cls).replace("#", " ").split())


def test_the_config_comments_step_counts_are_the_bundled_corpus_s_batches_at_the_defaults():
    # The defaults' comments justify each value by what it does on the bundled corpus ("10 epochs x
    # 4 steps", "1/4 of the default run", "< 100 steps per stage"): recomputed from its files here, so
    # a corpus, batch size or epoch count changed alone fails.
    import json
    import math

    import torch

    from corpora import GATROCRAPTIC
    from sparse_adapt.training.config import DictionaryConfig, DistillConfig, MLMConfig, WarmupConfig
    from sparse_adapt.training.loop import shuffled_batches

    def lines(path) -> int:
        return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())

    items = {"warmup": lines(GATROCRAPTIC.docs), "dictionary": lines(GATROCRAPTIC.dictionary),
             "distill": lines(GATROCRAPTIC.train)}  # every bundled document is one warmup window
    sections = {"warmup": WarmupConfig(), "dictionary": DictionaryConfig(), "distill": DistillConfig()}
    steps = {name: math.ceil(items[name] / cfg.batch_size) for name, cfg in sections.items()}
    for name, cls in (("warmup", WarmupConfig), ("distill", DistillConfig)):
        said = re.search(r"(\d+) epochs x (\d+) steps at (?:lr )?(\d[\d.e-]*)", _config_comments(cls))
        assert said, f"{cls.__name__}'s comment no longer says its epochs x steps"
        cfg = sections[name]
        assert (int(said.group(1)), int(said.group(2)), float(said.group(3))) == (cfg.epochs, steps[name], cfg.lr)
    distill = _config_comments(DistillConfig)
    ramp = re.search(r"1/(\d+) of the default run \((\d+) steps\)", distill)
    run = sections["distill"].epochs * steps["distill"]
    assert int(ramp.group(2)) == run and sections["distill"].sp_warmup_steps * int(ramp.group(1)) == run
    entries = re.search(r"Entries are few \((\d+) bundled\)", _config_comments(DictionaryConfig))
    assert int(entries.group(1)) == items["dictionary"]
    bound = int(re.search(r"the bundled corpus needs < (\d+) steps per stage", _config_comments(MLMConfig)).group(1))
    assert max(sections[n].epochs * steps[n] for n in sections) < bound
    # Documents shared by a batch's candidate lists are encoded once: the comment's "~N instead of M"
    # is the mean over shuffled batches (as distill draws them) against every list's own documents.
    encodings = re.search(r"(\d+) queries cost ~(\d+) document encodings instead of (\d+)", distill)
    assert encodings, "DistillConfig's comment no longer says what a batch's shared documents save"
    rows = [json.loads(line) for line in GATROCRAPTIC.train.read_text(encoding="utf-8").splitlines() if line.strip()]
    size = sections["distill"].batch_size
    plan, unique = shuffled_batches(len(rows), size), []
    for seed in range(200):
        for batch in plan(torch.Generator().manual_seed(seed)):
            if len(batch) == size:
                unique.append(len({d for i in batch for d in rows[i]["doc_ids"]}))
    assert int(encodings.group(1)) == size and int(encodings.group(3)) == size * max(len(r["doc_ids"]) for r in rows)
    assert int(encodings.group(2)) == round(sum(unique) / len(unique))


def test_the_distill_comments_name_the_bundled_negatives_domain_ids_and_quality_bar():
    # The domain hinge's weight is argued from the bundled training lists (which documents are -8
    # negatives of every control query), the number of domain ids and the report's quality bar:
    # each is read from its source here, not from the comment.
    import ast
    import json
    from pathlib import Path

    from corpora import GATROCRAPTIC
    from sparse_adapt.modeling.vocabulary import plan_extension
    from sparse_adapt.training.config import DistillConfig
    from tests.conftest import _tokenizer

    text = _config_comments(DistillConfig)
    controls = set(json.loads(GATROCRAPTIC.query_groups.read_text(encoding="utf-8"))["control"])
    rows = [json.loads(line) for line in GATROCRAPTIC.train.read_text(encoding="utf-8").splitlines() if line.strip()]
    negatives = set.intersection(*({d for d, s in zip(r["doc_ids"], r["teacher_scores"]) if s == -8}
                                   for r in rows if r["qid"] in controls))
    said = re.search(r"d(\d+)-d(\d+) are -8 negatives of every control query", text)
    assert said, "DistillConfig's comment no longer names the control queries' -8 negatives"
    assert {f"d{i}" for i in range(int(said.group(1)), int(said.group(2)) + 1)} == negatives
    terms = json.loads(GATROCRAPTIC.terms.read_text(encoding="utf-8"))
    ids = int(re.search(r"\((\d+) ids on the bundled terms", text).group(1))
    assert ids == len({t.normalized for t in plan_extension(_tokenizer(), terms)})
    # Read from the files, not imported (importing the diagnostics takes seconds): the report's
    # criterion grades the term's weight strictly above HIGH_WEIGHT.
    root = Path(__file__).resolve().parents[2]
    checks = ast.parse((root / "diagnostics" / "sections" / "checks.py").read_text(encoding="utf-8")).body
    high_weight = next(ast.literal_eval(node.value) for node in checks if isinstance(node, ast.Assign)
                       and [getattr(t, "id", None) for t in node.targets] == ["HIGH_WEIGHT"])
    assert "term.weight > HIGH_WEIGHT" in (root / "sparse_adapt" / "report" / "criteria.py").read_text(encoding="utf-8")
    assert f"the quality bar asks > {high_weight:.1f} in d21" in text
    assert DistillConfig().tau_min > high_weight


def test_a_model_folder_s_recommended_file_sits_between_the_defaults_and_the_user_s_config(tmp_path):
    # load_config's docstring named only the built-in bases' settings; a pretrain output's file applies too
    import inspect
    import json

    from sparse_adapt.modeling.builtin import RECOMMENDED_FILE

    folder = tmp_path / "pretrained"
    folder.mkdir()
    (folder / RECOMMENDED_FILE).write_text(json.dumps({"distill": {"epochs": 7, "lr": 1e-4}}))
    assert load_config(None, folder).distill.epochs == 7
    mine = tmp_path / "mine.toml"
    mine.write_text("[distill]\nepochs = 2\n")
    config = load_config(mine, folder)
    assert (config.distill.epochs, config.distill.lr) == (2, 1e-4)  # the user's key wins, the folder's other stays
    assert load_config(None, tmp_path).distill.epochs == TrainConfig().distill.epochs  # a folder without one
    assert RECOMMENDED_FILE in " ".join(inspect.getdoc(load_config).split())


def test_the_config_files_module_docstring_names_the_recommended_file_the_code_reads():
    """It had named a built-in base's settings only: a model folder's recommended file is laid
    over the defaults too (load_config), and under the name the code reads."""
    import sparse_adapt.training.config_files as module
    from sparse_adapt.modeling.builtin import RECOMMENDED_FILE

    assert re.findall(r"``(\w+\.json)``", " ".join(module.__doc__.split())) == [RECOMMENDED_FILE]
