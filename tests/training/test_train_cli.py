"""``sparse-adapt train`` through ``cli.main``: exact flags, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sparse_adapt.cli import main
from sparse_adapt.modeling.encoder import SpladeEncoder
from tests.training.test_stages import DICTIONARY, DOCS, TERMS_JSON, TRAIN, _jsonl  # noqa: F401  (shared tiny data)
from tests.conftest import make_tiny_bert


def _files(tmp_path):
    (tmp_path / "terms.json").write_text(json.dumps(TERMS_JSON))
    model = tmp_path / "tiny"
    make_tiny_bert().save_pretrained(model)
    config = tmp_path / "small.json"
    config.write_text(json.dumps({"distill": {"epochs": 1, "batch_size": 2, "log_every": 1}}))
    return [
        "train", "--base", str(model), "--corpus", str(_jsonl(tmp_path / "docs.jsonl", DOCS)),
        "--terms", str(tmp_path / "terms.json"), "--dictionary", str(_jsonl(tmp_path / "dict.jsonl", DICTIONARY)),
        "--train", str(_jsonl(tmp_path / "train.jsonl", TRAIN)), "--config", str(config), "--seed", "7",
    ]


@pytest.mark.parametrize("argv, said", [
    (["--threads", "100000", "train"], "more than 4x this machine's"),  # a segfault in the thread pool
    (["train", "--seed", str(2**65)], "--seed"),  # a traceback after run.json was written
])
def test_a_thread_count_or_seed_no_run_can_take_is_refused_first(tmp_path, capsys, argv, said):
    files = _files(tmp_path)[1:]  # without the command name
    command = argv.index("train")
    full = argv[: command + 1] + files + argv[command + 1 :] + ["--out", str(tmp_path / "run")]
    assert main(full) == 2
    assert said in " ".join(capsys.readouterr().err.split()) and not (tmp_path / "run").exists()


@pytest.mark.parametrize("flag", ["--train", "--config", "--corpus"])
def test_an_out_that_is_an_input_is_refused_even_with_overwrite(tmp_path, capsys, flag):
    """`--out train.jsonl --overwrite` deleted the user's training lists, then crashed;
    `--out` the config file replaced it with a run directory."""
    argv = _files(tmp_path)
    given = Path(argv[argv.index(flag) + 1])
    before = given.read_bytes()
    assert main(argv + ["--out", str(given), "--stages", "extend,distill", "--overwrite"]) == 2
    assert "is also an input" in " ".join(capsys.readouterr().err.split())
    assert given.read_bytes() == before


def test_train_extend_distill_writes_final_and_log(tmp_path, capsys):
    out = tmp_path / "run"
    argv = _files(tmp_path) + ["--out", str(out), "--stages", "extend,distill"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "Step 1 | Loss" in text and "stage distill done" in text
    model = SpladeEncoder.from_pretrained(out / "final")
    assert model.tokenizer.convert_tokens_to_ids("zorblatt") in model.settings.domain_token_ids
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["stages"] == ["extend", "distill"] and manifest["seed"] == 7
    assert manifest["config"]["distill"]["epochs"] == 1
    # the same command again: nothing to redo
    assert main(argv) == 0
    assert "resuming: extend, distill already complete" in capsys.readouterr().out


def test_unknown_stage_is_one_red_line_exit_2(tmp_path, capsys):
    argv = _files(tmp_path) + ["--out", str(tmp_path / "run"), "--stages", "extend,finetune"]
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines
    assert "unknown stage 'finetune'; valid stages: extend, warmup, dictionary, distill" in err
    assert "Traceback" not in err


def test_bad_config_key_names_file_and_key(tmp_path, capsys):
    argv = _files(tmp_path)
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[distill]\nmargn = 3.0\n")
    argv[argv.index("--config") + 1] = str(cfg)
    assert main(argv + ["--out", str(tmp_path / "run")]) == 2
    err = "".join(capsys.readouterr().err.split())  # rich may wrap inside the path
    assert f"{cfg}:unknownkeydistill.margn" in err


def test_a_config_path_that_is_a_directory_says_so(tmp_path, capsys):
    argv = _files(tmp_path)
    argv[argv.index("--config") + 1] = str(tmp_path)
    assert main(argv + ["--out", str(tmp_path / "run")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "is a directory; give the config file itself" in err and "not found" not in err


def test_a_config_path_that_is_a_pipe_says_so_not_that_it_is_missing(tmp_path, capsys):
    import os

    argv = _files(tmp_path)
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    argv[argv.index("--config") + 1] = str(fifo)
    assert main(argv + ["--out", str(tmp_path / "run")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "not a regular file" in err and "not found" not in err


def test_a_dictionary_entry_naming_no_domain_term_is_a_warning(tmp_path, capsys):
    """A typo in a dictionary term ('Zorblat') trains nothing for the real term: said before training."""
    argv = _files(tmp_path)
    dictionary = tmp_path / "dict.jsonl"
    dictionary.write_text(dictionary.read_text() + json.dumps(
        {"term": "Zorblat", "definition": "a typo", "examples": ["Zorblat twice"]}) + "\n")
    assert main(argv + ["--out", str(tmp_path / "run"), "--stages", "extend,dictionary"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "warning:" in out and "1 of" in out and "'Zorblat'" in out and "no domain token learns from them" in out


@pytest.mark.parametrize("folder, stages", [("extend", "extend,distill"), ("final", "extend")])
def test_a_folder_of_yours_where_the_run_saves_a_model_is_refused_before_training(tmp_path, capsys, folder, stages):
    """`--out` with an `extend/` of the user's own failed only when extend had trained, and
    told a CLI user to "pass overwrite=True". OUT/final is written after every stage has
    trained: its check cannot wait until then either."""
    out = tmp_path / "run"
    (out / folder).mkdir(parents=True)
    (out / folder / "notes.txt").write_text("mine")
    assert main(_files(tmp_path) + ["--out", str(out), "--stages", stages, "--overwrite"]) == 2
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert f"{out / folder} holds files that are no saved model" in err and "overwrite=True" not in err
    assert "stage extend done" not in captured.out + captured.err
    assert (out / folder / "notes.txt").read_text() == "mine"


def test_training_on_from_a_runs_final_without_reference_is_warned(tmp_path, capsys):
    """The advice diagnose gave (train --base RUN/final, no --reference) compared with the
    checkpoint itself and dropped the settings recommended for the base."""
    argv = _files(tmp_path)
    base = argv[argv.index("--base") + 1]
    assert main([*argv, "--out", str(tmp_path / "first"), "--stages", "extend"]) == 0
    first = tmp_path / "first" / "final"
    argv[argv.index("--base") + 1] = str(first)
    capsys.readouterr()
    assert main([*argv, "--out", str(tmp_path / "second"), "--stages", "distill"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert f"warning: {first} was trained from {base}: give --reference {base}" in err
    assert main([*argv, "--out", str(tmp_path / "third"), "--stages", "distill", "--reference", base]) == 0
    assert "give --reference" not in capsys.readouterr().err
    # a run that had a --reference of its own: that is the one to give, not its --base
    assert main([*argv, "--out", str(tmp_path / "fourth"), "--stages", "distill"]) == 0  # from `first`, no reference
    capsys.readouterr()
    from sparse_adapt.training.rundir import reference_of

    assert reference_of(tmp_path / "third" / "final") == base and reference_of(first) == base
    assert reference_of(base) is None
    # a chain without --reference traces back to its first base, not to the link before
    assert reference_of(tmp_path / "fourth" / "final") == base
    argv[argv.index("--base") + 1] = str(tmp_path / "fourth" / "final")
    assert main([*argv, "--out", str(tmp_path / "fifth"), "--stages", "distill"]) == 0
    assert f"was trained from {base}: give --reference {base}" in " ".join(capsys.readouterr().err.split())


def test_training_from_an_extend_vocab_output_without_reference_is_warned(tmp_path, capsys):
    """extend-vocab then `train --base EXTENDED` compared with the extended model, which already
    fires the new tokens, so it drifted from the one-shot run without a word (the README says
    the reference never fires an added domain token)."""
    argv = _files(tmp_path)
    base = argv[argv.index("--base") + 1]
    terms = argv[argv.index("--terms") + 1]
    extended = tmp_path / "extended"
    assert main(["extend-vocab", "--base", base, "--terms", terms, "--out", str(extended)]) == 0
    argv[argv.index("--base") + 1] = str(extended)
    capsys.readouterr()
    assert main([*argv, "--out", str(tmp_path / "run"), "--stages", "distill"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    origin = str(Path(base).resolve())
    assert f"warning: {extended} was extended from {origin}: give --reference {origin}" in err
    assert main([*argv, "--out", str(tmp_path / "given"), "--stages", "distill", "--reference", base]) == 0
    assert "give --reference" not in capsys.readouterr().err
    # the run's final names the first base too, and a model never extended names nothing
    from sparse_adapt.training.rundir import reference_of

    assert reference_of(tmp_path / "run" / "final") == origin and reference_of(base) is None
    # with the reference given, extend-vocab + train is the one-shot run with the extend stage, bit for bit
    argv[argv.index("--base") + 1] = base
    assert main([*argv, "--out", str(tmp_path / "one-shot"), "--stages", "extend,distill"]) == 0
    from safetensors.torch import load_file

    given, one_shot = (load_file(tmp_path / r / "final" / "model.safetensors") for r in ("given", "one-shot"))
    assert given.keys() == one_shot.keys() and all(torch.equal(given[k], one_shot[k]) for k in given)


def test_a_world_size_that_is_no_number_is_one_line_before_any_work(tmp_path, capsys, monkeypatch):
    """accelerate's int() of WORLD_SIZE=abc ended train in a ValueError traceback."""
    from accelerate import PartialState

    monkeypatch.setenv("WORLD_SIZE", "abc")
    PartialState._reset_state()  # read once per process: an earlier test's state would hide the variable
    try:
        assert main([*_files(tmp_path), "--out", str(tmp_path / "run"), "--stages", "extend"]) == 2
    finally:
        PartialState._reset_state()
    err = capsys.readouterr().err
    assert "Traceback" not in err and "WORLD_SIZE, RANK, LOCAL_RANK ...) must be numbers" in err
    assert not (tmp_path / "run").exists()


