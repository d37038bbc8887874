"""Terminal output of the CLI: the consoles and the rich progress bars behind library hooks."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
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
