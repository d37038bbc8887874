"""The one positive-integer check every count option goes through."""

from __future__ import annotations

import re

import numpy as np
import pytest

from sparse_adapt.errors import ConfigError, first_line, require_positive_int
from sparse_adapt.modeling.vectors import check_max_active_dims
from sparse_adapt.retrieval.export import ExportConfig
from sparse_adapt.retrieval.feedback import Feedback


@pytest.mark.parametrize("value", [1, 7, 10**12, np.int64(8)])  # a count read from an array is an integer too
def test_positive_ints_pass(value):
    require_positive_int(value, "k")


@pytest.mark.parametrize("value", [0, -3, True, False, 1.0, 2.5, "3", None])
def test_everything_else_is_refused_naming_the_value(value):
    with pytest.raises(ValueError, match="^" + re.escape(f"k must be a positive integer, got {value!r}") + "$"):
        require_positive_int(value, "k")


@pytest.mark.parametrize(
    "make, error, what",
    [
        (lambda v: Feedback(docs=v), ValueError, "feedback docs"),
        (lambda v: Feedback(terms=v), ValueError, "feedback terms"),
        (lambda v: ExportConfig(scale=v), ConfigError, "scale"),
        (lambda v: ExportConfig(batch_size=v), ConfigError, "batch_size"),
        (check_max_active_dims, ValueError, "max_active_dims"),
    ],
)
def test_every_count_option_refuses_a_bool_and_zero(make, error, what):
    for bad in (True, 0):
        with pytest.raises(error, match=f"{what} must be a positive integer, got {bad!r}"):
            make(bad)
    make(2)


def test_a_one_line_error_keeps_the_first_line_that_says_something():
    # a library's message may open with a line break; one with nothing to say is named by its type
    raised = OSError("\n  cannot open vocab.txt\nTraceback (most recent call last):")
    assert first_line(raised) == "cannot open vocab.txt"
    assert first_line(KeyError()) == "KeyError" and first_line(ValueError(" \n")) == "ValueError"


def test_require_texts_raises_only_the_error_types_its_docstring_names():
    # A caller catches what the docstring names: an error type it leaves out escapes their handler.
    import builtins

    from sparse_adapt.errors import require_texts

    named = {getattr(builtins, n) for n in re.findall(r"``(\w+Error)``", require_texts.__doc__)}
    raised = set()
    for bad in (3, ["a", None], ["a", "\ud800"]):
        with pytest.raises(Exception) as caught:
            require_texts(bad)
        raised.add(type(caught.value))
    assert raised <= named, raised - named


def test_the_top_level_modules_docs_refer_to_names_and_files_that_exist():
    # "see :func:`x`" and "(``cli/output.py``)" send a reader somewhere: a rename must take them along.
    import importlib
    import importlib.util
    from pathlib import Path

    package = Path(importlib.import_module("sparse_adapt").__file__).parent
    names = ("atomic", "defaults", "destination", "device", "errors", "installed", "lock", "progress", "stops",
             "__init__", "__main__")
    for name in names:
        module = importlib.import_module("sparse_adapt" if name == "__init__" else f"sparse_adapt.{name}")
        texts = [module.__doc__ or ""] + [getattr(o, "__doc__", None) or "" for o in vars(module).values()
                                          if getattr(o, "__module__", None) == module.__name__]
        text = "\n".join(texts) + "\n" + "\n".join(re.findall(r"#.*", Path(module.__file__).read_text()))
        for ref in re.findall(r":(?:func|class|data|mod|meth):`([\w.]+)`", text):
            head, _, attr = ref.rpartition(".")
            found = hasattr(module, ref) or bool(head and hasattr(importlib.import_module(head), attr))
            if not found and "." in ref:  # a module named whole (:mod:`sparse_adapt.atomic`)
                found = importlib.util.find_spec(ref) is not None
            assert found, (module.__name__, ref)
        for path in re.findall(r"``([\w/]+\.py)``", text):
            assert (package / path).is_file() or (package.parent / path).is_file(), (module.__name__, path)
