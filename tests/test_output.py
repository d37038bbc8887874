"""The CLI's progress output without a terminal: plain lines a log file can show."""

from __future__ import annotations

import io

from rich.console import Console

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
    assert "warmup: 2/2" not in buf.getvalue()
