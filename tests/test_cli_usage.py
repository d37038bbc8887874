"""Click's own usage errors (a missing argument, an unknown option, a value out of range) are
one line and exit code 2, like every other mistake in what a user passes."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
import typer
from safetensors import SafetensorError

from sparse_adapt.cli import main
from sparse_adapt.errors import ConfigError, SparseAdaptError


@pytest.mark.parametrize("argv, line", [
    (["encode"], "error: sparse-adapt encode: Missing argument 'text' (see sparse-adapt encode --help)"),
    (["encode", "x", "-k", "0"], "error: sparse-adapt encode: Invalid value for '--k' / '-k': Input should be "
                                 "greater than or equal to 1 (see sparse-adapt encode --help)"),
    (["encode", "x", "--bogus"], "error: sparse-adapt encode: No such option: --bogus (see sparse-adapt encode --help)"),
    (["nosuch"], "error: sparse-adapt: No such command 'nosuch' (see sparse-adapt --help)"),
    # raised before click made a context: the command is found in the arguments
    (["--threads", "2", "encode", "x", "-k"], "error: sparse-adapt encode: Option '-k' requires an argument "
                                              "(see sparse-adapt encode --help)"),
    (["--threads", "0", "encode", "x"], "error: sparse-adapt: Invalid value for '--threads': Input should be greater "
                                        "than or equal to 1 (see sparse-adapt --help)"),
    (["tune", "--seed", "4294967296"], "error: sparse-adapt tune: Invalid value for '--seed': Input should be less "
                                       "than or equal to 4294967295 (see sparse-adapt tune --help)"),
    # a global option after the command's name: said where it belongs
    (["encode", "--device", "cpu", "x"], "error: sparse-adapt encode: No such option: --device (--device is a global "
                                         "option: give it before the command, sparse-adapt --device ... encode ...) "
                                         "(see sparse-adapt encode --help)"),
    (["encode", "--threads", "2", "x"], "error: sparse-adapt encode: No such option: --threads (--threads is a global "
                                        "option: give it before the command, sparse-adapt --threads ... encode ...) "
                                        "(see sparse-adapt encode --help)"),
], ids=["missing argument", "out of range", "unknown option", "unknown command", "option without value",
        "global option", "tune seed", "global option placed after", "threads placed after"])
def test_a_usage_error_is_one_line_and_code_2(argv, line, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [line] and captured.out == ""


def test_help_is_still_help(capsys):
    assert main(["encode", "--help"]) == 0
    assert "Print the top-weighted terms" in capsys.readouterr().out
    assert main([]) == 2  # no command: the app's help, as before, with click's usage code
    captured = capsys.readouterr()
    assert "Commands" in captured.out and captured.err == ""  # the help alone, no error line under it


@pytest.mark.parametrize("signame, said", [("SIGINT", "Ctrl-C"), ("SIGTERM", "SIGTERM")])
def test_a_stop_while_the_cli_imports_is_one_line_and_code_128_plus_n(signame, said, monkeypatch, capsys):
    """The console script's entry takes the stop signals over before the CLI's own handlers exist
    (only once it is imported): a Ctrl-C there was a traceback, a SIGTERM ended it without a word."""
    import signal
    import sys
    import threading
    import types

    from sparse_adapt.__main__ import entry

    signum = getattr(signal, signame)

    class Importing(types.ModuleType):
        def __getattr__(self, name):  # `from sparse_adapt.cli import main` as the signal comes
            # Only that read signals: another reader of sys.modules (a thread an earlier test left
            # running, a finaliser) would raise it at a point of its own, outside entry().
            if name != "main" or threading.current_thread() is not threading.main_thread():
                raise AttributeError(name)
            signal.raise_signal(signum)

    monkeypatch.delenv("WORLD_SIZE", raising=False)  # under a launcher entry() takes no signals over
    monkeypatch.setitem(sys.modules, "sparse_adapt.cli", Importing("sparse_adapt.cli"))
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        # As in a foreground process: pytest run as a shell's background job (`&`) starts with
        # SIGINT ignored, which entry() rightly leaves so, and the signal would never come.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with pytest.raises(SystemExit) as e:
            entry()
    finally:  # entry() keeps its handlers for the process: not for pytest's
        for s, handler in before.items():
            signal.signal(s, handler)
    assert e.value.code == 128 + signum
    assert capsys.readouterr().err.splitlines() == [f"stopped by {said} before the command began: nothing was written"]


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_stop_during_the_teardown_after_the_command_ends_it_with_the_command_s_code(signame):
    """After the command returned, the CLI put the handlers back and the process tore down: a
    SIGTERM killed it without a word, a Ctrl-C in an atexit callback printed a traceback."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import atexit, os, signal, sys, time\n"
            f"atexit.register(lambda: (os.kill(os.getpid(), signal.{signame}), time.sleep(5)))\n"
            "sys.argv = ['sparse-adapt', '--help']\n"
            "from sparse_adapt.__main__ import entry\n"
            "entry()\n")
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root,
                          env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "Commands" in done.stdout and done.stderr == ""


