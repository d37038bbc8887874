"""Hub ids: one probe instead of ~50 s of retries offline, the cache when the Hub is silent, and
a pushed model's own settings (``sparse_adapt.json``) kept, as they are from a local path."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import torch

from sparse_adapt.cli import main
from sparse_adapt.errors import ModelLoadError
from sparse_adapt.modeling import hub
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.modeling.hub import HubUnreachableWarning, hub_unreachable

TEXTS = ["the gatrocraptic relay", "reset your password"]


class _Session:
    def __init__(self, error: Exception | None = None):
        self.error, self.asked = error, []

    def head(self, url, timeout):
        self.asked.append((url, timeout))
        if self.error is not None:
            raise self.error


def test_the_probe_asks_once_and_says_why_the_hub_is_silent(monkeypatch, tmp_path):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # a machine's HF_HUB_OFFLINE=1
    silent = _Session(ConnectionError("[Errno -2] Name or service not known"))
    monkeypatch.setattr(huggingface_hub, "get_session", lambda: silent)
    assert hub_unreachable("org/model") == "[Errno -2] Name or service not known"
    assert silent.asked == [("https://huggingface.co/org/model/resolve/main/config.json", hub.PROBE_TIMEOUT_S)]
    answering = _Session()  # any answer, 404 included, is the Hub's to explain
    monkeypatch.setattr(huggingface_hub, "get_session", lambda: answering)
    assert hub_unreachable("org/model") is None and len(answering.asked) == 1
    # never asked: a local path, an id the Hub would refuse by its form, offline mode set
    monkeypatch.setattr(huggingface_hub, "get_session", lambda: pytest.fail("asked the Hub"))
    assert hub_unreachable(str(tmp_path)) is None
    assert hub_unreachable("not a valid//id") is None
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert hub_unreachable("org/model") is None


def _cache(tmp_path, monkeypatch, repo: str, model: SpladeEncoder | None) -> None:
    """A Hugging Face cache holding ``repo`` at one revision (or nothing), as snapshot_download leaves it."""
    import huggingface_hub

    cache = tmp_path / "hf-cache"
    if model is not None:
        folder = cache / f"models--{repo.replace('/', '--')}"
        model.save_pretrained(folder / "snapshots" / "0123abcd")
        (folder / "refs").mkdir(parents=True)
        (folder / "refs" / "main").write_text("0123abcd")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))


def _silent_hub(monkeypatch) -> None:
    monkeypatch.setattr(hub, "hub_unreachable", lambda name: "[Errno -2] Name or service not known")


def test_a_silent_hub_without_a_cached_copy_is_one_line_at_once(tmp_path, monkeypatch, capsys):
    _cache(tmp_path, monkeypatch, "org/adapted", None)
    _silent_hub(monkeypatch)
    start = time.monotonic()
    assert main(["encode", "--model", "org/adapted", "a query"]) == 2
    err = capsys.readouterr().err
    assert time.monotonic() - start < 20  # was ~50 s of huggingface_hub's retries
    assert "'org/adapted': no such local directory" in err and "did not answer ([Errno -2]" in err
    assert "local cache holds no copy" in err and len(err.strip().splitlines()) == 1


def test_a_silent_hub_loads_the_cached_copy_with_its_settings_and_says_so(tiny_bert, tmp_path, monkeypatch):
    tiny_bert.settings.doc_max_length, tiny_bert.settings.domain_token_ids = 48, [7, 9]
    _cache(tmp_path, monkeypatch, "org/adapted", tiny_bert)
    _silent_hub(monkeypatch)
    with pytest.warns(HubUnreachableWarning, match="'org/adapted' was loaded from the local cache"):
        got = SpladeEncoder.from_pretrained("org/adapted")
    assert got.settings.doc_max_length == 48 and got.settings.domain_token_ids == [7, 9]
    torch.testing.assert_close(got.encode(TEXTS, kind="document").toarray(),
                               tiny_bert.encode(TEXTS, kind="document").toarray())


def test_a_hub_id_is_loaded_from_its_snapshot_with_its_settings(tiny_bert, tmp_path, monkeypatch):
    """Through transformers alone a Hub id lost sparse_adapt.json: a pushed adapted model came
    back with default lengths and no domain tokens."""
    import huggingface_hub

    tiny_bert.settings.query_max_length, tiny_bert.settings.domain_terms = 12, {"gatrocraptic": "devices"}
    tiny_bert.settings.base = ""  # a model saved without a recorded origin: the Hub id becomes it
    tiny_bert.save_pretrained(tmp_path / "snapshot")
    asked = {}

    def snapshot_download(repo_id, allow_patterns, local_files_only):
        asked.update(repo=repo_id, patterns=allow_patterns, local=local_files_only)
        return str(tmp_path / "snapshot")

    monkeypatch.setattr(hub, "hub_unreachable", lambda name: None)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    got = SpladeEncoder.from_pretrained("org/adapted")
    assert asked == {"repo": "org/adapted", "patterns": hub.MODEL_FILES, "local": False}
    assert got.settings.query_max_length == 12 and got.settings.domain_terms == {"gatrocraptic": "devices"}
    assert got.settings.base == "org/adapted"
    # the files fetched: configs, tokenizer and safetensors weights, not pickles, ONNX or checkpoints
    from fnmatch import fnmatch

    fetched = lambda f: any(fnmatch(f, p) for p in hub.MODEL_FILES)  # noqa: E731
    assert all(map(fetched, ["config.json", "tokenizer.json", "vocab.txt", "merges.txt", "sentencepiece.bpe.model",
                             "model.safetensors", "model-00001-of-00002.safetensors", "sparse_adapt.json",
                             "1_SpladePooling/config.json"]))
    assert not any(map(fetched, ["pytorch_model.bin", "onnx/model.onnx", "checkpoint-500/model.safetensors",
                                 "model.py"]))


def test_the_cli_says_a_cached_copy_in_one_warning_line(tiny_bert, tmp_path, monkeypatch, capsys):
    _cache(tmp_path, monkeypatch, "org/adapted", tiny_bert)
    _silent_hub(monkeypatch)
    assert main(["encode", "--model", "org/adapted", "the gatrocraptic relay"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    # one line of ours, not Python's "file.py:123: HubUnreachableWarning: ..." and its source line
    assert err == ["warning: the Hugging Face Hub did not answer ([Errno -2] Name or service not known); "
                   "'org/adapted' was loaded from the local cache, which may be older than the Hub's copy"]


def test_an_empty_model_name_is_not_the_working_directory():
    for empty in ("", "  "):
        with pytest.raises(ModelLoadError, match="the model name is empty"):
            SpladeEncoder.from_pretrained(empty)


def test_a_model_path_under_the_home_directory_may_be_written_with_a_tilde(tiny_bert, tmp_path, monkeypatch):
    """Quoted ("~/m") or from Python, no shell expands it."""
    from sparse_adapt.modeling.encoder import SpladeEncoder

    monkeypatch.setenv("HOME", str(tmp_path))
    tiny_bert.save_pretrained(tmp_path / "m")
    loaded = SpladeEncoder.from_pretrained("~/m")
    assert loaded.vocab_size == tiny_bert.vocab_size


def test_a_tilde_path_of_an_unknown_user_is_one_line_everywhere_a_model_name_is_read(tmp_path, capsys):
    """pathlib's expanduser raises RuntimeError for "~user" of no account here: it was a traceback
    and exit 1 from `encode --model`, `adapt --base` and the run directory's base hash."""
    from sparse_adapt.training.rundir import files_sha256, part_holding

    name = "~no-such-user-x9/m"
    line = f"{name}: no home directory for '~no-such-user-x9' on this machine (a ~user path names a user account)"
    for read in (hub.local_model_path, hub.model_directory, hub.model_reference, files_sha256,
                 lambda n: part_holding(tmp_path, n, ["final"]), lambda n: SpladeEncoder.from_pretrained(n)):
        with pytest.raises(ModelLoadError) as e:
            read(name)
        assert str(e.value) == line
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"doc_id": "d1", "text": "a relay depot"}\n', encoding="utf-8")
    for argv in (["encode", "--model", name, "q"], ["adapt", "--corpus", str(docs), "--base", name, "--out",
                                                     str(tmp_path / "out")]):
        assert main(argv) == 2
        assert capsys.readouterr().err.splitlines() == [f"error: {line}"]
    assert not (tmp_path / "out").exists()


