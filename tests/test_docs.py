"""The docs name only commands, options and defaults the code has.

Every ``sparse-adapt COMMAND --option`` written in a code span or a fenced block of the
READMEs must be a registered command and one of its options (or a global option), and the
defaults listed in the README's configuration block must be the ``TrainConfig`` defaults:
a renamed option or a changed default fails here instead of drifting from the docs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer

from sparse_adapt.cli import app
from sparse_adapt.training.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["README.md", "bench/README.md", "bench/RESULTS.md", "corpora/README.md"]


def readme_text() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


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
    readme = readme_text()
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


def _training_section() -> str:
    readme = readme_text()
    return readme.split("## Training: the staged pipeline", 1)[1].split("\n### ", 1)[0]


def test_the_readme_stage_table_is_the_experiments_and_the_train_default():
    from sparse_adapt.training.stages import EXPERIMENTS

    rows = re.findall(r"^\| (H\d) [^|]*\| `([a-z,]+)`( \(default\))? \|$", _training_section(), flags=re.M)
    assert {h: tuple(stages.split(",")) for h, stages, _ in rows} == EXPERIMENTS
    default = [stages for _, stages, mark in rows if mark]
    train = typer.main.get_command(app).commands["train"]
    assert default == [next(p.default for p in train.params if p.name == "stages")]


def test_the_readme_run_directory_names_the_files_a_run_writes():
    from sparse_adapt.lock import LOCK_FILE
    from sparse_adapt.modeling.card import CARD_FILE
    from sparse_adapt.training.rundir import FINAL, FINAL_RECORD, LOG_FILE, PARTIAL, RUN_FILE

    block = _training_section().split("Output directory:", 1)[1].split("```", 2)[1]
    listed = {line.split()[0] for line in block.splitlines()[1:] if line.startswith("OUT/")}
    assert listed == {f"OUT/{RUN_FILE}", f"OUT/{LOG_FILE}", "OUT/<stage>/", f"OUT/{FINAL}/", f"OUT/<stage>{PARTIAL}/",
                      f"OUT/{LOCK_FILE}"}
    assert f"{CARD_FILE}: its Hugging Face model card" in block and f"\n{' ' * 22}{FINAL_RECORD}:" in block


def test_the_readme_lists_the_logged_fields_and_the_console_line_of_the_distill_terms():
    from sparse_adapt.losses import TERMS
    from sparse_adapt.training.density import DENSITY_SAMPLE, DENSITY_WARNING
    from sparse_adapt.training.stages import format_step

    text = " ".join(_training_section().split())
    distill = re.search(r"distill JSONL records have `([^`]+)`", text).group(1).split(", ")
    mlm = re.search(r"MLM records `([^`]+)`", text).group(1).split(", ")
    assert distill == ["stage", "epoch", "step", "loss", *TERMS, "lr", "tokens", "tokens_per_s"]
    assert mlm == ["stage", "epoch", "step", "loss", "lr", "tokens", "tokens_per_s"]
    shown = re.search(r"`(Step 12 \| [^`]+)`", text).group(1)
    values = dict(zip(["loss", *TERMS], (float(v) for v in re.findall(r"\d+\.\d{4}", shown))))
    assert format_step(12, values) == shown
    assert f"up to {DENSITY_SAMPLE} of its candidate documents" in text
    assert f"more than {DENSITY_WARNING:g}x denser" in text


def test_the_readme_says_the_checkpoint_interval_the_long_stage_notice_and_adapts_average():
    from sparse_adapt.corpus.adapt import ADAPT_SETTINGS
    from sparse_adapt.training.config import DistillConfig, MLMConfig
    from sparse_adapt.training.loop import LONG_STAGE

    text = " ".join(readme_text().split())
    every = int(re.search(r"`checkpoint_every` \(default (\d+) optimiser steps", text).group(1))
    assert every == MLMConfig().checkpoint_every == DistillConfig().checkpoint_every
    said = re.search(r"a stage of more than ([\d,]+) steps without either says so", text)
    long_stage = int(said.group(1).replace(",", ""))
    assert long_stage == LONG_STAGE
    average = ADAPT_SETTINGS["distill"]["interpolate"]
    assert f"`adapt` uses {average:g} (measured" in text and f"(`adapt`: {average:g};" in text


# The bring-your-own-corpus commands, whose synopses in the README show defaults as
# ``[--top 20]``: one changed in the code (or the README) alone fails here.
BYOC_COMMANDS = ("adapt", "mine-terms", "build-dictionary", "make-train")
# A literal default, not a placeholder (``[--base B]``, ``[--terms T]``).
LITERAL = re.compile(r"\d+(?:\.\d+)?|[a-z][a-z0-9-]*")


def test_the_byoc_synopses_and_make_train_show_the_defaults():
    readme = readme_text()
    group = typer.main.get_command(app)
    shown = []  # (where, command, option, value the README gives)
    for line, text in code_text(readme):
        for m in re.finditer(r"(?<![\w/.-])sparse-adapt ([a-z][a-z-]*)([^\n]*)", text):
            if m.group(1) in BYOC_COMMANDS:
                for o in re.finditer(r"\[(--[a-z][a-z0-9-]*) ([^\]\s|]+)", m.group(2)):
                    if LITERAL.fullmatch(o.group(2)):
                        shown.append((line, m.group(1), o.group(1), o.group(2)))
    # make-train's section gives its list options' defaults in prose: "`--negatives` (7)"
    section = readme.split("### `sparse-adapt make-train", 1)[1].split("\n### ", 1)[0]
    shown += [("make-train section", "make-train", o, v)
              for o, v in re.findall(r"`(--[a-z][a-z0-9-]*)` \((\d+)\)", section)]
    wrong = []
    for where, command, option, value in shown:
        [param] = [p for p in group.commands[command].params if option in p.opts]
        if str(param.default) != value:
            wrong.append(f"README.md:{where}: {command} {option}: README says {value}, default is {param.default!r}")
    assert not wrong, "\n".join(wrong)
    options = {(c, o) for _, c, o, _ in shown}
    assert {("adapt", "--top"), ("adapt", "--siblings"), ("mine-terms", "--min-count"), ("make-train", "--seed"),
            ("make-train", "--max-queries"), ("make-train", "--negatives"), ("make-train", "--siblings")} <= options


def test_the_adapt_folder_table_names_what_adapt_writes():
    """The README's table of `adapt`'s ``DIR`` lists every file and folder a run writes there,
    by the names the code gives them."""
    from sparse_adapt.corpus.adapt_folder import PRETRAINED, RUN_OUTPUTS

    readme = readme_text()
    table = readme.split("| file in `DIR` | content |", 1)[1].split("\n\n", 1)[0]
    named = {name.rstrip("/") for row in table.splitlines()[2:]
             for name in re.findall(r"`([^`]+)`", row.split(" | ")[0])}
    assert named == {*RUN_OUTPUTS, PRETRAINED}


def test_the_readme_names_the_adapt_summary_schema():
    from sparse_adapt.report.adapt import SCHEMA

    assert f"schema `{SCHEMA}`" in readme_text()


def _readme_number(readme: str, pattern: str) -> str:
    found = re.findall(pattern, readme)
    assert len(found) == 1, f"README: expected one match of {pattern!r}, found {found}"
    return found[0]


def test_the_readme_numbers_of_the_models_section_are_the_code_defaults(tmp_path):
    """The defaults the README's command overview and "Models" sections state in prose (not in a
    code span test_every_documented_command_and_option_exists reads): a changed default or a
    reworded README fails here instead of drifting apart."""
    import optuna

    from sparse_adapt.cli.model import SHOWN_TERMS
    from sparse_adapt.cli.output import MAX_SEED
    from sparse_adapt.modeling.base import DEFAULT_TARGET_ACTIVE, OFFLINE_MINILM_BIAS
    from sparse_adapt.modeling.encoder import SpladeSettings
    from sparse_adapt.modeling.onnx import TOLERANCE
    from sparse_adapt.training.general import GeneralConfig
    from sparse_adapt.training.study import open_study

    readme = readme_text()
    commands = typer.main.get_command(app).commands

    def default(command: str, option: str):
        return next(p.default for p in commands[command].params if option in p.opts)

    def bound(command: str, option: str) -> tuple:
        p = next(p for p in commands[command].params if option in p.opts)
        return p.min, p.max

    fields = SpladeSettings.__dataclass_fields__
    lengths = _readme_number(readme, r"maximum lengths \((\d+) and (\d+) pieces by default")
    assert tuple(map(int, lengths)) == (fields["query_max_length"].default, fields["doc_max_length"].default)
    assert float(_readme_number(readme, r"converted\nthis way with bias \*\*(-?[\d.]+)\*\*")) == OFFLINE_MINILM_BIAS
    target = int(_readme_number(readme, r"`--target-active` \(default (\d+)\)"))
    assert target == DEFAULT_TARGET_ACTIVE == default("base", "--target-active")
    assert int(_readme_number(readme, r"`extend-vocab` lists at most (\d+) terms")) == SHOWN_TERMS
    seeds = _readme_number(readme, r"`--seed` takes 0 to 2\^(\d+) - 1 \(`tune`: to 2\^(\d+) - 1\)")
    assert bound("train", "--seed") == (0, 2 ** int(seeds[0]) - 1) == (0, MAX_SEED)
    assert bound("tune", "--seed") == (0, 2 ** int(seeds[1]) - 1)
    opset = int(_readme_number(readme, r"`sparse-adapt onnx --model DIR --out DIR \[--opset (\d+)\]`"))
    assert opset == default("onnx", "--opset") == int(_readme_number(readme, r"Opsets below (\d+)\nare refused"))
    assert float(_readme_number(readme, r"max abs difference of ([\de.-]+)")) == TOLERANCE
    general = GeneralConfig()
    steps, batch = _readme_number(readme, r"\((\d+) x (\d+) = [\d,]+ by default\)")
    assert (int(steps), int(batch)) == (general.steps, general.batch_size)
    temperature = _readme_number(readme, r"in-batch similarity distribution \(temperature ([\d.]+)\)")
    assert float(temperature) == general.teacher_temperature
    assert float(_readme_number(readme, r"plus FLOPS \(([\d.]+)\)")) == general.sp
    assert float(_readme_number(readme, r"The whole base trains at lr ([\de.-]+)")) == general.lr
    every = _readme_number(readme, r"every (\d+) steps \(`GeneralConfig.checkpoint_every`\)")
    assert int(every) == general.checkpoint_every
    random_trials = int(_readme_number(readme, r"TPE samples at random until (\d+) trials have run"))
    study, _ = open_study(tmp_path, "readme", 0, optuna.pruners.NopPruner())
    assert study.sampler._n_startup_trials == random_trials


# bench/README.md documents the benchmark modules' options; their parsers are read from the source
# (importing bench/*.py loads torch, and running one builds models), so these checks stay fast.
BENCH_README = ROOT / "bench" / "README.md"
BENCH_RESULTS = ROOT / "bench" / "results"


def _bench_parser(module: str) -> dict[str, object]:
    """``{--option: default}`` of ``bench/MODULE.py``'s argument parser (hidden options left out;
    ``...`` where the default is computed, not a literal)."""
    import ast

    options = {}
    for node in ast.walk(ast.parse((ROOT / "bench" / f"{module}.py").read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument" and node.args):
            continue
        name, keywords = node.args[0], {k.arg: k.value for k in node.keywords}
        if not (isinstance(name, ast.Constant) and name.value.startswith("--")):
            continue  # a positional argument, or encode's worker options built in a loop (all hidden)
        if getattr(keywords.get("help"), "attr", None) == "SUPPRESS":
            continue
        try:
            default = ast.literal_eval(keywords["default"]) if "default" in keywords else None
        except ValueError:
            default = ...
        options[name.value] = default
    return options


def _bench_sections() -> dict[str, tuple[int, str]]:
    """``{module: (first line, text)}`` of each bench/README.md section headed by ``python -m bench.MODULE``
    (its ``###`` subsections included: bench.compare's goes on with bench.byoc's options)."""
    text = BENCH_README.read_text(encoding="utf-8")
    sections = {}
    for m in re.finditer(r"^## [^\n]*`python -m bench\.(\w+)[^\n]*\n.*?(?=^## |\Z)", text, flags=re.M | re.S):
        sections[m.group(1)] = (text[: m.start()].count("\n") + 1, m.group(0))
    return sections


def _bench_options_shown(module: str, section: str) -> list[tuple[int, str, str | None]]:
    """(line in the section, option, the value shown with it or None) for every option the
    section's code gives ``bench.MODULE``: in a ``python -m bench.MODULE`` invocation (a literal
    ``[--opt VALUE]`` counts as its default) and in code spans that are an option alone."""
    shown = []
    for line, code in code_text(section):
        for m in re.finditer(rf"python -m bench\.{module}\b([^\n|#]*)", code):
            bracketed = dict(re.findall(r"\[(--[a-z][a-z0-9-]*) ([^\]\s|]+)\]", m.group(1)))
            for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", m.group(1)):
                value = bracketed.get(option)
                shown.append((line, option, value if value and LITERAL.fullmatch(value) else None))
        if re.match(r"--[a-z]", code):
            shown.append((line, code.split()[0], None))
    return shown


def test_every_option_the_docs_give_a_benchmark_is_in_its_parser():
    wrong, checked = [], 0
    for doc in DOCS:  # invocations anywhere: the results sections and the record repeat the commands
        for line, code in code_text((ROOT / doc).read_text(encoding="utf-8")):
            for m in re.finditer(r"(?<![\w/.-])bench\.(\w+)\b([^\n|#;]*)", code):  # with or without python -m
                if not (ROOT / "bench" / f"{m.group(1)}.py").is_file():
                    wrong.append(f"{doc}:{line}: no module bench.{m.group(1)}")
                    continue
                known = _bench_parser(m.group(1))
                for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", m.group(2)):
                    checked += 1
                    if option not in known and option != "--help":
                        wrong.append(f"{doc}:{line}: bench.{m.group(1)} has no option {option}")
    for module, (start, section) in _bench_sections().items():
        known = _bench_parser(module)
        for line, option, _ in _bench_options_shown(module, section):
            checked += 1
            if option not in known:
                wrong.append(f"bench/README.md:{start + line - 1}: bench.{module} has no option {option}")
    assert not wrong, "\n".join(wrong)
    assert checked > 50


def test_the_bench_readme_options_lists_are_complete_and_give_the_defaults():
    """A section that lists a benchmark's options ("Options: ...") names every option its parser
    has, and a default it states, as ``--opt`` (600), ``--opt N`` (default 600), ``--opt`` (what
    it is; 1) or ``[--opt 600]``, is the parser's."""
    wrong, defaults = [], 0
    for module, (start, section) in _bench_sections().items():
        known = _bench_parser(module)
        shown = _bench_options_shown(module, section)
        if "Options:" in section:
            wrong += [f"bench/README.md, bench.{module}: {o} is not listed" for o in known
                      if o not in {option for _, option, _ in shown}]
        stated = [(o, v) for _, o, v in shown if v is not None]
        prose = re.sub(r"\s+", " ", section)
        stated += [(o, v) for o, v in re.findall(
            r"`(--[a-z][a-z0-9-]*)[^`]*` \((?:[^()`]*; )?(?:default )?([\w.,-]+)\)", prose)]
        for option, value in stated:
            if option in known and known[option] is not ...:
                defaults += 1
                if str(known[option]) != value:
                    wrong.append(f"bench/README.md, section at line {start}: bench.{module} {option}: says {value}, "
                                 f"default is {known[option]!r}")
    assert not wrong, "\n".join(wrong)
    assert defaults > 15


def test_the_bench_readme_names_the_systems_the_benchmarks_run():
    import ast

    def constant(module: str, name: str):
        tree = ast.parse((ROOT / "bench" / f"{module}.py").read_text(encoding="utf-8"))
        return next(ast.literal_eval(n.value) for n in tree.body
                    if isinstance(n, ast.Assign) and any(getattr(t, "id", None) == name for t in n.targets))

    sections = _bench_sections()
    encode = sections["encode"][1].split("| system | what it does |", 1)[1].split("\n\n", 1)[0]
    assert re.findall(r"^\| `([\w-]+)`", encode, flags=re.M) == list(constant("encode", "SYSTEMS"))
    train = sections["train"][1].split("| part | sparse-adapt | peer |", 1)[1].split("\n\n", 1)[0]
    assert re.findall(r"^\| `([\w-]+)`", train, flags=re.M) == list(constant("train", "PARTS"))
    named = set(re.findall(r"`([\w-]+)`(?::| =)", train))
    assert named == {s for systems in constant("train", "SYSTEMS").values() for s in systems}
    onnx = set(re.findall(r"system `([\w-]+)`", sections["onnx"][1]))
    assert onnx == set(constant("onnx", "SYSTEMS"))


def test_the_dense_reference_table_gives_the_splits_and_query_counts_of_the_domains():
    """Each row's split is the domain's in ``corpora.SPLITS``, a row's "(a / b / c queries" are its
    held-out semantic / explicit / control group sizes, and the other rows' sizes are the range
    the section states ("N-M queries each")."""
    import json

    import corpora

    section = _bench_sections()["dense"][1]
    body = section.split("\n|---", 1)[1]  # below the header row
    rows = re.findall(r"^\| (\w+)(?: \((\d+) / (\d+) / (\d+) queries[^)]*\))? \| (\w+) \|", body, flags=re.M)
    assert len(rows) >= 5
    split_of = {d: split for split, members in corpora.SPLITS.items() for d in members} | {"gatrocraptic": "bundled"}
    wrong, sizes = [], []
    for domain, *counts, split in rows:
        if split_of.get(domain) != split:
            wrong.append(f"{domain}: split {split}, corpora.SPLITS says {split_of.get(domain)}")
        groups = json.loads(corpora.get(domain).query_groups.read_text(encoding="utf-8"))
        held = [len(groups.get(f"heldout-{g}", [])) for g in ("domain-semantic", "domain-explicit", "control")]
        if counts[0]:
            if list(map(int, counts)) != held:
                wrong.append(f"{domain}: {' / '.join(counts)} queries, the groups hold {held}")
        else:
            sizes += [n for n in held if n]
    low, high = map(int, re.search(r"held-out groups, (\d+)-(\d+) queries each", section).groups())
    assert not wrong, "\n".join(wrong)
    assert (low, high) == (min(sizes), max(sizes))


def test_every_results_file_the_bench_readme_names_is_stored():
    """A ``*.json`` named in the bench README's prose is a stored result; the names in commands
    (``--json variant.json``) are outputs a reader writes."""
    text = BENCH_README.read_text(encoding="utf-8")
    named = []
    for line, span in code_text(text):
        if "python -m" in span or "sparse-adapt " in span or "\n" in span:
            continue
        named += [(line, m) for m in re.findall(r"(?:^|/)([\w.-]+\.json)$", span)]
    # and a ``results/NAME`` path anywhere, prose included
    named += [(text[: m.start()].count("\n") + 1, m.group(1))
              for m in re.finditer(r"(?<![\w/])(?:bench/)?results/([\w.+-]+\.(?:json|md))", text)]
    missing = [f"bench/README.md:{line}: {name}" for line, name in named if not (BENCH_RESULTS / name).is_file()]
    assert not missing, "\n".join(missing)
    assert len(named) > 40


def _tables(markdown: str) -> list[tuple[int, list[str], list[list[str]]]]:
    """(start offset, header cells, body rows) of every pipe table, bold marks dropped."""
    out = []
    for m in re.finditer(r"(?m)^(\|.*\|\n)\|[-|]+\|\n((?:\|.*\|\n)*)", markdown):
        cells = [[c.strip().replace("**", "") for c in row.strip().strip("|").split("|")]
                 for row in (m.group(1) + m.group(2)).splitlines()]
        out.append((m.start(), cells[0], cells[1:]))
    return out


# bench.train's system names by the words of the README's labels, the first match wins
TRAIN_SYSTEMS = (("SparseEncoderTrainer", "st-trainer"), ("group_by_length", "hf-trainer-grouped"),
                 ("Trainer", "hf-trainer"), ("batch_tokens", "sparse-adapt-budget"), ("sparse-adapt", "sparse-adapt"))


def _agrees(shown: str, value: float) -> bool:
    """``shown`` is ``value`` as printed: within half a unit of its last digit."""
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    return abs(float(shown) - value) <= 0.5 * 10 ** -decimals + 1e-9


def test_the_bench_readme_result_tables_are_the_stored_results():
    """Each table of the bench README's results is what its results file holds: a re-measured
    file with a table left behind (or a number miscopied) fails here."""
    import json
    from statistics import median

    text = BENCH_README.read_text(encoding="utf-8")
    results = text.split("\n## Results\n", 1)[1]
    offset = len(text) - len(results)
    wrong, checked, previous_end = [], 0, 0

    def load(name: str):
        return json.loads((BENCH_RESULTS / name).read_text(encoding="utf-8"))

    def check(where: str, shown: str, value: float) -> None:
        nonlocal checked
        checked += 1
        if not _agrees(shown, value):
            wrong.append(f"{where}: README {shown}, results file {value}")

    for start, header, rows in _tables(results):
        line = text[: offset + start].count("\n") + 1
        named = re.findall(r"([\w.-]+\.json)`", results[previous_end:start])
        previous_end = start
        if header[:4] == ["model", "system", "docs/s", "seconds"]:
            data = load("encode.json" if "CPU s" in header else "export.json")["results"]
            model = None
            for row in rows:
                if row[0]:
                    model = {"MiniLM": "minilm", "BERT-base": "bert-base"}[re.match(r"[\w-]+", row[0]).group()]
                system = {"sparse-adapt export": "sparse-adapt-export"}.get(row[1], row[1])
                got = data[model][system]
                columns = {"docs/s": "docs_per_s", "seconds": "seconds", "CPU s": "cpu_seconds",
                           "peak RSS MB": "peak_rss_mb", "time / hf-loop": "time_ratio", "CPU / hf-loop": "cpu_ratio",
                           "RSS / hf-loop": "rss_ratio"}
                for name, cell in zip(header, row):
                    if name in columns:
                        check(f"bench/README.md:{line} {model}/{system} {name}", cell, got[columns[name]])
                assert row[header.index("top-10 identical")].startswith(f"{got['top10_identical']}/{got['docs']}")
        elif header[:3] == ["head", "loss", "s/step"]:
            data = load("train_step.json")["results"]
            columns = {"s/step": "seconds_per_step", "time / KD-only": "time_ratio_to_kd", "CPU s/step":
                       "cpu_seconds_per_step", "CPU / KD-only": "cpu_ratio_to_kd", "peak RSS MB": "peak_rss_mb"}
            for row in rows:
                got = data["full" if row[0].startswith("full") else "chunked"]["kd" if "KD" in row[1] else "six"]
                for name, cell in zip(header, row):
                    if name in columns:
                        check(f"bench/README.md:{line} {row[0]}/{row[1]} {name}", cell, got[columns[name]])
        elif header[:3] == ["batch", "system", "ms/query"]:
            data = load("onnx.json")["rows"]
            for row in rows:
                system = "pytorch" if row[1].startswith("PyTorch") else "onnxruntime"
                [got] = [r for r in data if r["batch_size"] == int(row[0]) and r["system"] == system]
                check(f"bench/README.md:{line} {row[0]}/{system} ms/query", row[2], got["ms_per_query"])
                check(f"bench/README.md:{line} {row[0]}/{system} ratio", row[3], got["ratio_to_pytorch"])
        elif header[:2] == ["part", "system"] and header[2].startswith("seconds"):
            runs = []
            for name in named:
                data = load(name)
                # train.json holds two invocations; the table is its first, the 3-round one
                first = next(d for d in (data, *data.values()) if isinstance(d, dict) and "runs" in d)
                runs += [r for r in first["runs"] if r["part"] in ("warmup", "distill")]
            assert runs, f"bench/README.md:{line}: no results file with runs named before the table"
            part = None
            for row in rows:
                part = row[0].split()[0] if row[0] else part
                if part not in ("warmup", "distill"):
                    continue
                system = next(s for needle, s in TRAIN_SYSTEMS if needle in row[1])
                mine = [r for r in runs if r["part"] == part and r["system"] == system]
                assert mine, f"bench/README.md:{line}: no {part}/{system} run in {named}"
                peer = [r["seconds"] for r in runs if r["part"] == part and r["system"] in ("hf-trainer", "st-trainer")]
                where = f"bench/README.md:{line} {part}/{system}"
                for shown, seconds in zip(row[2].split(", "), [r["seconds"] for r in mine] if "," in row[2]
                                          else [median(r["seconds"] for r in mine)]):
                    check(f"{where} seconds", shown, seconds)
                check(f"{where} ratio", row[3], median(r["seconds"] for r in mine) / median(peer))
                rss = row[header.index("peak RSS MB")]
                if rss:
                    check(f"{where} peak RSS", rss, median(r["peak_rss_mb"] for r in mine))
    assert not wrong, "\n".join(wrong)
    assert checked >= 150, checked  # all eight tables recognised (157 numbers; the ONNX table alone has 8)


def test_the_bench_readme_counts_the_documents_of_a_measured_training_step():
    """The training-step table's batch as ``bench.train_step`` builds it for the stored run: its
    queries' candidate lists, each distinct document once."""
    import json

    from corpora import GATROCRAPTIC
    from sparse_adapt.data import load_train
    from sparse_adapt.training.stages import collate_candidates

    text = " ".join(BENCH_README.read_text(encoding="utf-8").split())
    said = re.search(r"(\d+) queries x (\d+) candidates = (\d+) unique synthetic documents", text)
    settings = json.loads((BENCH_RESULTS / "train_step.json").read_text(encoding="utf-8"))["settings"]
    texts, index, _ = collate_candidates(load_train(GATROCRAPTIC.train)[: settings["queries"]])
    assert tuple(map(int, said.groups())) == (settings["queries"], index.shape[1], len(texts))


# bench/RESULTS.md is a dated record: its sections keep the names and figures of their day, so
# these tests check what stays true of such a record (the files it cites exist, the tables it
# recomputed from them match them), never today's wording.
RESULTS_MD = ROOT / "bench" / "RESULTS.md"


def _expand_braces(name: str) -> list[str]:
    """``suite-{a,b}{,-pool}.json`` as the four names a shell would make of it."""
    m = re.search(r"\{([^{}]*)\}", name)
    if m is None:
        return [name]
    return [out for alt in m.group(1).split(",") for out in _expand_braces(name[: m.start()] + alt + name[m.end():])]


def test_the_results_record_cites_only_files_that_exist():
    """A result file the record names (``bench/results/NAME.json``, a bare ``NAME.md``, a
    ``{a,b}`` family, ``NAME.{json,md}``, ``NAME.*``) exists: in ``bench/results/`` when the
    path says so, else there or anywhere under ``bench/`` or ``corpora/``. Scratch paths
    (``/work/...``) are left out: they were on the machine of the session that wrote them."""
    text = RESULTS_MD.read_text(encoding="utf-8")
    results = ROOT / "bench" / "results"
    elsewhere = {p.name for top in ("bench", "corpora") for p in (ROOT / top).rglob("*")}
    elsewhere |= {p.name for p in ROOT.iterdir()}
    checked, missing = 0, []
    for m in re.finditer(r"(?<![\w{},.*/-])([\w{},/-][\w{},./-]*)\.(json|md|\*|\{[a-z,]+\})(?![\w*-])", text):
        token = f"{m.group(1)}.{m.group(2)}"
        if "/work/" in token or token.startswith("/"):
            continue
        for name in _expand_braces(token):
            in_results = "bench/results/" in name
            base = name.rsplit("/", 1)[-1]
            if in_results or "*" in base:
                found = any(results.glob(base))
            else:
                found = (results / base).exists() or base in elsewhere
            checked += 1
            if not found:
                missing.append(f"bench/RESULTS.md:{text[: m.start()].count(chr(10)) + 1}: {name}")
    assert not missing, "\n".join(missing)
    assert checked > 200  # the scan did read the record's tables


def test_the_thirty_sixth_sessions_table_is_what_its_files_hold(monkeypatch):
    """The thirty-sixth session recomputed every stored pooled test per query and tabled, per
    result file, split and held-out group: queries, base -> adapted means, query-seed pairs and
    "crosses 0.05" where the per-query and the per-pair p fall on different sides of 0.05. The
    counts and means are recomputed by the benchmark's own pooling (its permutation test, minutes
    on these files, is stubbed out); the marks are checked against the table's two p columns."""
    from sparse_adapt.report import pooled as pooling

    monkeypatch.setattr(pooling, "paired_test", lambda adapted, base: {})
    section = RESULTS_MD.read_text(encoding="utf-8").split("\n## Thirty-sixth session", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\S+\.json) \| (\w+) \| ([\w-]+) \| (\d+) \| ([\d.]+) -> ([\d.]+) \| (<?[\d.]+)"
                      r"( \*\*crosses 0\.05\*\*)? \| (\d+) \| (<?[\d.]+) \|$", section, flags=re.M)
    assert len(rows) >= 50  # the table was found and read
    wrong, stored = [], {}
    for name, split, group, queries, base, adapted, p_query, crosses, pairs, p_pairs in rows:
        if name not in stored:
            report = json.loads((ROOT / "bench" / "results" / name).read_text(encoding="utf-8"))
            pooled = pooling.pooled(report["results"], report["inputs"]["seeds"])
            stored[name] = {(p["split"], p["group"]): p for p in pooled}
        p = stored[name].get((split, f"heldout-{group}"))
        said = (int(queries), base, adapted, int(pairs))
        if p is None or said != (p["queries"], f"{p['base']:.3f}", f"{p['adapted']:.3f}", p["queries"] * p["seeds"]):
            wrong.append(f"{name} {split} {group}: the table says {said}, the file gives {p}")
        below = [float(v.lstrip("<")) < 0.05 for v in (p_query, p_pairs)]
        if bool(crosses) != (below[0] != below[1]):
            wrong.append(f"{name} {split} {group}: p {p_query} per query, {p_pairs} over pairs, marked {bool(crosses)}")
    assert not wrong, "\n".join(wrong)