def test_the_console_script_is_the_guarded_entry():
    import tomllib
    from pathlib import Path

    scripts = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"sparse-adapt": "sparse_adapt.__main__:entry"}


def test_help_into_a_pipe_is_laid_out_at_the_cli_s_log_width():
    """typer's help console used rich's 80 columns without a terminal: `adapt --help` ran to 160 lines."""
    import os
    import subprocess
    import sys

    from sparse_adapt.cli.output import LOG_WIDTH

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH")}
    run = [sys.executable, "-m", "sparse_adapt", "adapt", "--help"]
    widths = [len(line) for line in subprocess.run(run, env=env, capture_output=True, text=True, check=True).stdout.splitlines()]
    assert max(widths) == LOG_WIDTH
    narrow = subprocess.run(run, env={**env, "COLUMNS": "80"}, capture_output=True, text=True, check=True).stdout
    assert max(len(line) for line in narrow.splitlines()) == 80  # COLUMNS still wins


def test_the_help_width_is_decided_on_every_call_not_kept_from_the_first(monkeypatch, capsys):
    """A process calling main() again (tests, a notebook) with COLUMNS set got the first call's 120."""
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["encode", "--help"]) == 0
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= 120
    monkeypatch.setenv("COLUMNS", "60")
    assert main(["encode", "--help"]) == 0
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) == 60


@pytest.mark.parametrize("world", ["abc", "", "1"])
def test_a_world_size_no_launcher_set_never_stops_a_command(world, monkeypatch, capsys):
    """WORLD_SIZE=abc (set by hand) ended every command in a ValueError traceback."""
    monkeypatch.setenv("WORLD_SIZE", world)
    assert main(["base", "--help"]) == 0
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("world, taken", [("1", True), ("", True), ("2", False), ("16", False)])
def test_the_stop_signals_are_taken_by_one_process_alone_never_by_a_launcher_s_ranks(world, taken, monkeypatch):
    """WORLD_SIZE=1 is one process (a launcher's single rank): a Ctrl-C, a `kill` or a closed
    terminal must still stop it with one line; two or more ranks leave them to the launcher."""
    import signal

    from sparse_adapt.stops import takeable

    monkeypatch.setenv("WORLD_SIZE", world)
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {s: signal.getsignal(s) for s in stops}
    try:
        for s in stops:  # as a terminal starts a run (`nohup` or a shell's `&` would have some ignored)
            signal.signal(s, signal.SIG_DFL)
        assert set(takeable()) == (set(stops) if taken else set())
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def test_no_stop_signal_is_taken_outside_the_main_thread(monkeypatch):
    """Python installs signal handlers only there: main() run from a thread would raise."""
    import threading

    from sparse_adapt.stops import takeable

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    seen = []
    thread = threading.Thread(target=lambda: seen.append(takeable()))
    thread.start()
    thread.join()
    assert seen == [[]] and takeable()


def test_version_prints_the_packages_version_from_pyproject(capsys):
    import tomllib

    from sparse_adapt.cli import main

    root = Path(__file__).resolve().parents[1]
    version = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"sparse-adapt {version}\n"


def _raising(exc):
    def app(**kwargs):
        raise exc
    return app


@pytest.mark.parametrize("exc, code, line", [
    (ConfigError("bad --k\nerror: forged"), 2, r"error: bad --k\nerror: forged"),  # one line, the break shown
    (OSError(errno.ENOSPC, "No space left on device", "out/model.safetensors"), 2,
     "error: No space left on device: out/model.safetensors"),
    (OSError(errno.ENAMETOOLONG, "File name too long", "x" * 300), 2, f"error: File name too long: {'x' * 300}"),
    (OSError(errno.ELOOP, "Too many levels of symbolic links", "loop"), 2,
     "error: Too many levels of symbolic links: loop"),
    (typer.Abort(), 1, "error: aborted"),
    (SystemExit("stopped by a library"), 1, None),
    (SystemExit(3), 3, None),
    (SystemExit(None), 0, None),
], ids=["user error", "disk full", "name too long", "symlink loop", "abort", "exit with a message", "exit code",
        "exit none"])