def test_a_hub_repository_of_pickle_weights_alone_is_said_to_need_converting(tiny_bert, tmp_path, monkeypatch):
    # only safetensors are fetched: its snapshot arrives without weights, which read as "holds no model weights"
    import huggingface_hub

    from sparse_adapt.errors import ModelLoadError

    tiny_bert.save_pretrained(tmp_path / "snapshot")
    (tmp_path / "snapshot" / "model.safetensors").unlink()  # what the fetch leaves of a *.bin-only repository
    monkeypatch.setattr(hub, "hub_unreachable", lambda name: None)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo_id, **kw: str(tmp_path / "snapshot"))
    with pytest.raises(ModelLoadError, match=r"org/old-splade holds no model weights .*never pickles: a repository "
                                             r"with \*\.bin weights alone needs converting"):
        SpladeEncoder.from_pretrained("org/old-splade")
    with pytest.raises(ModelLoadError, match=r"beside its config\.json\)$"):  # a local folder: no Hub advice
        SpladeEncoder.from_pretrained(str(tmp_path / "snapshot"))


def _with_extra_tensors(model_dir, names: list[str]) -> None:
    from safetensors.torch import load_file, save_file

    weights = model_dir / "model.safetensors"
    tensors = load_file(weights)
    tensors.update({name: torch.zeros(2) for name in names})
    save_file(tensors, weights, metadata={"format": "pt"})


