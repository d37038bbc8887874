"""The ``sparse-adapt`` command line: the app, global options and error handling. Each
group of commands lives in its own module here (``model.py``, ``train.py``, ``tune.py``,
``adapt.py``, ``evaluate.py``, ``diagnose.py``, ``lucene.py``, ``onnx.py``, ``report.py``,
``benchmark.py``) and is registered below.

The CLI sits above the core (``sparse_adapt`` without ``cli``/``report``) and the
``diagnostics`` package: it imports both, neither imports it.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import threading
import warnings
from typing import Optional

import typer
from rich.markup import escape
from typer import rich_utils

from sparse_adapt.cli.output import check_thread_count, err_console, one_line, terminal_safe
from sparse_adapt.errors import WRITE_ERRNOS, SparseAdaptError, SparseAdaptWarning, os_errno
from sparse_adapt.stops import STOP_SIGNALS, stop_name, takeable

# Paths the system refuses whatever the disk holds: a name over 255 bytes, a loop of symlinks.
PATH_ERRNOS = frozenset({errno.ENAMETOOLONG, errno.ELOOP})

app = typer.Typer(
    name="sparse-adapt",
    help="Teach SPLADE models the vocabulary of your domain.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        from sparse_adapt import __version__

        typer.echo(f"sparse-adapt {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    threads: Optional[int] = typer.Option(
        None, "--threads", min=1, help="CPU threads for torch (default: torch's choice, one per physical core)."
    ),
    device: str = typer.Option(
        "auto", "--device",
        help="Where models run: auto (CUDA when present, else CPU), cpu, cuda or mps (cuda:1 picks a device).",
    ),
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print sparse-adapt's version and exit."),
) -> None:
    from sparse_adapt.device import set_default_device

    set_default_device(device)
    if threads is not None:
        import torch

        check_thread_count("--threads", threads)
        torch.set_num_threads(threads)


def _register_commands() -> None:
    from sparse_adapt.cli import adapt, benchmark, diagnose, evaluate, lucene, model, onnx, report, train, tune

    for module in (model, train, tune, adapt, evaluate, diagnose, lucene, onnx, report, benchmark):
        module.register(app)


_register_commands()


def main(argv: list[str] | None = None, finished: list[int] | None = None) -> int:
    """Run the CLI and return its exit code; user errors become one red line and code 2.

    Click's own usage errors (unknown option, missing argument, a value out of range) are one
    line and code 2 too, naming the command and its ``--help``: typer's standalone mode drew
    them as a five-line box under the usage line. ``finished``: the code is appended to it before
    the signal handlers main() found are put back, so that they know the command is done (the
    console script's, :func:`sparse_adapt.__main__.entry`).
    """
    shown = warnings.showwarning
    warnings.showwarning = _one_line_warnings(shown)
    _help_width()
    stopped: list[int] = []
    done: list[int] = []  # the command's code once it has one: a stop after that cuts nothing short
    late: list[int] = []  # such a stop, raised again for the handlers main() found
    # First: a Ctrl-C during the half second transformers takes to import was a traceback.
    unraisable = sys.unraisablehook
    handlers = _stop_handlers(stopped, done, late)
    try:
        try:
            code = _run(argv, stopped)
        except KeyboardInterrupt:  # a stop landing as _run was entered, before its own try
            if not stopped:
                raise
            code = _said_stopped(stopped[0])
        done.append(code)  # appended before the next signal check: no gap
        return code
    finally:
        warnings.showwarning = shown
        with _HANDLERS_LOCK:
            if finished is not None:
                finished.extend(done)
            sys.unraisablehook = unraisable
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
        if late:
            signal.raise_signal(late[0])


def _run(argv: list[str] | None, stopped: list[int]) -> int:
    try:
        # Weight-loading progress bars from transformers would bury the CLI's own output.
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        # Not standalone: click's errors reach us instead of being drawn and turned into
        # SystemExit; a Ctrl-C comes back as code 130 (typer's Exit), a finished command as None.
        code = app(args=argv, prog_name="sparse-adapt", standalone_mode=False)
        if stopped:
            return _said_stopped(stopped[0])
        return code if isinstance(code, int) else 0
    except (SystemExit, KeyboardInterrupt) as e:
        if stopped:
            return _said_stopped(stopped[0])
        if isinstance(e, KeyboardInterrupt):
            raise
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except typer.TyperException as e:  # click's errors (typer vendors click; >= 0.28 derives them from this)
        if type(e).__name__ == "NoArgsIsHelpError":  # a bare command: its help is already printed
            return e.exit_code
        err_console.print(f"[bold red]error:[/bold red] {escape(one_line(_usage_line(e, argv)))}",
                          highlight=False, soft_wrap=True)
        return e.exit_code
    except typer.Abort:  # end of input at a prompt (sparse-adapt asks none), or an interrupt typer calls one
        if stopped:
            return _said_stopped(stopped[0])
        err_console.print("[bold red]error:[/bold red] aborted", highlight=False)
        return 1
    except SparseAdaptError as e:
        err_console.print(f"[bold red]error:[/bold red] {escape(one_line(str(e)))}", highlight=False, soft_wrap=True)
        if e.log:  # another program's own words (Java's, for an index that failed), under the one line
            err_console.print(terminal_safe(e.log), highlight=False, soft_wrap=True, markup=False)
        return 2
    except OSError as e:
        # Outputs are checked before any work; this catches the disk filling up (or a
        # permission changing) mid-write. Whatever was being written was a temporary. A path
        # the system cannot take at all (over 255 bytes a name: even Path.exists() raises) is
        # the user's too.
        if e.errno not in WRITE_ERRNOS | PATH_ERRNOS:
            raise
        where = f": {e.filename}" if e.filename else ""
        err_console.print(f"[bold red]error:[/bold red] {escape(one_line(e.strerror or str(e)))}{escape(one_line(where))}",
                          highlight=False, soft_wrap=True)
        return 2
    except Exception as e:  # noqa: BLE001  (safetensors' own error type is not an OSError)
        reason = _disk_error(e)
        if reason is None:
            raise
        err_console.print(f"[bold red]error:[/bold red] {escape(reason)} while saving a model (nothing half-written "
                          "is left in place)", highlight=False, soft_wrap=True)
        return 2


# Options of the app itself: given after a command's name they are "no such option" there.
GLOBAL_OPTIONS = ("--device", "--threads")


def _usage_line(e: typer.TyperException, argv: list[str] | None) -> str:
    """``sparse-adapt encode: Missing argument 'text' (see sparse-adapt encode --help)``."""
    ctx = getattr(e, "ctx", None)
    message = e.format_message()
    if ctx is None:  # click raised it before a context ("-k requires an argument"): the command from argv
        commands = {c.name for c in app.registered_commands}
        name = next((w for w in (sys.argv[1:] if argv is None else argv) if w in commands), None)
        path = f"sparse-adapt {name}" if name else "sparse-adapt"
        return f"{path}: {message.rstrip('.')} (see {path} --help)"
    if getattr(e, "option_name", None) in GLOBAL_OPTIONS and ctx.parent is not None:
        message += (f" ({e.option_name} is a global option: give it before the command, "
                    f"sparse-adapt {e.option_name} ... {ctx.info_name} ...)")
    return f"{ctx.command_path}: {message.rstrip('.')} (see {ctx.command_path} --help)"


# Held while main() puts the signal handlers back and while a swallowed stop is re-delivered.
_HANDLERS_LOCK = threading.Lock()


def _stop_handlers(stopped: list[int], done: list[int] = (), late: list[int] | None = None) -> dict[int, object]:
    """Make each stop signal a KeyboardInterrupt where the run is, noting which one came: the
    cleanup Ctrl-C gets (temporaries and locks removed, the child indexer killed) then runs for
    SIGTERM too, which ended the process at once and left ``.NAME.tmp-*`` folders and the lock.
    Once ``done`` holds the command's code, a stop is noted in ``late``, for main() to raise again
    once it has put back the handlers it found: the command's outputs are complete.
    Returns the handlers to put back (none outside the main thread, where Python allows none)."""
    takes = takeable()  # none under a multi-process launcher, none the process ignores
    if not takes:
        return {}

    def noted(signum, frame):  # a second signal while the first one's cleanup runs: let it finish
        stopped.append(signum)

    def stop(signum, frame):
        if done:
            if late is not None and not late:
                late.append(signum)
            return
        stopped.append(signum)
        again(signum, frame)

    def again(signum, frame):  # the stop re-delivered (see swallowed): not noted twice
        for other in STOP_SIGNALS:
            if signal.getsignal(other) in (stop, again):
                signal.signal(other, noted)
        raise KeyboardInterrupt

    def swallowed(unraisable) -> None:
        """A stop that came while a C library ran a Python callback (llvmlite's, as numba compiles
        for ranx) was swallowed there: printed as "Exception ignored ..." with a traceback, and
        the command ran on. Delivered again, from another thread, once the callback is left."""
        if not (stopped and isinstance(unraisable.exc_value, KeyboardInterrupt)
                and threading.current_thread() is threading.main_thread()):
            return default_hook(unraisable)
        signal.signal(stopped[0], again)
        threading.Timer(0.05, redeliver, args=(stopped[0],)).start()

    def redeliver(signum: int) -> None:
        with _HANDLERS_LOCK:  # main() puts the old handlers back under it: a SIGTERM raised after that killed
            if signal.getsignal(signum) is again:
                signal.raise_signal(signum)

    default_hook = sys.unraisablehook
    sys.unraisablehook = swallowed
    return {signum: signal.signal(signum, stop) for signum in takes}


# typer's own help width (its TERMINAL_WIDTH), as it was before any call changed it.
_TYPER_WIDTH = rich_utils.MAX_WIDTH


def _help_width() -> None:
    """--help into a pipe or a file at the width of the rest of the CLI's output (LOG_WIDTH): typer
    lays help out on a console of its own, at rich's 80 columns there, where `adapt --help` ran to
    over 100 lines. A terminal, ``COLUMNS`` and ``TERMINAL_WIDTH`` keep their width; decided on
    every call, since a process may call :func:`main` again with another ``COLUMNS``."""
    from sparse_adapt.cli.output import LOG_WIDTH, console

    wide = _TYPER_WIDTH is None and not console.is_terminal and "COLUMNS" not in os.environ
    rich_utils.MAX_WIDTH = LOG_WIDTH if wide else _TYPER_WIDTH


def _said_stopped(signum: int) -> int:
    """One line for a run a signal stopped (typer's exit 130 said nothing); the shell's code, 128 + N."""
    err_console.print(f"[bold red]stopped[/bold red] by {stop_name(signum)}: nothing half-written is left in place of an output; "
                      "rerun the same command to go on (train, pretrain, adapt, report and benchmark resume from "
                      "their last checkpoint, tune from its last finished trial)", highlight=False, soft_wrap=True)
    return 128 + signum


def _one_line_warnings(default):
    """Our warnings (:class:`SparseAdaptWarning`) as one ``warning:`` line; Python's own format
    (a source path, then the ``warnings.warn(`` line) stays for everyone else's."""

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, SparseAdaptWarning):
            from sparse_adapt.cli.output import warn

            warn(str(message))
        else:
            default(message, category, filename, lineno, file, line)

    return show


def _disk_error(e: Exception) -> str | None:
    """The OS's reason when ``e`` is safetensors' error for a failed write ("... (os error 28)")
    outside an atomic write (which names its target itself), else None."""
    code = os_errno(e) if type(e).__name__ == "SafetensorError" else None
    return os.strerror(code) if code in WRITE_ERRNOS else None