# The thirty-seventh session's rows and the stored per-query values each is computed from (every
# query's [distilled, 0.5 average] nDCG@10, one list per seed): file, key in it (None: the file is
# the list), and the split and inputs of the rows that count (None: any).
THIRTY_SEVENTH_ROWS = {
    "L:": ("wise-extend-final.json", None, "dev", None),
    "M(c):": ("average-rules.json", "M(c) minilm hand-written, dev", None, None),
    "M(a):": ("average-rules.json", "M(a) tiny corpus, dev: averaged vs final=distilled", None, None),
    "M(b):": ("average-rules.json", "M(b) tiny hand-written, dev", None, None),
    "T:": ("tiny-average-new-domains.json", "rows", None, None),
    "once, test: `offline-minilm`, corpus": ("wise-extend-final.json", None, "test", None),
    "once, test: `offline-minilm`, hand-written": ("average-rules.json", "once: minilm hand-written test", None, None),
    "once, test: `offline-splade-tiny`, corpus": ("average-rules.json", "once: tiny test (distilled vs averaged)",
                                                  None, "corpus"),
    "once, test: `offline-splade-tiny`, hand-written": ("average-rules.json", "once: tiny test (distilled vs averaged)",
                                                        None, "hand-written"),
}


def test_the_thirty_seventh_sessions_table_is_what_its_files_hold():
    """Each cell of the thirty-seventh session's per-query table (distilled -> 0.5 average, seeds
    averaged, differences within ``bench.compare.TIE`` tied) recomputed from the files the section
    cites: means, query counts, ups / downs and, where at most 12 queries moved (an exact test
    of 4,096 sign flips at most; 15 take a second), the p-value to the decimals written. Cells
    computed with the files' rounding noise counted as changes were corrected in the fifty-sixth
    session."""
    from statistics import mean

    from bench.compare import TIE
    from sparse_adapt.report.paired import paired_test

    section = RESULTS_MD.read_text(encoding="utf-8").split("\n## Thirty-seventh session", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if any(line.startswith(f"| {k}") for k in THIRTY_SEVENTH_ROWS)]
    groups = ("heldout-domain-semantic", "heldout-domain-explicit", "heldout-control")
    cell = re.compile(r"([\d.]+) -> ([\d.]+)(?: \((\d+)(?:, (\d+)(?: up)? / (\d+)(?: down)?)?(?:, p = ([\d.]+))?)?")
    wrong, exact, files = [], 0, {}
    assert len(table) == len(THIRTY_SEVENTH_ROWS)
    for line in table:
        label, *cells = [c.strip() for c in line.strip("|").split(" | ")]
        [(name, key, split, inputs)] = [v for k, v in THIRTY_SEVENTH_ROWS.items() if label.startswith(k)]
        if name not in files:
            files[name] = json.loads((ROOT / "bench" / "results" / name).read_text(encoding="utf-8"))
        data = files[name]
        rows = [r for r in (data if key is None else data[key])
                if split in (None, r.get("split")) and inputs in (None, r.get("inputs"))]
        for group, text in zip(groups, cells):
            m = cell.match(text)
            if m is None:
                continue  # a blank cell: not reported
            seeds: dict[tuple, list] = {}
            for r in rows:
                for q, pair in r["groups"][group]["per_query"].items():
                    seeds.setdefault((r["domain"], r.get("inputs"), q), []).append(pair)
            before = [mean(p[0] for p in v) for v in seeds.values()]
            after = [mean(p[1] for p in v) for v in seeds.values()]
            change = [a - b for a, b in zip(after, before)]
            ups, downs = sum(c > TIE for c in change), sum(c < -TIE for c in change)
            got = {1: f"{mean(before):.3f}", 2: f"{mean(after):.3f}", 3: str(len(before)), 4: str(ups), 5: str(downs)}
            if m.group(6) and ups + downs <= 12:
                exact += 1
                decimals = len(m.group(6).split(".")[1])
                got[6] = f"{paired_test(after, before, tie=TIE)['p_value']:.{decimals}f}"
            said = {i: m.group(i) for i in got if m.group(i) is not None}
            if said != {i: got[i] for i in said}:
                wrong.append(f"{label} {group}: the table says {said}, {name} gives {got}")
    assert not wrong, "\n".join(wrong)
    assert exact >= 5


