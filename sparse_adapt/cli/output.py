"""Terminal output of the CLI: the consoles and the rich progress bars behind library hooks."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from sparse_adapt.progress import Hooks

# Help text of every --base/--model option. Spelled out rather than read from
# modeling.builtin.BUILTIN_BASES so that `--help` needs no torch import; a test checks they agree.
BASE_HELP = "Model directory, hub id or a built-in base (offline-minilm, offline-splade-tiny)."

console = Console()
err_console = Console(stderr=True)


class _RichTask:
    def __init__(self, progress: Progress, task_id) -> None:
        self.progress, self.task_id = progress, task_id

    def advance(self, steps: int = 1, description: str | None = None) -> None:
        if description is None:
            self.progress.update(self.task_id, advance=steps)
        else:
            self.progress.update(self.task_id, advance=steps, description=description)


@contextmanager
def rich_hooks(out: Console | None = None) -> Iterator[Hooks]:
    """Hooks that draw progress bars and print messages above them."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=out or console, transient=False) as progress:

        def message(text: str) -> None:
            progress.console.print(text, soft_wrap=True, markup=False, highlight=False)

        def task(description: str, total: int | None) -> _RichTask:
            return _RichTask(progress, progress.add_task(description, total=total))

        yield Hooks(message=message, task=task)


def warn(text: str) -> None:
    """One yellow ``warning:`` line on stderr (stdout stays clean for --json)."""
    err_console.print(f"[yellow]warning:[/yellow] {escape(text)}", highlight=False, soft_wrap=True)


def require_text(text: str, what: str) -> str:
    """A text argument (query, text to encode): not blank, and valid Unicode; else one error line."""
    from sparse_adapt.errors import ConfigError

    if not text.strip():
        raise ConfigError(f"the {what} is empty")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes that were not UTF-8 on the command line arrive as surrogates
        raise ConfigError(f"the {what} is not valid UTF-8: {text!r:.60}") from None
    return text


OVERWRITE_HELP = "Replace an existing output (a non-empty directory or a file) instead of refusing."
