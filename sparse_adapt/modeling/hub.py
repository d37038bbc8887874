"""How a model name that is no local directory reaches the Hugging Face Hub.

transformers resolves a Hub id through huggingface_hub, which retries a failed connection five
times with backoff (~24 s); ``AutoTokenizer`` alone asks for ``config.json`` twice. Offline, a
mistyped or unreachable id therefore cost ~50 s and ~20 log lines before its error. Here one
request without retries first asks whether the Hub answers at all. When it does not, the
model comes from the local Hugging Face cache, as transformers itself would take it after its
retries (with a warning that the copy may be older than the Hub's), or is refused at once.
Any answer, even 404 or 401, leaves the rest to huggingface_hub and its messages.

A SPLADE model is fetched as a snapshot of its files (:func:`model_directory`) and then loaded
as the local directory it now is: the same checks, and the ``sparse_adapt.json`` or
sentence-transformers settings that loading a Hub id through transformers alone would lose (a
pushed adapted model kept its lengths and domain tokens only when loaded from a path).
"""

from __future__ import annotations

import json
import logging
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Iterator

from sparse_adapt.errors import ModelLoadError, SparseAdaptWarning, first_line

# The model's own weights, whole or sharded: what a snapshot fetches and a local folder must hold.
WEIGHT_FILES = ("model.safetensors", "model-*.safetensors")
# The files of a model a snapshot fetches: configs and tokenizer files (``*.json``, WordPiece's
# ``vocab.txt``, BPE's ``merges.txt``, SentencePiece's ``*.model``, sentence-transformers' module
# configs) and the top-level safetensors weights (sharded too); never pickles, ONNX exports or
# checkpoints in subfolders, which a repository may also hold at many times the size.
MODEL_FILES = ["*.json", "*.txt", "*.model", *WEIGHT_FILES]
# Remote code, fetched only when the user trusts it.
CODE_FILES = ["*.py"]

# Seconds the one probe waits for a connection and an answer: a black-holed network (no
# refusal, no DNS error) would otherwise hang here as long as transformers' retries.
PROBE_TIMEOUT_S = 10.0


class HubUnreachableWarning(SparseAdaptWarning):
    """A Hub id loaded from the local cache because the Hub did not answer."""


@contextmanager
def quiet_hub_retries() -> Iterator[None]:
    """Hold back huggingface_hub's line per retried request while a model loads: a failed
    load becomes one error line of ours, naming what failed."""
    hub_http = logging.getLogger("huggingface_hub.utils._http")
    level = hub_http.level
    hub_http.setLevel(logging.ERROR)
    try:
        yield
    finally:
        hub_http.setLevel(level)


def hub_unreachable(name: str) -> str | None:
    """Why the Hub cannot be asked for ``name`` (one request, no retries), or None: it answered,
    ``name`` is a local path, the name is no valid Hub id (transformers says so), or offline
    mode is set (``HF_HUB_OFFLINE``: transformers goes to the cache without asking)."""
    from huggingface_hub import constants, get_session, hf_hub_url

    if Path(name).exists() or constants.HF_HUB_OFFLINE:
        return None
    try:
        url = hf_hub_url(name, constants.CONFIG_NAME)
    except ValueError:  # HFValidationError, an invalid repo id: transformers' own error names the rule it breaks
        return None
    try:
        get_session().head(url, timeout=PROBE_TIMEOUT_S)
    except Exception as e:  # any transport failure (DNS, refused, timeout, proxy): no answer
        return first_line(e)
    return None


@dataclass(frozen=True)
class HubAccess:
    """How to load one name: ``kwargs`` for ``from_pretrained`` and what to say if it fails."""

    name: str
    unreachable: str | None  # why the Hub did not answer; None: ask it as usual

    @classmethod
    def probe(cls, name: str) -> "HubAccess":
        return cls(name, hub_unreachable(name))

    @property
    def kwargs(self) -> dict:
        return {"local_files_only": True} if self.unreachable else {}

    def loaded(self) -> None:
        """Call after a load succeeded: a cached copy while the Hub is unreachable is said."""
        if self.unreachable:
            warnings.warn(
                f"the Hugging Face Hub did not answer ({self.unreachable}); {self.name!r} was loaded from the "
                "local cache, which may be older than the Hub's copy", HubUnreachableWarning, stacklevel=3,
            )

    def failure(self, detail: str) -> str:
        """Why loading failed, for an error line: the unreachable Hub when it was the cause."""
        if self.unreachable:
            return (f"the Hugging Face Hub did not answer ({self.unreachable}) and the local cache holds no copy; "
                    "check the name or the network, or give a local directory")
        return detail


