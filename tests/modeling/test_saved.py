"""What a save into a model's directory carries over (sparse_adapt/modeling/saved.py): a user's
files as hard links, links as links, and none of an old save's own files."""

from __future__ import annotations

import errno
import os

from sparse_adapt.modeling import saved
from sparse_adapt.modeling.saved import keep_beside


def _old_and_new(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    return old, new


def test_a_users_files_are_carried_as_hard_links_and_links_as_links(tmp_path):
    old, new = _old_and_new(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "big.bin").write_text("a dataset")
    (old / "notes.txt").write_text("mine")
    (old / "latest").symlink_to("notes.txt")  # relative: still right inside the new directory
    (old / "data").symlink_to(elsewhere)  # a link to a folder: carried as the link, not its contents
    (old / "checkpoints" / "step-1").mkdir(parents=True)
    (old / "checkpoints" / "step-1" / "weights.pt").write_text("weights")
    (old / "checkpoints" / "last").symlink_to("step-1")  # inside a carried folder too: a link, not a second copy
    (old / "pytorch_model.bin").write_text("an old save's weights")  # the model's own: replaced, not carried
    (old / "tokenizer_config.json").write_text("{}")
    (old / ".lock").write_text("1")
    assert keep_beside(old, new) == ["checkpoints", "data", "latest", "notes.txt"]
    assert sorted(p.name for p in new.iterdir()) == ["checkpoints", "data", "latest", "notes.txt"]
    assert (new / "notes.txt").stat().st_ino == (old / "notes.txt").stat().st_ino  # no second copy
    assert (new / "latest").is_symlink() and os.readlink(new / "latest") == "notes.txt"
    assert (new / "data").is_symlink() and os.readlink(new / "data") == str(elsewhere)
    assert (new / "checkpoints").is_dir() and not (new / "checkpoints").is_symlink()
    weights = ("checkpoints", "step-1", "weights.pt")
    assert new.joinpath(*weights).stat().st_ino == old.joinpath(*weights).stat().st_ino
    assert (new / "checkpoints" / "last").is_symlink() and os.readlink(new / "checkpoints" / "last") == "step-1"


def test_what_the_new_save_wrote_is_never_replaced_by_the_old(tmp_path):
    old, new = _old_and_new(tmp_path)
    (old / "README.md").write_text("the old card")
    (new / "README.md").write_text("the new card")
    assert keep_beside(old, new) == []
    assert (new / "README.md").read_text() == "the new card"


def test_without_hard_links_the_files_are_copied(tmp_path, monkeypatch):
    # Another filesystem (EXDEV) or one without hard links: a copy, not a failed save.
    old, new = _old_and_new(tmp_path)
    (old / "notes.txt").write_text("mine")
    (old / "runs").mkdir()
    (old / "runs" / "a.txt").write_text("a")

    def refuse(src, dst, *args, **kwargs):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(saved.os, "link", refuse)
    assert keep_beside(old, new) == ["notes.txt", "runs"]
    assert (new / "notes.txt").read_text() == "mine" and (new / "runs" / "a.txt").read_text() == "a"
    assert (new / "notes.txt").stat().st_ino != (old / "notes.txt").stat().st_ino


def test_a_save_over_an_older_pytorch_bin_model_leaves_no_stale_weights(tiny_bert, tmp_path):
    # transformers prefers model.safetensors, but a reader given pytorch_model.bin (or a tool
    # listing the folder) would take the older model's weights for this one's.
    path = tiny_bert.save_pretrained(tmp_path / "m")
    (path / "pytorch_model.bin").write_text("an older save's weights")
    (path / "pytorch_model.bin.index.json").write_text("{}")
    tiny_bert.save_pretrained(path)
    assert not (path / "pytorch_model.bin").exists() and not (path / "pytorch_model.bin.index.json").exists()
    assert (path / "model.safetensors").is_file()


def test_a_users_weights_like_files_are_kept_and_only_transformers_names_are_the_models(tmp_path):
    # A user's own tensors, optimiser state or sentencepiece model beside the model are theirs:
    # only the names transformers gives a model's weights, shards, index and tokenizer are replaced.
    old, new = _old_and_new(tmp_path)
    # a backup named after the weights is the user's too: only a whole weights name is the model's
    mine = ["embeddings.safetensors", "optimizer.bin", "sp.model", "training_args.bin", "eval.index.json",
            "tokenizer_notes.json", "model_v1.safetensors", "model.safetensors.bak", "pytorch_model.bin.orig"]
    # a Hub folder's tokenizer files (vocab.json and merges.txt of a BPE, DeBERTa-v2's spm.model,
    # added_tokens.json, which a later load reads as tokens), generation and sentence-transformers configs
    model = ["model.safetensors", "model-00001-of-00002.safetensors", "model.safetensors.index.json",
             "pytorch_model.bin", "pytorch_model-00002-of-00002.bin", "pytorch_model.bin.index.json", "tf_model.h5",
             "flax_model.msgpack", "spiece.model", "sentencepiece.bpe.model", "tokenizer.model", "chat_template.jinja",
             "vocab.json", "merges.txt", "spm.model", "added_tokens.json", "generation_config.json", "modules.json"]
    for name in mine + model:
        (old / name).write_text(name)
    assert keep_beside(old, new) == sorted(mine)
    assert sorted(p.name for p in new.iterdir()) == sorted(mine)


def test_a_save_keeps_a_users_tensors_in_the_models_folder(tiny_bert, tmp_path):
    path = tiny_bert.save_pretrained(tmp_path / "m")
    (path / "embeddings.safetensors").write_bytes(b"my vectors")
    tiny_bert.save_pretrained(path)
    assert (path / "embeddings.safetensors").read_bytes() == b"my vectors"
    assert (path / "model.safetensors").stat().st_size > 1000


def test_every_file_a_save_of_each_family_writes_is_one_a_later_save_replaces(tiny_mlm, tmp_path):
    # A file a save writes but does not own would be carried into the next save as the user's,
    # and an old save's copy of it would outlive that save.
    path = tiny_mlm.save_pretrained(tmp_path / "m")
    assert [p.name for p in sorted(path.iterdir()) if not saved.owned(p.name)] == []
