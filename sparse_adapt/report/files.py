"""Writing the report: PNGs, ``report.json`` and ``report.md``, each atomically."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Iterator

from sparse_adapt.atomic import write_atomic
from sparse_adapt.corpus.adapt_folder import PRETRAINED
from sparse_adapt.lock import LOCK_FILE
from sparse_adapt.report.benchmark_md import PIPELINES, STEMS
from sparse_adapt.report.figures import figures
from sparse_adapt.report.markdown import render_markdown
from sparse_adapt.report.results import PLOTS, RUNS_DIR, Report
from sparse_adapt.training.rundir import PARTIAL
from sparse_adapt.training.stages import EXPERIMENTS

# Directories `sparse-adapt benchmark` writes (adapt's pipelines run into OUT/<pipeline>);
# `adapt` also writes pretrained/ (and pretrained.partial/ while pretraining) and `tune`
# prefix/, told apart by their own files first.
BENCHMARK_DIRS = ("prefix", PRETRAINED, PRETRAINED + PARTIAL, "ablation", *(name for name, p in PIPELINES.items() if p.through_adapt))
# What marks another command's directory: `adapt`'s manifest, `tune`'s results and trial logs.
OTHER_OUTPUTS = {"adapt": ("adapt.json",), "tune": ("best.toml", "trials.json", "trials")}


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def slug(term: str) -> str:
    """A file-name part for ``term``: the term itself when it is plain ASCII letters, digits, ``_``
    and ``-``; else its word characters plus a hash of the whole, so "C++" and "C#", or "Zürich"
    and "Zérich", never share a file (they had overwritten each other)."""
    if re.fullmatch(r"[A-Za-z0-9_-]+", term):
        return term
    digest = hashlib.sha256(term.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    words = re.sub(r"[^\w-]+", "_", term)[:60]
    return f"{words}-{digest}"


def _entries(path: Path) -> list[str]:
    # Hidden entries (a lock, a killed write's temporary) say nothing about whose runs these are.
    return [p.name for p in path.iterdir() if not p.name.startswith(".")] if path.is_dir() else []


def holds_files(out: Path) -> bool:
    """``out`` holds something besides a lock file and empty directories."""
    return any(p.name != LOCK_FILE and (not p.is_dir() or any(p.iterdir())) for p in Path(out).iterdir())


# Files only sparse-adapt writes in its runs: a training run's manifest, a saved model's
# settings, `adapt`'s manifest. A folder of runs is ours when it holds one (or only empty folders,
# a run stopped before it wrote anything), not by its name: a user's own runs/ or ablation/
# had been written into.
RUN_MARKERS = ("run.json", "sparse_adapt.json", "adapt.json")


def _schema(path: Path) -> str:
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("schema")
    except (OSError, ValueError, UnicodeDecodeError, AttributeError):
        return ""
    return value if isinstance(value, str) else ""


def _files(path: Path, depth: int) -> Iterator[str]:
    for child in path.iterdir():
        if child.name.startswith("."):  # a lock, a killed write's temporary
            continue
        if child.is_dir():
            if depth:
                yield from _files(child, depth - 1)
        else:
            yield child.name


def _ours(path: Path, depth: int = 4) -> bool:
    """``path`` holds one of :data:`RUN_MARKERS` within ``depth`` levels, or no file at all."""
    names = list(_files(path, depth))
    return not names or any(n in RUN_MARKERS for n in names)


def _runs_of_ours(path: Path) -> bool:
    """Each entry of ``path`` is a run folder of ours (:func:`_ours`): a user's run beside ours is theirs."""
    return all(e.is_dir() and _ours(e, 3) for e in path.iterdir() if not e.name.startswith("."))


def output_kind(out: Path) -> str | None:
    """Whose output directory ``out`` is: ``"report"``, ``"benchmark"``, ``"adapt"``, ``"tune"``
    or None (none of theirs).

    Both keep their runs in ``OUT/runs``: a report's are named by experiment (H1-H4), a
    benchmark's by domain. An empty ``runs/`` proves nothing and counts for neither (run folders
    in it holding no file yet, runs stopped before they wrote one, count as ours). A
    ``report.json`` or ``benchmark.json`` counts by its ``schema``, a folder of runs by
    :func:`_runs_of_ours`: a user's folder holding files of those names is nobody's."""
    out = Path(out)
    if _schema(out / "report.json").startswith("sparse-adapt.report/"):
        return "report"
    for command, markers in OTHER_OUTPUTS.items():
        if any((out / m).exists() for m in markers):
            return command
    if any(_schema(out / f"{stem}.json").startswith("sparse-adapt.benchmark/") for stem in STEMS):
        return "benchmark"
    runs = _entries(out / RUNS_DIR)
    if runs and _runs_of_ours(out / RUNS_DIR):
        return "report" if all(r in EXPERIMENTS for r in runs) else "benchmark"
    if any(_entries(out / d) and _ours(out / d) for d in BENCHMARK_DIRS):
        return "benchmark"
    return None


def write_report(report: Report, out: Path) -> dict[str, Path]:
    """Write the PNGs, ``report.json`` and ``report.md`` (last, each atomically)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for key, png in figures(report).items():
        path = out / PLOTS[key]
        write_atomic(path, png)
        written[key] = path
    write_atomic(out / "report.json", to_json(report.to_dict()))
    write_atomic(out / "report.md", render_markdown(report, out))
    written["json"], written["markdown"] = out / "report.json", out / "report.md"
    return written
