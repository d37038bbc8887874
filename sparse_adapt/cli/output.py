"""Terminal output of the CLI: the consoles and the rich progress bars behind library hooks,
plus the help texts and options several commands share."""

from __future__ import annotations

import os
import time
import unicodedata
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

import typer
from rich.console import Console, ConsoleDimensions
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from sparse_adapt.progress import Hooks

if TYPE_CHECKING:
    from pathlib import Path

    from sparse_adapt.retrieval.feedback import Feedback

# Help text of every --base/--model option. Spelled out rather than read from
# modeling.builtin.BUILTIN_BASES so that `--help` needs no torch import; a test checks they agree.
BASE_HELP = "Model directory, hub id or a built-in base (offline-minilm, offline-splade-tiny)."

# Width of output that goes to a file or pipe (a log, CI, `| tee`). Rich lays such output out
# at its 80-column fallback, which squeezed adapt's table of groups until three rows read
# "heldout-…"; a log cannot be widened afterwards. 120 holds that table (119 columns, 120 from 10 queries a row) while
# diagnostics' panels and rules, which fill the width, stay readable (at 200 they did not).
LOG_WIDTH = 120


class LogConsole(Console):
    """A rich console that, writing to no terminal, lays out :data:`LOG_WIDTH` columns instead
    of 80 and leaves a message's line whole (a log line found by grep is the whole message). A
    terminal keeps its own width and wrapping, and ``COLUMNS`` or an explicit width still win."""

    def print(self, *objects, soft_wrap: bool | None = None, **kwargs) -> None:
        # Text only: soft wrap inside a table or panel would crop its cells instead of wrapping.
        if soft_wrap is None and not self.is_terminal and all(isinstance(o, str) for o in objects):
            soft_wrap = True
        super().print(*objects, soft_wrap=soft_wrap, **kwargs)

    def _size(self) -> ConsoleDimensions:
        size = Console.size.fget(self)
        if self._width is None and not self.is_terminal and "COLUMNS" not in self._environ:
            return ConsoleDimensions(LOG_WIDTH, size.height)
        return size

    size = property(_size, Console.size.fset)


console = LogConsole()
err_console = LogConsole(stderr=True)


# Without a terminal (a log file, CI, nohup) rich draws the bars once, at the end: a line per
# task this often, and when it completes, shows a 25-minute step is alive.
PLAIN_EVERY_S = 60.0


class _RichTask:
    def __init__(self, progress: Progress, task_id) -> None:
        self.progress, self.task_id = progress, task_id
        self.plain = not progress.console.is_terminal
        self.said = time.monotonic()

    def advance(self, steps: int = 1, description: str | None = None) -> None:
        if description is None:
            self.progress.update(self.task_id, advance=steps)
        else:
            self.progress.update(self.task_id, advance=steps, description=description)
        if self.plain:
            task = next(t for t in self.progress.tasks if t.id == self.task_id)
            now = time.monotonic()
            if task.finished or now - self.said >= PLAIN_EVERY_S:
                self.said = now
                of = f"/{task.total:g}" if task.total is not None else ""
                left = "" if task.finished else time_left(task.time_remaining)  # None without a total
                line = f"{task.description}: {task.completed:g}{of} ({task.elapsed or 0:.0f} s{left})"
                self.progress.console.print(line, markup=False, highlight=False, soft_wrap=True)


def time_left(seconds: float | None) -> str:
    """``", about N min left"`` from rich's estimate (the rate of the last 30 s of steps, so a run
    slowed by other work says so), or ``""`` while it has none: a log reader did the arithmetic."""
    if seconds is None:
        return ""
    return f", about {round(seconds / 60)} min left" if seconds >= 90 else f", about {seconds:.0f} s left"


class _Progress(Progress):
    def stop(self) -> None:
        # Rich ends a bar with no terminal by a blank line after its one final drawing; the bars
        # here are transient there (nothing drawn), so only the blank line was left: a stray line
        # on stdout at the end of every logged run, and before an error on stderr.
        if self.live.transient and not self.console.is_interactive and not self.disable:
            self.live.stop()
        else:
            super().stop()


@contextmanager
def rich_hooks(out: Console | None = None) -> Iterator[Hooks]:
    """Hooks that draw progress bars and print messages above them."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn())
    target = out or console
    # Without a terminal each step already printed its own "step: n/total (s)" lines; rich would
    # then print every bar once more at the end, a second copy of the whole run in a log.
    with _Progress(*columns, console=target, transient=not target.is_terminal) as progress:

        def message(text: str) -> None:  # a "warning: ..." line may quote a user's path or id
            progress.console.print(terminal_safe(text), soft_wrap=True, markup=False, highlight=False)

        def task(description: str, total: int | None) -> _RichTask:
            return _RichTask(progress, progress.add_task(description, total=total))

        yield Hooks(message=message, task=task)


def terminal_safe(text: str) -> str:
    """``text`` without raw control characters but line breaks and tabs: a key or an id from a
    user's file could carry an escape sequence that recolours or rewrites the terminal."""
    return "".join(c if c in "\n\t" or unicodedata.category(c) != "Cc" else repr(c)[1:-1] for c in text)


def wrote(path: object, detail: str = "") -> None:
    """The line a command ends with: ``wrote PATH DETAIL``, both shown as written (a path holding
    "[/red]" was read as Rich markup and ended the command in a traceback after its output)."""
    console.print(f"[green]wrote[/green] {escape(str(path))}{escape(detail)}")