@contextmanager
def hub_loading(name: str) -> Iterator[HubAccess]:
    """Around a transformers ``from_pretrained`` of ``name``: the probe first (pass
    ``hub.kwargs`` on), huggingface_hub's retry log held back, and a cached copy said afterwards."""
    hub = HubAccess.probe(name)
    with quiet_hub_retries():
        yield hub
    hub.loaded()


def user_path(name: str | Path) -> Path:
    """``name`` with a leading ``~`` or ``~user`` expanded ("~/m" quoted, or a name from Python:
    no shell expanded it). pathlib raises RuntimeError for a user this machine does not know:
    that was a traceback, where every other unusable model name is one line."""
    try:
        return Path(name).expanduser()
    except RuntimeError:
        raise ModelLoadError(f"{name}: no home directory for {str(name).split('/', 1)[0]!r} on this machine "
                             "(a ~user path names a user account)") from None


def local_model_path(name: str) -> Path | None:
    """``name`` as a local path when it exists or is meant as one (None: a Hub id).

    A Hub id is ``name`` or ``org/name``; a missing path whose parent directory exists here
    (``models/mine``) is a typo of a local one, not worth asking the Hub."""
    path = user_path(name)
    try:
        exists = path.exists()
    except OSError as e:  # a name over 255 bytes: even exists() raises
        raise ModelLoadError(f"not a usable model path ({e.strerror}): {name:.80}...") from None
    if exists or name.startswith((".", "/", "~")) or name.count("/") > 1 or ("/" in name and path.parent.is_dir()):
        return path
    return None


def model_directory(name: str, trust_remote_code: bool = False, hint: str = "") -> Path:
    """Where the files of ``name`` are: the local directory, or the snapshot of a Hub id in the
    Hugging Face cache (fetched, or taken from the cache with a warning when the Hub does not
    answer). A missing local path or an unknown id is a :class:`ModelLoadError` (``hint``
    appended: builtin.builtin_hint's "did you mean", which this module cannot import)."""
    if not name.strip():  # Path("") is the working directory
        raise ModelLoadError("the model name is empty")
    path = local_model_path(name)
    if path is not None:
        if not path.exists():
            raise ModelLoadError(f"model directory not found: {name}{hint}")
        if not path.is_dir():
            raise ModelLoadError(f"not a model directory: {name}")
        return path
    from huggingface_hub import snapshot_download

    patterns = MODEL_FILES + (CODE_FILES if trust_remote_code else [])
    with hub_loading(name) as hub:
        try:
            snapshot = snapshot_download(name, allow_patterns=patterns, local_files_only=bool(hub.unreachable))
        except Exception as e:  # unknown or gated id, no cached copy, a failed transfer: one line
            raise ModelLoadError(f"cannot load {name!r}: no such local directory, and as a Hugging Face Hub id: "
                                 f"{hub.failure(first_line(e))}{hint}") from None
    return Path(snapshot)


