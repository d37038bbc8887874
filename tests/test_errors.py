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
