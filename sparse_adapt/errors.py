"""Errors caused by what the user gave us. The CLI prints these as one line, exit code 2;
anything else is a bug and keeps its traceback."""

import errno
import numbers
import re

# What a write fails with when the environment, not the program, is at fault: the CLI turns
# these into one line naming the path instead of a traceback.
WRITE_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def os_errno(e: BaseException) -> int | None:
    """The OS error number behind a failed write: an ``OSError``'s own, or the one safetensors
    puts in its message ("... (os error 28)"), since its error type is no ``OSError``."""
    if isinstance(e, OSError):
        return e.errno
    if type(e).__name__ == "SafetensorError":
        found = re.search(r"os error (\d+)", str(e))
        return int(found.group(1)) if found else None
    return None


class SparseAdaptError(Exception):
    """Base of every user-facing error: its message is one line (the CLI shows a line break in
    it as ``\\n``); ``log``, when set, is another program's output, shown under that line."""

    log: str = ""


class ConfigError(SparseAdaptError, ValueError):
    """An invalid option or configuration value (unknown stage name, negative weight...)."""


class ModelLoadError(SparseAdaptError, RuntimeError):
    """A model name or directory cannot be loaded; the message says what was tried."""


class NonFiniteError(SparseAdaptError):
    """A loss, gradient, weight or model output became NaN/inf: training stops (before the step
    reaches the weights, or before a model is saved), and an encoding stops before any vector
    of it is used."""


class OutputError(SparseAdaptError):
    """An output path cannot be written: it holds the user's files, is read-only or is in use."""


def first_line(e: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none): what a
    one-line error keeps of a library's multi-line message."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


class SparseAdaptWarning(UserWarning):
    """Base of the warnings a user should read (a length lowered, a model taken from a cache);
    the CLI prints each as one ``warning:`` line."""


def require_texts(texts: object) -> list[str]:
    """``texts`` as a list of strings (one string is one text; any iterable, as
    sentence-transformers takes), else ``TypeError`` naming the first item that is no string
    (``ValueError`` for one holding an unpaired surrogate, which no tokenizer takes):
    a generator or a set had failed inside, ``None`` deep in the tokenizer, and a pair
    ``("a", "b")`` had been encoded as one sentence pair."""
    if isinstance(texts, str):
        return [texts]
    try:
        items = list(texts)
    except TypeError:
        raise TypeError(f"texts must be a string or an iterable of strings, got {type(texts).__name__}") from None
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"texts[{i}] must be a string, got {type(item).__name__}: {item!r:.60}")
        try:
            item.encode("utf-8")
        except UnicodeEncodeError as e:  # the tokenizer's own TypeError named neither the text nor the cause
            raise ValueError(f"texts[{i}] contains an unpaired surrogate ({item[e.start]!r} at character {e.start}), "
                             "which is no text: decode its bytes as UTF-8 first") from None
    return items


def require_positive_int(value: object, what: str, error: type[Exception] = ValueError) -> None:
    """Raise ``error("WHAT must be a positive integer, got VALUE")`` unless ``value`` is an integer
    >= 1 (a numpy one too: ``np.int64(8)`` from an array was refused); a bool is refused although
    Python counts it as an int (``True`` would pass as 1)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise error(f"{what} must be a positive integer, got {value!r}")