def test_each_kind_of_failure_has_its_exit_code_and_at_most_one_line(monkeypatch, capsys, exc, code, line):
    """User errors and a full disk: one red line, code 2; click's Abort: code 1; SystemExit keeps its code
    (a message is 1)."""
    import sparse_adapt.cli as cli

    monkeypatch.setattr(cli, "app", _raising(exc))
    assert main(["encode", "x"]) == code
    err = capsys.readouterr().err
    assert err.splitlines() == ([line] if line else [])


def test_an_error_carrying_another_programs_log_shows_it_under_the_one_line(monkeypatch, capsys):
    import sparse_adapt.cli as cli

    e = SparseAdaptError("indexing failed")
    e.log = "java.lang.OutOfMemoryError: Java heap space\nCaused by: the index writer"
    monkeypatch.setattr(cli, "app", _raising(e))
    assert main(["index"]) == 2
    assert capsys.readouterr().err.splitlines() == ["error: indexing failed", "java.lang.OutOfMemoryError: Java heap "
                                                    "space", "Caused by: the index writer"]


@pytest.mark.parametrize("exc", [ValueError("a bug"), OSError(errno.ENOENT, "No such file or directory", "x"),
                                 SafetensorError("Error while deserializing header: I/O error (os error 5)"),
                                 SafetensorError("Error while deserializing header: HeaderTooLarge")])
def test_a_failure_that_is_no_users_mistake_keeps_its_traceback(monkeypatch, exc):
    """A bug, or an OSError that is neither a write failure nor a path the system refuses (safetensors'
    own error naming one included), is not dressed as one red line: it propagates."""
    import sparse_adapt.cli as cli

    monkeypatch.setattr(cli, "app", _raising(exc))
    with pytest.raises(type(exc)):
        main(["encode", "x"])


