"""The docs name only commands, options and defaults the code has.

Every ``sparse-adapt COMMAND --option`` written in a code span or a fenced block of the
READMEs must be a registered command and one of its options (or a global option), and the
defaults listed in the README's configuration block must be the ``TrainConfig`` defaults:
a renamed option or a changed default fails here instead of drifting from the docs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

from sparse_adapt.cli import app
from sparse_adapt.training.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["README.md", "bench/README.md", "bench/RESULTS.md", "corpora/README.md"]


def code_text(markdown: str) -> list[tuple[int, str]]:
    """(line, text) of every fenced block and inline code span, shell continuations joined."""
    found = []
    for m in re.finditer(r"```[^\n]*\n(.*?)```", markdown, flags=re.S):
        found.append((markdown[: m.start()].count("\n") + 2, re.sub(r"\\\n\s*", " ", m.group(1))))
    prose = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), markdown, flags=re.S)
    for m in re.finditer(r"`([^`\n]+)`", prose):
        found.append((prose[: m.start()].count("\n") + 1, m.group(1)))
    return found


def invocations(markdown: str) -> list[tuple[int, str, list[str]]]:
    """(line, command, [--options]) of each ``sparse-adapt COMMAND ...`` in code."""
    out = []
    for line, text in code_text(markdown):
        for m in re.finditer(r"(?<![\w/.-])sparse-adapt ([a-z][a-z-]*)([^\n|;]*)", text):
            out.append((line, m.group(1), re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", m.group(2))))
    return out


def test_the_scanner_finds_commands_and_options_in_code_only():
    text = "Run `sparse-adapt adapt --corpus D --out X` or\n\n```\nsparse-adapt train --base B \\\n  --config C\n```\nsparse-adapt finds it."
    assert invocations(text) == [(4, "train", ["--base", "--config"]), (1, "adapt", ["--corpus", "--out"])]


@pytest.mark.parametrize("doc", DOCS)
def test_every_documented_command_and_option_exists(doc):
    group = typer.main.get_command(app)
    common = {o for p in group.params for o in p.opts} | {"--help"}
    assert (ROOT / doc).is_file(), f"{doc} is gone: update DOCS"  # else its commands would go unchecked
    found = invocations((ROOT / doc).read_text(encoding="utf-8"))
    wrong = []
    for line, command, options in found:
        if command not in group.commands:
            wrong.append(f"{doc}:{line}: no command {command!r}")
            continue
        known = common | {o for p in group.commands[command].params for o in (*p.opts, *p.secondary_opts)}
        wrong += [f"{doc}:{line}: {command} has no option {o}" for o in options if o not in known]
    assert not wrong, "\n".join(wrong)
    if doc == "README.md":
        assert len(found) > 30  # the scanner did read the command overview


def test_help_texts_survive_rich_markup():
    """``--help`` renders help texts as rich markup, which drops a bracketed word it takes for a
    style tag: ``--space``'s ``name = [low, high]`` printed as ``name =  (log scale)``. Every
    bracket meant literally is escaped (``\\[``)."""
    from rich.text import Text

    group = typer.main.get_command(app)
    texts = [(f"{name} {p.opts[0]}", p.help) for name, command in group.commands.items() for p in command.params
             if getattr(p, "help", None)] + [(name, command.help) for name, command in group.commands.items() if command.help]
    assert len(texts) > 100
    lost = [f"{where}: {text!r}" for where, text in texts if Text.from_markup(text).plain != text.replace("\\[", "[")]
    assert not lost, "\n".join(lost)


def test_the_readme_config_block_lists_the_defaults():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("### Configuration", 1)[1].split("```toml", 1)[1].split("```", 1)[0]
    defaults = TrainConfig().to_dict()
    checked, wrong = 0, []
    section = None
    for line in block.splitlines():
        head = re.match(r"\[(\w+)\]", line)
        section = head.group(1) if head else section
        if line.lstrip().startswith("# every section"):
            section = None
        for key, raw in re.findall(r'(\w+)=("[^"]*"|\S+)', line.split("#", 1)[1] if "#" in line else ""):
            targets = [defaults[section]] if section else list(defaults.values())
            for values in targets:
                if key not in values:
                    wrong.append(f"{section}.{key} is not a setting")
                    continue
                value = values[key]
                shown = raw.strip('"') if isinstance(value, str) else type(value)(raw == "true" if isinstance(value, bool) else float(raw))
                checked += 1
                if shown != value:
                    wrong.append(f"{section or 'every section'}.{key}: README says {raw}, default is {value!r}")
    assert not wrong, "\n".join(wrong)
    assert checked >= 20