def test_checkpoint_tensors_the_model_drops_are_one_warning_unless_dropped_by_design(tiny_bert, tmp_path, capsys):
    tiny_bert.save_pretrained(tmp_path / "m")
    # bert-base-uncased's pooler and next-sentence head: no masked-LM has a place for them
    _with_extra_tensors(tmp_path / "m", ["bert.pooler.dense.bias", "cls.seq_relationship.bias"])
    assert main(["encode", "--model", str(tmp_path / "m"), "relay"]) == 0
    assert "warning" not in capsys.readouterr().err
    # a renamed layer: its weights would be silently left out of the model
    _with_extra_tensors(tmp_path / "m", ["bert.encoder.layer.0.attn.q.weight", "bert.extra.bias"])
    assert main(["encode", "--model", str(tmp_path / "m"), "relay"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"warning: {tmp_path / 'm'}: 2 tensors of the checkpoint fit no part of the masked-LM and are "
                   "not used (bert.encoder.layer.0.attn.q.weight, bert.extra.bias)"]


def test_a_silent_hub_sends_transformers_loads_to_the_cache_alone():
    # without local_files_only, transformers' own retries (~50 s offline) came back
    assert hub.HubAccess("org/model", "[Errno -2]").kwargs == {"local_files_only": True}
    assert hub.HubAccess("org/model", None).kwargs == {}


def test_a_relative_local_folder_is_never_probed_as_a_hub_id(tmp_path, monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub, "get_session", lambda: pytest.fail("asked the Hub"))
    (tmp_path / "org" / "model").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert hub_unreachable("org/model") is None


@pytest.mark.parametrize("name", [".hidden-model", "no/such/model"])
def test_names_meant_as_local_paths_are_refused_as_missing_folders_not_asked_of_the_hub(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(hub, "hub_unreachable", lambda name: pytest.fail("asked the Hub"))
    with pytest.raises(ModelLoadError, match=f"^model directory not found: {re.escape(name)} \\(did you mean x\\?\\)$"):
        hub.model_directory(name, hint=" (did you mean x?)")


def test_a_file_given_as_the_model_is_no_model_directory(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="^not a model directory: "):
        hub.model_directory(str(tmp_path / "model.safetensors"))


def test_code_files_are_fetched_only_for_a_model_trusted_to_run_them(tmp_path, monkeypatch):
    import huggingface_hub

    asked = []
    monkeypatch.setattr(hub, "hub_unreachable", lambda name: None)
    monkeypatch.setattr(huggingface_hub, "snapshot_download",
                        lambda repo_id, allow_patterns, local_files_only: asked.append(allow_patterns) or str(tmp_path))
    assert hub.model_directory("org/m") == hub.model_directory("org/m", trust_remote_code=True) == tmp_path
    assert asked == [hub.MODEL_FILES, hub.MODEL_FILES + ["*.py"]]


def _model_folder(path, config: dict | str, weights=("model.safetensors",)):
    """What check_model_directory looks at: file names and config.json, no weights read."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    (path / "vocab.txt").write_text("[PAD]\n")
    for name in weights:
        (path / name).write_bytes(b"")
    return path


def test_only_an_unknown_model_type_with_an_auto_map_asks_for_code(tmp_path):
    evil = {"model_type": "evilbert", "auto_map": {"AutoModelForMaskedLM": "modeling_evil.EvilModel"}}
    assert hub.remote_code(_model_folder(tmp_path / "evil", evil)) is not None
    # transformers names an unknown type without code itself; a damaged file is the loaders' to name
    assert hub.remote_code(_model_folder(tmp_path / "new", {"model_type": "newbert"})) is None
    assert hub.remote_code(_model_folder(tmp_path / "damaged", "{not json")) is None
    assert hub.remote_code(_model_folder(tmp_path / "deep", "[" * 100_000)) is None
    hub.check_model_directory(tmp_path / "evil", "evil", trust_remote_code=True)  # trusted: no refusal
    with pytest.raises(ModelLoadError, match="needs Python code of its own"):
        hub.check_model_directory(tmp_path / "evil", "evil")


@pytest.mark.parametrize("weights", [
    ("model.safetensors", "pytorch_model.bin"),  # both formats: the safetensors are loaded
    ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "pytorch_model.bin"),
])
def test_safetensors_model_weights_beside_pickles_are_enough(tmp_path, weights):
    hub.check_model_directory(_model_folder(tmp_path / "m", {"model_type": "bert"}, weights), "m")


def test_sharded_pickle_weights_are_named_as_pickles(tmp_path):
    shards = ("pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin")
    with pytest.raises(ModelLoadError, match=r"only pickle weights \(pytorch_model-00001-of-00002\.bin, "):
        hub.check_model_directory(_model_folder(tmp_path / "m", {"model_type": "bert"}, shards), "m")


def test_a_run_folder_hint_needs_a_model_in_its_final(tmp_path):
    (tmp_path / "run" / "final").mkdir(parents=True)  # a run that never finished: no model to point to
    with pytest.raises(ModelLoadError, match=r"has no config.json: not a Hugging Face model directory$"):
        hub.check_model_directory(tmp_path / "run", "run")


def test_a_byte_level_bpe_tokenizer_of_vocab_and_merges_is_tokenizer_files(tmp_path):
    (tmp_path / "vocab.json").write_text("{}")
    (tmp_path / "merges.txt").write_text("")
    hub.require_tokenizer_files(tmp_path, "m")


def test_a_tilde_folder_without_weights_gets_no_hub_advice(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "m").mkdir()
    assert hub.missing_weights("~/m", []) == "~/m holds no model weights (no *.safetensors file beside its config.json)"


def test_a_local_folder_is_recorded_by_its_absolute_path_however_spelt(tmp_path, monkeypatch):
    (tmp_path / "m").mkdir()
    monkeypatch.chdir(tmp_path)
    assert hub.model_reference("m") == hub.model_reference("m/") == hub.model_reference("./m") == str(tmp_path / "m")
    assert hub.model_reference("org/model") == "org/model"


def test_transformers_logging_is_as_it_was_after_a_quiet_block():
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    try:
        for was_on in (False, True):
            hf_logging.set_verbosity_info()
            (hf_logging.enable_progress_bar if was_on else hf_logging.disable_progress_bar)()
            with hub.quiet_transformers():
                assert hf_logging.get_verbosity() == hf_logging.ERROR and not hf_logging.is_progress_bar_enabled()
            assert hf_logging.get_verbosity() == hf_logging.INFO and hf_logging.is_progress_bar_enabled() == was_on
    finally:
        hf_logging.set_verbosity(verbosity)
        (hf_logging.enable_progress_bar if bars else hf_logging.disable_progress_bar)()


def test_the_unused_weights_warning_names_three_and_counts_all(recwarn):
    hub.warn_unused_weights("m", ["d", "c", "b", "a", "bert.pooler.dense.weight", "cls.seq_relationship.bias"])
    hub.warn_unused_weights("m", ["c", "b", "a"])
    # a masked-LM head tensor it does not read is no pooler: said
    hub.warn_unused_weights("m", ["cls.predictions.transform.extra.weight"])
    assert [str(w.message) for w in recwarn] == [
        "m: 4 tensors of the checkpoint fit no part of the masked-LM and are not used (a, b, c, ...)",
        "m: 3 tensors of the checkpoint fit no part of the masked-LM and are not used (a, b, c)",
        "m: 1 tensor of the checkpoint fits no part of the masked-LM and is not used "
        "(cls.predictions.transform.extra.weight)",
    ]


def test_a_silent_hub_fetches_from_the_cache_alone_and_the_retry_log_level_is_put_back(tmp_path, monkeypatch):
    import logging

    import huggingface_hub

    asked = []

    def snapshot_download(repo_id, allow_patterns, local_files_only):
        asked.append(local_files_only)
        raise OSError("no cached copy")

    _silent_hub(monkeypatch)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    retries = logging.getLogger("huggingface_hub.utils._http")
    level = retries.level
    retries.setLevel(logging.INFO)  # a level of the user's, not whatever earlier tests left
    try:
        with pytest.raises(ModelLoadError, match="local cache holds no copy"):
            hub.model_directory("org/adapted")
        assert asked == [True] and retries.level == logging.INFO
    finally:
        retries.setLevel(level)


def test_a_config_json_that_is_no_object_asks_for_no_code(tmp_path):
    # the loaders name what is wrong with it; the remote-code check must not fail first with a traceback
    for damaged in ('["auto_map"]', '"auto_map"', "3"):
        folder = _model_folder(tmp_path / "m", damaged)
        assert hub.remote_code(folder) is None
        hub.check_model_directory(folder, "m")


def test_a_variant_or_adapter_safetensors_alone_is_named_not_loaded_as_the_model(tmp_path):
    # transformers loads neither by default; its own message was followed by the misleading
    # hint of a missing MLM head, and "no *.safetensors file" would be untrue
    for files in (("model.fp16.safetensors",), ("adapter_model.safetensors", "model.fp16.safetensors")):
        with pytest.raises(ModelLoadError, match=r"^m has no model.safetensors \(nor model-\*\.safetensors shards\), "
                                                 rf"only {re.escape(', '.join(files))}: a variant's"):
            hub.check_model_directory(_model_folder(tmp_path / "m", {"model_type": "bert"}, files), "m")
    with pytest.raises(ModelLoadError, match=r"only pickle weights \(pytorch_model\.bin\)"):
        hub.check_model_directory(_model_folder(tmp_path / "m", {"model_type": "bert"}, ("pytorch_model.bin",)), "m")


def test_a_local_folder_is_recorded_by_its_real_path_through_dot_dots_and_links(tmp_path, monkeypatch):
    (tmp_path / "m").mkdir()
    (tmp_path / "runs").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "m")
    monkeypatch.chdir(tmp_path)
    real = str(tmp_path / "m")
    assert hub.model_reference("runs/../m") == hub.model_reference("link") == real
    assert hub.model_reference(tmp_path / "link") == real


def test_an_existing_folder_named_like_a_bare_hub_id_is_the_folder(tmp_path, monkeypatch):
    # `--model mymodel` from the folder holding it: no snapshot of a Hub repository "mymodel"
    import huggingface_hub

    (tmp_path / "mymodel").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **k: pytest.fail("asked the Hub"))
    assert hub.local_model_path("mymodel") == hub.model_directory("mymodel") == Path("mymodel")
    assert hub.local_model_path("org-model") is None  # a bare name that is no folder here: a Hub id