def remote_code(path: Path) -> str | None:
    """What in ``path/config.json`` asks for code shipped with the model (a model type transformers
    does not know, mapped to its own classes by ``auto_map``); None when transformers' classes do."""
    from transformers import CONFIG_MAPPING

    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None  # the loaders say what is wrong with the file
    if not isinstance(config, dict) or not config.get("auto_map") or config.get("model_type") in CONFIG_MAPPING:
        return None
    return f"model_type {str(config.get('model_type'))[:40]!r} with auto_map {', '.join(sorted(config['auto_map']))[:80]}"


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' progress bars ("Loading weights", "Writing model shards") and its load
    report off for the block, as they were after it: a training run saves a checkpoint per
    stage, and in a notebook or a log each save printed a bar between the run's lines; the
    load report's "MISSING" keys are checked by the caller, which says them in one line, and
    its "UNEXPECTED" ones go through :func:`warn_unused_weights`."""
    from transformers.utils import logging as hf_logging

    bars, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


class UnusedWeightsWarning(SparseAdaptWarning):
    """Tensors of a checkpoint that no part of the masked-LM took: transformers drops them."""


# Parts of a pretraining checkpoint a masked-LM has no place for, by design: BERT's pooler and
# next-sentence head (bert-base-uncased ships both). Anything else left over is a layout the
# model class does not read (another family's names, a renamed head), said in one warning.
UNUSED_BY_DESIGN = ("pooler.", "cls.seq_relationship.")


def warn_unused_weights(name: str, unexpected: object) -> None:
    """One warning naming the checkpoint tensors transformers left unused (its load report,
    which :func:`quiet_transformers` hides along with the progress bars)."""
    unused = sorted(k for k in (unexpected or ()) if not any(part in k for part in UNUSED_BY_DESIGN))
    if unused:
        one = len(unused) == 1
        count = "1 tensor of the checkpoint fits" if one else f"{len(unused)} tensors of the checkpoint fit"
        warnings.warn(f"{name}: {count} no part of the masked-LM and {'is' if one else 'are'} not used "
                      f"({', '.join(unused[:3])}{', ...' if len(unused) > 3 else ''})",
                      UnusedWeightsWarning, stacklevel=3)


def missing_weights(name: str, pickles: list[str], others: list[str] = ()) -> str:
    """Why the model ``name`` (a folder, or a Hub id's snapshot) has no weights to load;
    ``others`` are its safetensors files under names transformers does not load by default."""
    resave = "save_pretrained(..., safe_serialization=True)"
    if pickles:
        return (f"{name} holds only pickle weights ({', '.join(pickles)}); sparse-adapt loads safetensors only: "
                f"re-save the model with {resave}")
    if others:
        return (f"{name} has no model.safetensors (nor model-*.safetensors shards), only {', '.join(others)}: "
                f"a variant's or an adapter's file is not loaded as the model's weights; re-save the model "
                f"with {resave}")
    if user_path(name).is_dir():
        return f"{name} holds no model weights (no *.safetensors file beside its config.json)"
    # MODEL_FILES fetches no pickle: a Hub repository of *.bin weights alone arrives weightless.
    return (f"{name} holds no model weights (no *.safetensors file beside its config.json); from the Hub only "
            f"safetensors weights are fetched, never pickles: a repository with *.bin weights alone needs "
            f"converting (load it, then {resave})")


def model_reference(name: str | Path) -> str:
    """A model as records name it: a local folder by its absolute path (a relative one says
    nothing once read from elsewhere, and `model` and `model/` are one folder), a built-in or
    Hub name as given."""
    local = user_path(name)
    return str(local.resolve()) if local.is_dir() else str(name)


# Files a tokenizer is read from. Without any, transformers 5 builds one of the special tokens
# alone (every word [UNK]): mine-terms then mined 1 term of 9 and exited 0, and `base` saved a
# model every other command refused as not its tokenizer's.
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model", "spiece.model",
                   "tokenizer.model", "sentencepiece.model", "spm.model")


def require_tokenizer_files(path: Path, name: str) -> None:
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        raise ModelLoadError(f"{name} has no tokenizer files (none of {', '.join(TOKENIZER_FILES)}): save the "
                             "model's tokenizer beside it (tokenizer.save_pretrained(DIR))")


ONNX_META_FILE = "sparse_adapt_onnx.json"  # what `sparse-adapt onnx` writes beside its graph


def check_model_directory(path: Path, name: str, trust_remote_code: bool = False) -> None:
    """What a model directory must hold before transformers reads it, each said in one line:
    ``config.json``, safetensors weights, no code of its own unless trusted, and
    tokenizer files. Cheap (no weights read): ``adapt`` runs it before mining."""
    if not (path / "config.json").is_file():
        inside = path / "final"  # a `train --out` or `adapt --out` folder given for its model
        hint = f"; the run's model is {inside}" if (inside / "config.json").is_file() else ""
        if (path / ONNX_META_FILE).is_file():
            hint = ("; it is an ONNX export (`sparse-adapt onnx`): `search --onnx` takes it, and "
                    "sparse_adapt.modeling.onnx.OnnxSpladeEncoder from Python")
        raise ModelLoadError(f"{name} has no config.json: not a Hugging Face model directory{hint}")
    pickles = sorted(p.name for p in path.glob("*.bin"))
    # Said before transformers' own message, which for a pickle-only or weightless directory
    # reads like a missing MLM head. Only the model's own safetensors names count: an adapter's
    # file or a variant's (model.fp16.safetensors) is no weights transformers loads by default.
    safetensors = sorted(p.name for p in path.glob("*.safetensors"))
    if not any(fnmatchcase(n, w) for n in safetensors for w in WEIGHT_FILES):
        raise ModelLoadError(missing_weights(name, pickles, safetensors))
    remote = remote_code(path) if not trust_remote_code else None
    if remote:
        raise ModelLoadError(f"{name} needs Python code of its own ({remote}); sparse-adapt runs none unless "
                             "told to (trust_remote_code=True; --trust-remote-code where a command offers it)")
    require_tokenizer_files(path, name)
