"""Progress and messages from library code, as plain callbacks.

Library functions (training, export, report) never print and never take a console or a
progress-bar object: they take :class:`Hooks`. The CLI passes hooks that draw rich
progress bars (``sparse_adapt/cli/output.py``); a notebook or a service passes its own, or
nothing (:data:`SILENT`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol


class Task(Protocol):
    """One unit of work with a known number of steps."""

    def advance(self, steps: int = 1, description: str | None = None) -> None: ...


class _NullTask:
    def advance(self, steps: int = 1, description: str | None = None) -> None:
        pass


def _no_message(text: str) -> None:
    pass


def _no_task(description: str, total: int | None) -> Task:
    return _NullTask()


@dataclass(frozen=True)
class Hooks:
    # One human-readable line (plain text, no markup), e.g. an epoch summary.
    message: Callable[[str], None] = field(default=_no_message)
    # Start a task of ``total`` steps (None: unknown); the returned object is advanced.
    task: Callable[[str, int | None], Task] = field(default=_no_task)


SILENT = Hooks()


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 document``, ``3 documents``: a count in a message, with its noun in the right number."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def signed(x: float, digits: int = 3) -> str:
    """``+0.012``, ``-0.250``: a difference with its sign; one that rounds to zero is ``+0.000``,
    never ``-0.000``."""
    value = round(float(x), digits) + 0.0  # + 0.0 turns -0.0 into 0.0
    return f"{value:+.{digits}f}"