def test_our_warnings_are_one_line_and_others_keep_pythons_format(monkeypatch, capsys):
    import warnings

    import sparse_adapt.cli as cli
    from sparse_adapt.errors import SparseAdaptWarning

    def app(**kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("a key\nwarning: forged", SparseAdaptWarning)

    monkeypatch.setattr(cli, "app", app)
    assert main(["encode", "x"]) == 0
    assert capsys.readouterr().err.splitlines() == [r"warning: a key\nwarning: forged"]
    seen = []
    show = cli._one_line_warnings(lambda *args: seen.append(args))
    show("theirs", UserWarning, "their.py", 3)
    assert seen == [("theirs", UserWarning, "their.py", 3, None, None)]


def test_a_command_s_own_exit_code_is_returned(monkeypatch):
    import sparse_adapt.cli as cli

    monkeypatch.setattr(cli, "app", lambda **kwargs: 3)  # what click returns for a typer.Exit(3), not standalone
    assert main(["encode", "x"]) == 3


def test_main_puts_back_the_warning_display_it_found_and_shows_our_warnings_subclasses_in_one_line(monkeypatch, capsys):
    import warnings

    import sparse_adapt.cli as cli
    from sparse_adapt.modeling.encoder import PositionLimitWarning

    def app(**kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("past the position limit", PositionLimitWarning)

    before = warnings.showwarning
    monkeypatch.setattr(cli, "app", app)
    assert main(["encode", "x"]) == 0
    assert capsys.readouterr().err.splitlines() == ["warning: past the position limit"]
    assert warnings.showwarning is before  # not left on for the rest of a process that called main()


def test_the_console_script_s_arguments_name_the_command_of_a_usage_error_raised_before_its_context(monkeypatch,
                                                                                                   capsys):
    import sys

    monkeypatch.setattr(sys, "argv", ["sparse-adapt", "encode", "x", "-k"])  # what entry() runs: main() with no argv
    assert main() == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: sparse-adapt encode: Option '-k' requires an argument (see sparse-adapt encode --help)"]


def test_the_global_options_set_torch_threads_and_the_process_device_before_the_command(monkeypatch, capsys):
    import torch

    import sparse_adapt.device

    monkeypatch.setattr(sparse_adapt.device, "_default", "auto")
    before = torch.get_num_threads()
    threads = 2 if before == 1 else 1  # a count torch does not already use
    try:
        # the group's options apply before the command parses its own (here --help, which runs nothing)
        assert main(["--threads", str(threads), "--device", "cpu", "encode", "--help"]) == 0
        assert torch.get_num_threads() == threads and sparse_adapt.device._default == "cpu"
    finally:
        torch.set_num_threads(before)
    capsys.readouterr()


@pytest.mark.parametrize("code", [errno.EACCES, errno.EPERM, errno.EROFS, errno.EDQUOT, errno.EFBIG])
def test_every_write_failure_the_environment_causes_is_one_line_naming_the_path(monkeypatch, capsys, code):
    """A read-only mount, a full quota or a file over the size limit is no bug: one line, code 2."""
    import os

    import sparse_adapt.cli as cli

    monkeypatch.setattr(cli, "app", _raising(OSError(code, os.strerror(code), "out/model.safetensors")))
    assert main(["encode", "x"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {os.strerror(code)}: out/model.safetensors"]


def test_an_ignored_stop_signal_is_left_ignored(monkeypatch):
    """`nohup` ignores SIGHUP: taking it over would stop a run when the terminal closes."""
    import signal

    from sparse_adapt.stops import takeable

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {s: signal.getsignal(s) for s in stops}
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        assert set(takeable()) == {signal.SIGINT, signal.SIGTERM}
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def test_the_console_script_exits_with_the_command_s_code(monkeypatch):
    import sparse_adapt.cli as cli
    from sparse_adapt.__main__ import entry

    def command(finished):
        finished.append(3)
        return 3

    monkeypatch.setenv("WORLD_SIZE", "2")  # no signal taken over: pytest's handlers stay
    monkeypatch.setattr(cli, "main", command)
    with pytest.raises(SystemExit) as e:
        entry()
    assert e.value.code == 3


def test_a_raw_keyboard_interrupt_under_a_launcher_is_not_worded_as_a_stop_before_the_command(monkeypatch, capsys):
    """With no handler of ours (a launcher's rank) the interrupt came mid-command, not before it."""
    import sparse_adapt.cli as cli
    from sparse_adapt.__main__ import entry

    def command(finished):
        raise KeyboardInterrupt

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(cli, "main", command)
    with pytest.raises(KeyboardInterrupt):
        entry()
    assert capsys.readouterr().err == ""


def test_a_second_stop_while_the_first_one_s_line_is_written_leaves_that_line_and_code(monkeypatch):
    import signal
    import sys
    import threading
    import types

    from sparse_adapt.__main__ import entry

    class Importing(types.ModuleType):
        def __getattr__(self, name):
            if name != "main" or threading.current_thread() is not threading.main_thread():
                raise AttributeError(name)
            signal.raise_signal(signal.SIGTERM)

    class Stderr:  # a Ctrl-C comes as the SIGTERM's line is written
        def __init__(self):
            self.lines = []

        def write(self, text):
            if not self.lines:
                self.lines.append(None)
                signal.raise_signal(signal.SIGINT)
            self.lines.append(text)

    err = Stderr()
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setitem(sys.modules, "sparse_adapt.cli", Importing("sparse_adapt.cli"))
    monkeypatch.setattr(sys, "stderr", err)
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            entry()
        except KeyboardInterrupt:  # would end pytest's session rather than fail the test
            pytest.fail("the second stop broke off the first one's line")
        except SystemExit as e:
            code = e.code
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
    assert code == 128 + signal.SIGTERM
    assert err.lines[1:] == ["stopped by SIGTERM before the command began: nothing was written\n"]


def test_a_stop_in_the_teardown_keeps_a_failed_command_s_code_and_its_unflushed_output():
    """os._exit() skips Python's flush: what the command printed into a pipe was lost, and the
    code must be the command's, not 0."""
    import subprocess
    import sys

    code = ("import atexit, os, signal, sys, time\n"
            "import sparse_adapt.cli as cli\n"
            "def command(finished):\n"
            "    print('the command wrote this')\n"
            # runs before the stop below (last in, first out)
            "    atexit.register(print, 'and this in the teardown')\n"
            "    finished.append(3)\n"
            "    return 3\n"
            "cli.main = command\n"
            "atexit.register(lambda: (os.kill(os.getpid(), signal.SIGTERM), time.sleep(5)))\n"
            "from sparse_adapt.__main__ import entry\n"
            "entry()\n")
    root = Path(__file__).resolve().parents[1]
    # a pipe's stdout is block-buffered, as for a user (not with PYTHONUNBUFFERED, which CI may set)
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root,
                          env={**env, "PYTHONPATH": str(root)})
    assert (done.returncode, done.stdout, done.stderr) == (3, "the command wrote this\nand this in the teardown\n", "")


def test_a_ctrl_c_while_the_cli_imports_under_a_launcher_is_still_one_line_and_code_130(monkeypatch, capsys):
    """No handler of ours there: Python's own Ctrl-C (a KeyboardInterrupt) is the only stop that can come."""
    import sys
    import threading
    import types

    from sparse_adapt.__main__ import entry

    class Importing(types.ModuleType):
        def __getattr__(self, name):
            if name != "main" or threading.current_thread() is not threading.main_thread():
                raise AttributeError(name)
            raise KeyboardInterrupt

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setitem(sys.modules, "sparse_adapt.cli", Importing("sparse_adapt.cli"))
    with pytest.raises(SystemExit) as e:
        entry()
    assert e.value.code == 130
    assert capsys.readouterr().err.splitlines() == ["stopped by Ctrl-C before the command began: nothing was written"]


def test_a_write_failure_that_names_no_path_is_its_reason_alone(monkeypatch, capsys):
    """An OSError without a filename (a failed flush) must not end in ": None"."""
    import os

    import sparse_adapt.cli as cli

    monkeypatch.setattr(cli, "app", _raising(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))))
    assert main(["encode", "x"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {os.strerror(errno.ENOSPC)}"]


def test_a_keyboard_interrupt_no_stop_signal_was_noted_for_propagates(monkeypatch):
    """Python's own Ctrl-C with no handler of ours (a launcher's rank): not worded as a stop."""
    import sparse_adapt.cli as cli

    def interrupted(argv, stopped):
        raise KeyboardInterrupt

    monkeypatch.setenv("WORLD_SIZE", "2")  # no signal taken over: pytest's handlers stay
    monkeypatch.setattr(cli, "_run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        main(["encode", "x"])


def _command_stopped_by_sigterm(ends):
    """A command that gets a SIGTERM and ends as ``ends`` says: the interrupt raised on, typer's
    Abort, or a code of its own (130) once its cleanup caught the interrupt."""
    import signal

    def app(**kwargs):
        try:
            signal.raise_signal(signal.SIGTERM)
        except KeyboardInterrupt:
            if ends == "interrupt":
                raise
            if ends == "abort":
                raise typer.Abort()
            return 130
        pytest.fail("main() took no SIGTERM over")

    return app


@pytest.mark.parametrize("ends", ["interrupt", "abort", "code"])
def test_a_stop_while_the_command_runs_is_one_line_and_code_128_plus_n_however_it_comes_back(ends, monkeypatch,
                                                                                              capsys):
    import signal

    import sparse_adapt.cli as cli

    def refuse(signum, frame):  # not SIG_DFL: a SIGTERM main() failed to take must not end pytest
        raise KeyboardInterrupt

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(cli, "app", _command_stopped_by_sigterm(ends))
    before = signal.signal(signal.SIGTERM, refuse)
    try:
        code = main(["encode", "x"])
    finally:
        signal.signal(signal.SIGTERM, before)
    assert code == 128 + signal.SIGTERM
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("stopped by SIGTERM: nothing half-written is left in place of an output")


def test_a_stop_as_main_hands_over_the_command_s_code_reaches_the_handler_main_found(monkeypatch):
    """The stop is let pass then (the outputs are complete), and raised again once main() has put
    back the handlers it found: a library caller's own handler must still hear it."""
    import signal

    import sparse_adapt.cli as cli

    heard = []

    class Finished(list):
        def extend(self, codes):  # main() hands over the command's code: a SIGTERM comes right then
            super().extend(codes)
            signal.raise_signal(signal.SIGTERM)

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(cli, "app", lambda **kwargs: 3)
    before = signal.signal(signal.SIGTERM, lambda signum, frame: heard.append(signum))
    try:
        finished = Finished()
        assert main(["encode", "x"], finished=finished) == 3
    finally:
        signal.signal(signal.SIGTERM, before)
    assert finished == [3] and heard == [signal.SIGTERM]


# Drift audit G: what the help of adapt, evaluate, export, index, search and onnx states, read from
# the code that decides it (names, numbers, formats), so a change on either side fails here.


def _command(name: str):
    import typer.main

    from sparse_adapt.cli import app

    return typer.main.get_command(app).commands[name]


def _option(command: str, flag: str):
    return next(p for p in _command(command).params if flag in p.opts)


def test_help_names_the_files_and_folders_the_code_writes_and_reads():
    import re

    from sparse_adapt.corpus.adapt_folder import FINAL, PRETRAINED, RUN_OUTPUTS, TRAINING
    from sparse_adapt.modeling.onnx import ONNX_FILE
    from sparse_adapt.retrieval.datasets import local_beir_files

    listed = _option("adapt", "--out").help.split(":", 1)[1].split(",")
    named = [n.strip().rstrip(".") for n in listed if "/" in n or "." in n]  # not "generated inputs"
    assert len(named) >= 3 and all(n.rstrip("/") in RUN_OUTPUTS for n in named), named
    assert {n.rstrip("/") for n in named if n.endswith("/")} <= {TRAINING, FINAL}  # the run's two folders
    assert re.findall(r"into DIR/(\w+)", _option("adapt", "--pretrain").help) == [PRETRAINED]
    # --overwrite: the folders it discards are run outputs, the one that stays is not
    discarded, stays = _option("adapt", "--overwrite").help.split(";")
    assert {d.rstrip("/") for d in re.findall(r"\w+/", discarded)} <= set(RUN_OUTPUTS)
    assert [d.rstrip("/") for d in re.findall(r"\w+/", stays)] == [PRETRAINED] and PRETRAINED not in RUN_OUTPUTS
    [beir] = re.findall(r"local BEIR folder \(([^)]*)\)", _option("evaluate", "--dataset").help)
    root = Path("folder")
    assert beir.split(", ") == [p.relative_to(root).as_posix() for p in local_beir_files(root).values()]
    assert re.findall(r"Output directory: (\S+) \+", _option("onnx", "--out").help) == [ONNX_FILE]


def test_help_numbers_are_the_code_s_constants_and_defaults():
    import re

    from sparse_adapt.corpus.adapt import ADAPT_SETTINGS
    from sparse_adapt.corpus.pseudo import SIBLING_FLOOR
    from sparse_adapt.modeling.onnx import DEFAULT_OPSET, MIN_OPSET
    from sparse_adapt.retrieval.export import MAX_SCALE, ExportConfig

    settings: dict = {}
    for section, key, value in re.findall(r"(\w+)\.(\w+) = (\d+(?:\.\d+)?)", _option("adapt", "--config").help):
        settings.setdefault(section, {})[key] = float(value)
    assert settings == ADAPT_SETTINGS
    for command in ("make-train", "adapt"):
        labels = _option(command, "--term-labels").help
        assert [float(v) for v in re.findall(r"at \+(\d+(?:\.\d+)?)", labels)] == [SIBLING_FLOOR]
    assert [int(v) for v in re.findall(r"at most (\d+)", _option("export", "--scale").help)] == [MAX_SCALE]
    defaults = ExportConfig()
    assert (_option("export", "--scale").default, _option("export", "--batch-size").default) == (
        defaults.scale, defaults.batch_size)
    opset = _option("onnx", "--opset")
    assert [int(v) for v in re.findall(r">= (\d+)", opset.help)] == [MIN_OPSET] and opset.default == DEFAULT_OPSET


def test_evaluate_s_help_and_docstring_name_the_metrics_it_reports():
    import re

    from sparse_adapt.cli import evaluate
    from sparse_adapt.retrieval.evaluation import DEFAULT_METRICS

    for text in (_command("evaluate").help, evaluate.__doc__):
        assert [m.casefold() for m in re.findall(r"\b[A-Za-z]+@\d+\b", text)] == list(DEFAULT_METRICS), text


def test_evaluate_s_qrels_help_names_every_layout_the_qrels_reader_takes(tmp_path):
    """The layouts are read off the reader's own message for a file mixing them."""
    import re

    from sparse_adapt.data import DataError, load_qrels

    mixed = tmp_path / "mixed.tsv"
    mixed.write_text("q1 0 d1 1\nq1 d2 1\n")
    with pytest.raises(DataError) as e:
        load_qrels(mixed)
    layouts = re.findall(r"'(qid [^']+)'", str(e.value))
    assert len(layouts) == 2
    shown = _option("evaluate", "--qrels").help
    assert [layout for layout in layouts if f"({layout})" not in shown] == []


def test_the_teacher_and_pretrain_help_name_the_built_ins_the_code_has():
    import re

    from sparse_adapt.cli.adapt import TEACHER_HELP
    from sparse_adapt.corpus.teacher import BUILTIN_TEACHERS, DEFAULT_TEACHER
    from sparse_adapt.modeling.builtin import BUILTIN_BASES

    assert TEACHER_HELP.startswith(f"{DEFAULT_TEACHER} (default") and all(t in TEACHER_HELP for t in BUILTIN_TEACHERS)
    for command in ("build-dictionary", "make-train", "adapt"):
        assert _option(command, "--teacher").default == DEFAULT_TEACHER
    [named] = re.findall(r"no trained SPLADE \(([^)]*)\)", _option("adapt", "--pretrain").help)
    assert named.split(", ") == [name for name, base in BUILTIN_BASES.items() if base.pretrain]


def test_adapt_s_summary_table_of_a_default_run_fits_the_log_width_whole(monkeypatch, capsys, tmp_path):
    """LOG_WIDTH was chosen to hold this table in a log: its group names whole, on one line each."""
    from types import SimpleNamespace

    from sparse_adapt.cli.output import LOG_WIDTH
    from sparse_adapt.corpus import adapt as corpus_adapt
    from sparse_adapt.corpus.adapt import HOLDOUT_EVERY
    from sparse_adapt.corpus.pseudo import DEFAULT_MAX_QUERIES, KINDS
    from sparse_adapt.report import adapt as report_adapt

    held = DEFAULT_MAX_QUERIES // HOLDOUT_EVERY  # a default run's held-out queries, all kept
    groups = {"all": held, **{f"heldout-pseudo-{k}": held // len(KINDS) for k in KINDS}}
    rows = [{"set": report_adapt.PSEUDO, "group": g, "queries": n, "base": 0.5, "adapted": 0.75,
             "base_feedback": 0.5, "feedback": 0.75} for g, n in groups.items()]
    result = SimpleNamespace(final=tmp_path / "final", files=SimpleNamespace(generated=[]))
    monkeypatch.setattr(corpus_adapt, "run_adapt", lambda *args, **kwargs: result)
    monkeypatch.setattr(report_adapt, "adapt_summary", lambda *args: {
        "evaluation": rows, "pretrained": None, "inspect": {"domain": {"tokens": []}}, "warnings": []})
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["adapt", "--corpus", str(tmp_path / "docs.jsonl"), "--out", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = [line for line in lines if line.startswith(("┃", "│", "|"))]  # rich draws ASCII for a non-UTF-8 stdout
    assert max(len(line) for line in table) <= LOG_WIDTH
    assert all(sum(f" {g} " in line for line in table) == 1 for g in groups), "\n".join(lines)
    # A run that trained from a pretrained base: one line per query set says that base's scores.
    pretrained = [{**r, "pretrained": 0.625} for r in rows]
    monkeypatch.setattr(report_adapt, "adapt_summary", lambda *args: {
        "evaluation": pretrained, "pretrained": "out/pretrained", "inspect": {"domain": {"tokens": []}},
        "warnings": []})
    assert main(["adapt", "--corpus", str(tmp_path / "docs.jsonl"), "--out", str(tmp_path / "out")]) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "out/pretrained" in line]
    assert said == [f"{report_adapt.PSEUDO}, nDCG@10 of out/pretrained (the general-English pretraining the domain "
                    "stages started from): " + ", ".join(f"{g} 0.625" for g in groups)]


# The library entry points a rerun of the same command resumes: a stage's or pretraining's
# checkpoint, an adapt run's finished steps, a study's finished trials.
RESUMING_RUNNERS = ("run_pipeline", "run_general", "run_adapt", "build_report", "build_benchmark", "run_tuning")


def test_the_stopped_line_names_every_command_that_resumes_where_it_stopped(capsys):
    """A user stopped mid-run reads this line to know whether a rerun goes on or starts over:
    a command that came to resume (pretrain's checkpoints) and went unnamed was told nothing."""
    import inspect
    import re
    import signal

    import sparse_adapt.cli as cli

    cli._said_stopped(signal.SIGTERM)
    line = capsys.readouterr().err
    resuming = {command.name or command.callback.__name__ for command in cli.app.registered_commands
                if any(runner in inspect.getsource(command.callback) for runner in RESUMING_RUNNERS)}
    assert {"train", "pretrain", "adapt", "tune"} <= resuming  # the source scan does find the runners
    assert [c for c in sorted(resuming) if not re.search(rf"(?<![\w-]){c}(?![\w-])", line)] == []


def test_each_out_help_names_the_files_and_folders_the_command_writes_there():
    """``--out``'s help is the map of the output directory: every name the code writes there
    (by its constant) is on it, so a folder added later (benchmark's prefix/) is not left off."""
    import re

    from sparse_adapt.report.benchmark_md import PIPELINES
    from sparse_adapt.report.files import BENCHMARK_DIRS
    from sparse_adapt.report.results import DIAGNOSTICS_DIR, RUNS_DIR
    from sparse_adapt.training.rundir import FINAL, LOG_FILE, PARTIAL
    from sparse_adapt.training.study import STUDY_DB
    from sparse_adapt.training.tuning import STUDY_FILES

    expected = {
        "train": [f"OUT/{FINAL}", LOG_FILE],
        "tune": [*STUDY_FILES, STUDY_DB],
        "report": [f"{RUNS_DIR}/", f"{DIAGNOSTICS_DIR}/"],
        # pretrained.partial/ lives only while pretraining runs
        "benchmark": [*(f"{d}/" for d in BENCHMARK_DIRS if not d.endswith(PARTIAL)),
                      *(f"{p.stem}.md" for p in PIPELINES.values())],
    }
    # a folder's name ends at its "/" (runs/H1..H4); a file's at anything but a name character
    ends = {True: "", False: r"(?![\w-])"}
    missing = [f"{command} --out: {name}" for command, names in expected.items() for name in names
               if not re.search(r"(?<![\w.-])" + re.escape(name) + ends[name.endswith("/")],
                                _option(command, "--out").help)]
    assert missing == []


def test_the_numbers_and_names_the_help_of_benchmark_tune_train_and_report_states_are_the_code_s(tmp_path):
    """Each is a constant of the library that the help (or the report's console table) repeats
    in words: changed there, the help would go on promising the old value."""
    import re

    import optuna

    from diagnostics.sections.checks import HIGH_WEIGHT
    from sparse_adapt.cli.report import SHORT
    from sparse_adapt.report.benchmark_md import CORPUS_BAR
    from sparse_adapt.training.search_space import SEARCH_SPACE
    from sparse_adapt.training.stages import EXPERIMENTS, ORDER
    from sparse_adapt.training.study import open_study

    [gain] = CORPUS_BAR.gain.values()
    pipeline = " ".join(_option("benchmark", "--pipeline").help.split())
    assert f"(semantic >= base + {gain:.2f}, controls >= base - {CORPUS_BAR.control_tolerance:.2f})" in pipeline
    space = re.search(r"replaces the default \(([^)]*)\)", _option("tune", "--space").help).group(1)
    assert space.split(", ") == list(SEARCH_SPACE)
    trials = _option("tune", "--trials").help
    random_trials = int(re.search(r"TPE samples at random until (\d+) have run", trials).group(1))
    study, _ = open_study(tmp_path, "help", 0, optuna.pruners.NopPruner())
    assert study.sampler._n_startup_trials == random_trials
    said = dict(re.findall(r"(H\d): ([a-z ]+)", _option("train", "--stages").help))
    assert said["H1"] == ",".join(EXPERIMENTS["H1"]) and EXPERIMENTS["H4"] == ORDER and said["H4"] == "all four"
    assert SHORT["high_weight"] == f"w>{HIGH_WEIGHT:g}"


def test_benchmark_s_adapt_corpus_options_take_what_adapt_s_take():
    """Their help says "as adapt --X": the same values are accepted, and the default named is adapt's."""
    adapt = {p.name: p for p in _command("adapt").params}
    shared = [p for p in _command("benchmark").params if "as adapt" in (p.help or "") and p.name in adapt]
    assert {p.name for p in shared} >= {"top", "min_count", "max_queries", "negatives", "siblings", "term_labels"}
    assert [p.name for p in shared if (getattr(p, "min", None), getattr(p, "max", None))
            != (getattr(adapt[p.name], "min", None), getattr(adapt[p.name], "max", None))] == []
    term_labels = next(p for p in shared if p.name == "term_labels")
    assert f"(default: adapt's, {'--term-labels' if adapt['term_labels'].default else '--teacher-labels'})" \
        in term_labels.help
