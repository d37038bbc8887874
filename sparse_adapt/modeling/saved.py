"""What a saved model directory holds: the files a save writes, which a later save replaces,
and everything else, which it keeps.

``SpladeEncoder.save_pretrained`` replaces a directory whole (atomically), so a save into an
earlier model's directory had deleted what else was there: the model card a run wrote, the
``recommended_training.json`` that tells ``adapt`` the base's settings (a later ``adapt
--base`` then trained with others, silently), a user's notes or checkpoints. The files a save
owns are replaced, so an old save's weight shards or sentence-transformers files do not
outlive it; the rest is carried into the new directory.

A save owns the names transformers and sentence-transformers give their files, not every
``*.safetensors``, ``*.bin`` or ``*.model``: those globs had also taken a user's own
``embeddings.safetensors``, ``optimizer.bin`` or ``sp.model`` kept beside the model.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from sparse_adapt.modeling.interop import MODEL_CONFIG, MODULES_FILE, POOLING_DIR, TRANSFORMER_CONFIG
from sparse_adapt.modeling.settings import SETTINGS_FILE

# Written by transformers' save_pretrained (configs, every tokenizer format; weights below)
# and by ours (settings, sentence-transformers module files).
OWNED = frozenset((
    "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json",
    "merges.txt", "added_tokens.json", "special_tokens_map.json", "chat_template.jinja", "chat_template.json",
    "additional_chat_templates",
    # sentencepiece vocabularies, as T5/ALBERT/XLNet (spiece), XLM-R/CamemBERT (sentencepiece.bpe),
    # Llama-style (tokenizer) and DeBERTa-v2 (spm) tokenizers name them
    "spiece.model", "sentencepiece.bpe.model", "sentencepiece.model", "tokenizer.model", "spm.model",
    SETTINGS_FILE, MODULES_FILE, MODEL_CONFIG, TRANSFORMER_CONFIG, POOLING_DIR,
))
# A model's weights in any framework transformers saves, whole or sharded, and their shard
# index: an older save's (even one in another format) would outlive it as a second, stale model.
WEIGHTS = re.compile(r"(pytorch_model|model|tf_model|flax_model)(-\d+-of-\d+)?\.(bin|safetensors|h5|msgpack)"
                     r"(\.index\.json)?")


def owned(name: str) -> bool:
    return name in OWNED or WEIGHTS.fullmatch(name) is not None


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