def test_every_option_reaches_the_pipeline_and_the_stages_default_to_all_four(tmp_path, monkeypatch, capsys):
    from sparse_adapt.training import pipeline

    seen = {}
    monkeypatch.setattr(pipeline, "run_pipeline", lambda **given: seen.update(given) or tmp_path / "final")
    argv = _files(tmp_path) + ["--out", str(tmp_path / "run")]
    assert main(argv) == 0
    assert seen["stages"] == "extend,warmup,dictionary,distill"  # the spec's H4 pipeline
    assert (seen["overwrite"], seen["valid"], seen["reference"], seen["device"]) == (False, None, None, None)
    assert main([*argv, "--stages", "distill", "--overwrite", "--valid", "v.jsonl", "--reference", "ref",
                 "--device", "cpu"]) == 0
    assert (seen["stages"], seen["overwrite"], seen["valid"], seen["reference"], seen["device"]) == (
        "distill", True, Path("v.jsonl"), "ref", "cpu")
    assert f"model: {tmp_path / 'final'}" in " ".join(capsys.readouterr().out.split())

def test_the_final_models_path_is_printed_as_it_is_even_with_brackets(tmp_path, monkeypatch, capsys):
    # rich takes "[bold]" for markup: unescaped, the path printed was not the folder written
    from sparse_adapt.training import pipeline

    final = tmp_path / "[bold]run" / "final"
    monkeypatch.setattr(pipeline, "run_pipeline", lambda **given: final)
    assert main(_files(tmp_path) + ["--out", str(tmp_path / "run")]) == 0
    assert f"model:{final}" in "".join(capsys.readouterr().out.split())  # rich may wrap the line


def test_a_base_whose_run_compared_with_that_same_place_is_not_warned_about(tmp_path, capsys):
    """A final moved into the place of the base it trained from names that place as its
    reference (here spelt another way): there is no other model to give --reference."""
    argv = _files(tmp_path)
    base = Path(argv[argv.index("--base") + 1])
    run = {"base": str(base / ".." / base.name), "inputs": {}, "stages": ["extend"]}
    (base / "made_from.json").write_text(json.dumps({"schema": "sparse-adapt.final/1", "run": run}))
    assert main([*argv, "--out", str(tmp_path / "run"), "--stages", "extend"]) == 0
    assert "give --reference" not in capsys.readouterr().err
