"""What a saved model directory holds: the files a save writes, which a later save replaces,
and everything else, which it keeps.

``SpladeEncoder.save_pretrained`` replaces a directory whole (atomically), so a save into an
earlier model's directory had deleted what else was there: the model card a run wrote, the
``recommended_training.json`` that tells ``adapt`` the base's settings (a later ``adapt
--base`` then trained with others, silently), a user's notes or checkpoints. The files a save
owns are replaced, so an old save's weight shards or sentence-transformers files do not
outlive it; the rest is carried into the new directory.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
from pathlib import Path

from sparse_adapt.modeling.interop import MODEL_CONFIG, MODULES_FILE, POOLING_DIR, TRANSFORMER_CONFIG
from sparse_adapt.modeling.settings import SETTINGS_FILE

# Written by transformers' save_pretrained (weights, shards and their index, configs, every
# tokenizer format) and by ours (settings, sentence-transformers module files).
OWNED = (
    "*.safetensors", "*.bin", "*.index.json", "config.json", "generation_config.json", "tokenizer*.json",
    "vocab.txt", "vocab.json", "merges.txt", "*.model", "added_tokens.json", "special_tokens_map.json",
    "chat_template.*", SETTINGS_FILE, MODULES_FILE, MODEL_CONFIG, TRANSFORMER_CONFIG, POOLING_DIR,
)


def owned(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in OWNED)


def keep_beside(old: Path, new: Path) -> list[str]:
    """Carry into ``new`` what ``old`` (the directory a save replaces) holds besides a model's
    own files and hidden entries (a lock, a killed write's temporary); returns their names.
    Files are hard-linked where the filesystem allows (a user's checkpoints need no second copy)."""
    if not old.is_dir():
        return []
    kept = []
    for entry in sorted(old.iterdir()):
        if entry.name.startswith(".") or owned(entry.name) or (new / entry.name).exists():
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, new / entry.name, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(entry, new / entry.name)
        kept.append(entry.name)
    return kept


def _link_or_copy(src: str | Path, dst: str | Path) -> None:
    if not Path(src).is_symlink():  # a link is copied as a link
        try:
            os.link(src, dst)
            return
        except OSError:  # another filesystem, or one without hard links
            pass
    shutil.copy2(src, dst, follow_symlinks=False)
