"""The CLI's progress output without a terminal: plain lines a log file can show."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from corpora import GATROCRAPTIC
from sparse_adapt.cli import output


def _plain_console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=False, width=120), buf


def test_without_a_terminal_a_task_says_when_it_completes():
    console, buf = _plain_console()
    with output.rich_hooks(console) as hooks:
        task = hooks.task("warmup epoch 1", 3)
        task.advance()
        task.advance()
        assert "warmup" not in buf.getvalue()  # within the minute: nothing yet
        task.advance()
        assert "warmup epoch 1: 3/3 (" in buf.getvalue()
    # and the bars are not printed once more at the end: one line per step in a log
    assert buf.getvalue().count("warmup epoch 1") == 1 and "━" not in buf.getvalue()
    assert buf.getvalue().endswith(")\n")  # rich's closing blank line is not written either


def test_without_a_terminal_hooks_left_early_write_nothing():
    console, buf = _plain_console()
    try:
        with output.rich_hooks(console):
            raise ValueError("bad input, found before any work")
    except ValueError:
        pass
    assert buf.getvalue() == ""  # was "\n": a stray line on stdout before the error line


def test_without_a_terminal_a_long_task_says_how_far_it_is(monkeypatch):
    monkeypatch.setattr(output, "PLAIN_EVERY_S", 0.0)  # every step is "a minute later"
    console, buf = _plain_console()
    with output.rich_hooks(console) as hooks:
        task = hooks.task("pretraining", 1200)
        task.advance(10)
        task.advance(10, description="pretraining epoch 2")
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("pretraining: 10/1200 (") and lines[1].startswith("pretraining epoch 2: 20/1200 (")


def test_in_a_terminal_only_the_bars_are_drawn():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    with output.rich_hooks(console) as hooks:
        task = hooks.task("warmup", 2)
        task.advance(2)
    assert "warmup: 2/2" not in buf.getvalue() and "━" in buf.getvalue()  # the bar, left drawn


def _groups_table():
    from rich.table import Table

    table = Table(title="nDCG@10, base vs adapted")
    for c in ("queries", "group", "n", "base", "adapted", "change", "base + --feedback", "adapted + --feedback"):
        table.add_column(c)
    for group in ("heldout-pseudo-explicit", "heldout-pseudo-semantic", "heldout-pseudo-control"):
        table.add_row("pseudo held-out", group, "4", "0.970", "0.969", "-0.001", "0.940", "0.940")
    return table


def test_without_a_terminal_a_table_keeps_its_labels_whole():
    # rich's 80-column fallback cut all three groups to "heldout-…" in a log of `adapt`
    buf = io.StringIO()
    log = output.LogConsole(file=buf, force_terminal=False, _environ={})
    assert log.width == output.LOG_WIDTH
    log.print(_groups_table())
    for group in ("heldout-pseudo-explicit", "heldout-pseudo-semantic", "heldout-pseudo-control"):
        assert group in buf.getvalue()
    assert "…" not in buf.getvalue()


def test_a_log_width_gives_way_to_columns_an_explicit_width_and_a_terminal():
    buf = io.StringIO()
    assert output.LogConsole(file=buf, force_terminal=False, _environ={"COLUMNS": "90"}).width == 90
    assert output.LogConsole(file=buf, force_terminal=False, width=100, _environ={}).width == 100
    terminal = output.LogConsole(file=buf, force_terminal=True, _environ={})
    assert terminal.width == Console(file=buf, force_terminal=True, _environ={}).width
    narrowed = output.LogConsole(file=buf, force_terminal=False, _environ={})
    narrowed.width = 400  # the setter still works (tests widen cli.console this way)
    assert narrowed.width == 400


def test_without_a_terminal_a_message_is_one_line():
    # hard-wrapped at the width, "N candidate scores made term-consistent" fell across two lines
    buf = io.StringIO()
    message = "dropped: 3 the teacher could not separate; " + "x " * 100 + "12 candidate scores made term-consistent"
    output.LogConsole(file=buf, force_terminal=False, _environ={}).print(message)
    assert buf.getvalue() == message + "\n"
    buf = io.StringIO()
    output.LogConsole(file=buf, force_terminal=True, _environ={}, width=80).print(message)
    assert len(buf.getvalue().splitlines()) > 1  # a terminal still wraps at its width


def test_without_a_terminal_text_in_a_panel_still_wraps():
    from rich.panel import Panel

    buf = io.StringIO()
    words = " ".join(f"word{i}" for i in range(60))
    output.LogConsole(file=buf, force_terminal=False, _environ={}).print(Panel(words))
    assert "word59" in buf.getvalue() and max(len(line) for line in buf.getvalue().splitlines()) <= output.LOG_WIDTH


def test_a_count_of_one_takes_the_singular():
    from sparse_adapt.progress import counted

    assert [counted(n, "document") for n in (0, 1, 2)] == ["0 documents", "1 document", "2 documents"]
    assert counted(1, "query", "queries") == "1 query" and counted(5, "query", "queries") == "5 queries"


def test_a_difference_that_rounds_to_zero_is_never_minus_zero():
    from sparse_adapt.progress import signed

    assert [signed(x) for x in (-0.0004, -0.0, 0.0004, -0.0006, 0.25)] == ["+0.000", "+0.000", "+0.000", "-0.001", "+0.250"]
    assert signed(-0.00004, 4) == "+0.0000" and signed(-0.00006, 4) == "-0.0001"


def test_the_silent_hooks_print_nothing_and_take_every_task_call(capsys):
    # Library functions default to SILENT: a notebook calling them without hooks sees no output.
    from sparse_adapt.progress import SILENT

    SILENT.message("epoch 1: loss 0.5")
    task = SILENT.task("encoding", 3)
    task.advance()
    task.advance(2, description="encoded")
    assert capsys.readouterr() == ("", "")


TRAIN_FILES = ["--corpus", str(GATROCRAPTIC.docs), "--terms", str(GATROCRAPTIC.terms), "--dictionary",
               str(GATROCRAPTIC.dictionary), "--train", str(GATROCRAPTIC.train)]


@pytest.mark.parametrize("name, content, argv", [
    ("terms.json", {"bad\nerror: forged line\u001b[31m": 5}, ["extend-vocab", "--base", "offline-splade-tiny"]),
    ("terms.json", {"jargon": ["ok", "bad\u001b[31m"]}, ["extend-vocab", "--base", "offline-splade-tiny"]),
    ("config.json", {"distill": {"kd\nerror: all good\u001b[2J": 1}}, ["train", "--base", "offline-splade-tiny", *TRAIN_FILES]),
])
def test_a_key_from_a_users_file_cannot_forge_lines_or_send_escapes(tmp_path, capsys, name, content, argv):
    """A JSON key is any string: "a\\nerror: ..." printed a second error line, and an escape
    sequence went to the terminal raw."""
    from sparse_adapt.cli import main

    path = tmp_path / name
    path.write_text(json.dumps(content))
    flag = "--terms" if name == "terms.json" else "--config"
    main([*argv, flag, str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert "\x1b" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error:") and ("\\n" in err or "\\x1b" in err)


def test_the_feedback_options_help_gives_the_defaults_feedback_uses():
    """The help texts write the defaults as literals (the CLI imports no torch to build them)."""
    from sparse_adapt.retrieval.feedback import Feedback

    default = Feedback()
    for option, value in ((output.FEEDBACK_DOCS_OPTION, default.docs), (output.FEEDBACK_WEIGHT_OPTION, default.weight),
                          (output.FEEDBACK_TERMS_OPTION, default.terms)):
        assert f"(default {value})" in option.help


def test_terminal_safe_keeps_line_breaks_and_tabs_and_one_line_shows_a_break_as_backslash_n():
    assert output.terminal_safe("a\tb\nc\x1b[31md\x07") == "a\tb\nc\\x1b[31md\\x07"
    assert output.one_line("a\tb\nc") == "a\tb\\nc"


@pytest.mark.parametrize("value", ["runs/", "runs/.", "runs/..", ".."])
def test_a_file_option_naming_a_folder_is_refused(value):
    import typer

    with pytest.raises(typer.BadParameter, match="names a folder; give the path of a file"):
        output._file_path(value)
    assert output._file_path("runs/run.trec").name == "run.trec"


def test_a_thread_count_up_to_four_per_cpu_is_taken_and_one_more_is_refused(monkeypatch):
    from sparse_adapt.errors import ConfigError

    monkeypatch.setattr("os.cpu_count", lambda: 3)
    output.check_thread_count("--threads", 12)
    output.check_thread_count("--threads", None)
    with pytest.raises(ConfigError, match=r"--threads 13 is more than 4x this machine's 3 CPUs; give at most 12"):
        output.check_thread_count("--threads", 13)


def test_a_text_argument_must_be_visible_and_valid_unicode():
    from sparse_adapt.errors import ConfigError

    assert output.require_text("database timeout", "query") == "database timeout"
    with pytest.raises(ConfigError, match="the query is empty"):
        output.require_text("\u200b ", "query")
    with pytest.raises(ConfigError, match="the query is not valid UTF-8"):
        output.require_text("caf\udce9", "query")


def test_without_a_terminal_a_long_task_says_how_far_it_is_once_a_minute(monkeypatch):
    from types import SimpleNamespace

    clock = [0.0]
    monkeypatch.setattr(output, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    console, buf = _plain_console()
    with output.rich_hooks(console) as hooks:
        task = hooks.task("pretraining", 1200)
        for at in (59.0, 60.0, 61.0, 119.0, 120.0):  # a line exactly a minute after the last one, then none for a minute
            clock[0] = at
            task.advance(10)
    lines = buf.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == ["pretraining: 20/1200", "pretraining: 50/1200"]


def test_a_message_above_the_bars_cannot_send_escapes():
    console, buf = _plain_console()
    with output.rich_hooks(console) as hooks:
        hooks.message("warning: skipped k\x1b[2Jey")
    assert buf.getvalue() == "warning: skipped k\\x1b[2Jey\n"


def test_wrote_shows_a_detail_holding_markup_as_written(monkeypatch):
    console, buf = _plain_console()
    monkeypatch.setattr(output, "console", console)
    output.wrote("runs/a[/red]b", " (3 [/green] rows)")
    assert buf.getvalue() == "wrote runs/a[/red]b (3 [/green] rows)\n"


@pytest.mark.parametrize("docs,weight,terms,flag", [(0, None, None, "--feedback-docs"), (None, 0.0, None, "--feedback-weight"),
                                                    (None, None, 0, "--feedback-terms")])
def test_a_feedback_tuning_flag_of_zero_without_feedback_is_still_refused(docs, weight, terms, flag):
    from sparse_adapt.errors import ConfigError

    # A zero is a value given: dropping it silently would hide that --feedback is missing.
    with pytest.raises(ConfigError, match=f"^{flag} tunes pseudo-relevance feedback; add --feedback"):
        output.feedback_settings(False, docs, weight, terms)
    assert output.feedback_settings(False, None, None, None) is None


def test_a_feedback_run_is_tagged_apart_from_its_plain_run():
    from sparse_adapt.retrieval.feedback import Feedback

    assert output.searched_as("runs/m", None) == "runs/m"
    assert output.searched_as("runs/m", Feedback()) == "runs/m+feedback"


def test_without_a_terminal_a_task_of_no_steps_still_shows_its_total():
    # A step over an empty input (no documents to encode) reads "0/0", not a bare count of unknown total.
    console, buf = _plain_console()
    with output.rich_hooks(console) as hooks:
        hooks.task("encoding documents", 0).advance(0)
    assert [line.split(" (")[0] for line in buf.getvalue().splitlines()] == ["encoding documents: 0/0"]


def test_warn_shows_a_message_holding_markup_as_written(monkeypatch):
    # a warning quotes a user's key or path: "[/b]" read as markup ended the command in a traceback
    console, buf = _plain_console()
    monkeypatch.setattr(output, "err_console", console)
    output.warn("skipped key [red]x[/red] in a[/b].jsonl")
    assert buf.getvalue() == "warning: skipped key [red]x[/red] in a[/b].jsonl\n"


@pytest.mark.parametrize("value", ["", "   "])
def test_a_blank_file_option_is_refused(value):
    import typer

    with pytest.raises(typer.BadParameter, match="the path is empty"):  # not a file named "   "
        output._file_path(value)


def test_without_a_terminal_a_running_task_says_how_long_is_left_at_its_recent_rate(monkeypatch):
    # a user of a nohup'd pretraining read "158/1200 (1816 s)" and did the arithmetic
    monkeypatch.setattr(output, "PLAIN_EVERY_S", 0.0)
    now = [0.0]
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=120, get_time=lambda: now[0])
    with output.rich_hooks(console) as hooks:
        task = hooks.task("pretrain", 1000)
        for t, steps in ((10.0, 10), (20.0, 10), (25.0, 100), (26.0, 880)):
            now[0] = t
            task.advance(steps)
    lines = buf.getvalue().splitlines()
    # rich's rate: the steps after the first sample over their time, within its last 30 s
    assert lines[0] == "pretrain: 10/1000 (10 s)"  # one sample: no rate yet
    assert lines[1] == "pretrain: 20/1000 (20 s, about 16 min left)"  # 10 steps in 10 s, 980 to go
    assert lines[2] == "pretrain: 120/1000 (25 s, about 2 min left)"  # 110 steps in 15 s, 880 to go: 120 s
    assert lines[3] == "pretrain: 1000/1000 (26 s)"  # done: nothing left to say
    assert [output.time_left(s) for s in (None, 89, 90, 3600)] == [
        "", ", about 89 s left", ", about 2 min left", ", about 60 min left"]