def test_results_md_per_run_rows_are_their_results_files_rows():
    # The per-run tables of bench/RESULTS.md (one row per domain, base, inputs and seed) are
    # copies of bench/results/byoc.json and byoc-pretrain.json; nothing regenerates them, so a row
    # edited by hand or a re-measured run left out of the table would drift unseen.
    import json

    rows = {name: json.loads((ROOT / "bench" / "results" / name).read_text(encoding="utf-8"))
            for name in ("byoc.json", "byoc-pretrain.json")}
    groups = ["heldout-domain-semantic", "heldout-domain-explicit", "heldout-control"]
    cell = re.compile(r"(\d\.\d+) -> (\d\.\d+) \(([+-]\d\.\d+), n=(\d+)(?:; (\d+)/(\d+)/(\d+), p=(\d\.\d+))?\)")
    checked, wrong = 0, []
    for number, line in enumerate(RESULTS_MD.read_text(encoding="utf-8").splitlines(), 1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        head = re.fullmatch(r"(\w+) \((dev|test)\)", cells[0]) if len(cells) == 9 else None
        if not head or not cells[3].isdigit() or not (ROOT / "corpora" / head.group(1)).is_dir():
            continue
        base = re.match(r"`(offline-minilm|offline-splade-tiny)`", cells[1]).group(1)
        source = "byoc-pretrain.json" if cells[1].endswith("pretrained") else "byoc.json"
        found = [r for r in rows[source] if (r["domain"], r["split"], r["base"], r["inputs"], r.get("seed", 0))
                 == (head.group(1), head.group(2), base, cells[2], int(cells[3]))]
        assert len(found) == 1, f"RESULTS.md:{number}: {len(found)} rows of {source} for {cells[:4]}"
        queries = json.loads((ROOT / "corpora" / head.group(1) / "query_groups.json").read_text(encoding="utf-8"))
        for group, text in zip(groups, cells[4:7]):
            m = cell.match(text)
            stored = found[0]["groups"][group]
            said = [float(m.group(k)) for k in (1, 2, 3)]
            kept = [stored[k] for k in ("base", "adapted", "change")]
            if any(abs(s - v) > 0.0005 + 1e-6 for s, v in zip(said, kept)):
                wrong.append(f"RESULTS.md:{number}: {group} says {text}, {source} has {stored['base']:.3f} -> "
                             f"{stored['adapted']:.3f} ({stored['change']:+.3f})")
            if int(m.group(4)) != stored["queries"] or stored["queries"] != len(queries[group]):
                wrong.append(f"RESULTS.md:{number}: {group} n={m.group(4)}, the corpus has {len(queries[group])}")
            if m.group(5) is not None:
                counts = tuple(int(m.group(k)) for k in (5, 6, 7))
                p_said, digits = float(m.group(8)), len(m.group(8).split(".")[1])
                p_off = abs(stored["p_value"] - p_said) > 0.5 * 10 ** -digits + 1e-6
                if counts != (stored["wins"], stored["ties"], stored["losses"]) or p_off:
                    wrong.append(f"RESULTS.md:{number}: {group} says {text}, {source} has {stored['wins']}/"
                                 f"{stored['ties']}/{stored['losses']}, p={stored['p_value']}")
        verdict = (found[0]["semantic_ok"], found[0]["controls_ok"])
        if ("semantic pass" in cells[7], "controls pass" in cells[7]) != verdict:
            wrong.append(f"RESULTS.md:{number}: criteria say {cells[7]!r}, {source} has ok = {verdict}")
        checked += 1
    assert checked > 60  # the scanner did read the tables
    assert not wrong, "\n".join(wrong)