def one_line(text: str) -> str:
    """:func:`terminal_safe` ``text`` on one line, a line break shown as ``\\n``: a file named
    ``new<LF>error: forged.jsonl`` split an error in two and forged an ``error:`` line."""
    return terminal_safe(text).replace("\n", "\\n")


def warn(text: str) -> None:
    """One yellow ``warning:`` line on stderr (stdout stays clean for --json)."""
    err_console.print(f"[yellow]warning:[/yellow] {escape(one_line(text))}", highlight=False, soft_wrap=True)


def require_text(text: str, what: str) -> str:
    """A text argument (query, text to encode): not blank, and valid Unicode; else one error line."""
    from sparse_adapt.data.reading import encodable, visible
    from sparse_adapt.errors import ConfigError

    # Invisible characters (a zero-width space pasted from a web page) are no text either.
    if not visible(text):
        raise ConfigError(f"the {what} is empty")
    if not encodable(text):  # bytes that were not UTF-8 on the command line arrive as surrogates
        raise ConfigError(f"the {what} is not valid UTF-8: {text!r:.60}")
    return text


OVERWRITE_HELP = "Replace an existing output (a non-empty directory or a file) instead of refusing."


def _file_path(value: str) -> "Path":
    """Parser of an option naming a file to write: ``--save-run runs/`` ended in a slash, which
    ``Path`` drops, so a file named ``runs`` was written where the user meant a folder."""
    from pathlib import Path

    if not value.strip():
        raise typer.BadParameter("the path is empty; give the path of a file")
    # "runs/", "runs/." and "runs/.." name folders; Path drops the slash and the dot ("runs").
    if os.path.basename(value) in ("", ".", ".."):
        folder = value.rstrip("/" + os.sep)
        example = f"{folder}/NAME" if folder else f"{value[0]}NAME"
        raise typer.BadParameter(f"{value} names a folder; give the path of a file (such as {example})")
    return Path(value)


# typer.Option(..., **FILE_PATH): `parser` alone would show the annotation's name (<Path>) in --help.
FILE_PATH = {"parser": _file_path, "metavar": "<path>"}


# torch.manual_seed takes up to 2^64 - 1 and the stages add small offsets; 2^65 had stopped
# a run with a traceback after run.json was written.
MAX_SEED = 2**63 - 1


def seed_option(help: str):
    """``--seed``, 0 to :data:`MAX_SEED`."""
    return typer.Option(0, "--seed", min=0, max=MAX_SEED, help=help)


# Rocchio pseudo-relevance feedback (``retrieval/feedback.py``): `evaluate`, `search`, `benchmark`,
# `explain`, `diagnose` and `inspect` share the tuning flags; each command says in its own words
# what --feedback does.
def feedback_option(help: str):
    return typer.Option(False, "--feedback", help=help)


FEEDBACK_OPTION = feedback_option(
    "Score --model with Rocchio pseudo-relevance feedback: a second search with each query plus "
    "a share of its first search's best documents' vectors (with --index, one built with `index --store-vectors`); "
    "the figures are the second search's."
)
FEEDBACK_DOCS_OPTION = typer.Option(None, "--feedback-docs", help="With --feedback: documents fed back (default 1).")
FEEDBACK_WEIGHT_OPTION = typer.Option(
    None, "--feedback-weight", help="With --feedback: the documents' share against the query (default 0.5)."
)
FEEDBACK_TERMS_OPTION = typer.Option(
    None, "--feedback-terms", help="With --feedback: the fed-back centroid's terms kept (default 32)."
)


def feedback_settings(on: bool, docs: int | None, weight: float | None, terms: int | None,
                      index: Path | None = None) -> Feedback | None:
    """The ``--feedback`` settings (None when off); a tuning flag without ``--feedback`` is refused,
    and so is feedback on an ``index`` built without stored vectors, before any model loads."""
    from sparse_adapt.errors import ConfigError
    from sparse_adapt.retrieval.feedback import Feedback

    given = {"--feedback-docs": docs, "--feedback-weight": weight, "--feedback-terms": terms}
    if not on:
        stray = [flag for flag, v in given.items() if v is not None]
        if stray:
            raise ConfigError(f"{', '.join(stray)} tunes pseudo-relevance feedback; add --feedback to turn it on")
        return None
    chosen = {k: v for k, v in zip(("docs", "weight", "terms"), given.values()) if v is not None}
    try:
        feedback = Feedback(**chosen)
    except ValueError as e:  # "feedback docs must be ..." -> "--feedback-docs must be ..."
        raise ConfigError(f"--{str(e).replace(' ', '-', 1)}") from None
    if index is not None:
        from sparse_adapt.retrieval.searcher import require_stored_vectors

        require_stored_vectors(index)
    return feedback


def searched_as(model: str, feedback: Feedback | None) -> str:
    """A saved run's tag: a feedback run tagged as the model alone could not be told later from its
    plain run."""
    return model if feedback is None else f"{model}+feedback"


def check_thread_count(flag: str, threads: int | None) -> None:
    """``threads`` at most 4x this machine's CPUs: 100,000 torch threads crashed the process (a
    segfault in its pool), Java's pool refused 32,768 with a traceback, and more only wait."""
    import os

    from sparse_adapt.errors import ConfigError

    cpus = os.cpu_count() or 1
    if threads is not None and threads > 4 * cpus:
        raise ConfigError(f"{flag} {threads} is more than 4x this machine's {cpus} CPUs; give at most {4 * cpus}")
