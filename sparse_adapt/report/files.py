"""Writing the report: PNGs, ``report.json`` and ``report.md``, each atomically."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from sparse_adapt.atomic import write_atomic
from sparse_adapt.lock import LOCK_FILE
from sparse_adapt.report.benchmark_md import PIPELINES, STEMS
from sparse_adapt.report.figures import figures
from sparse_adapt.report.markdown import render_markdown
from sparse_adapt.report.results import PLOTS, RUNS_DIR, Report
from sparse_adapt.training.stages import EXPERIMENTS

# Directories `sparse-adapt benchmark` writes (adapt's pipelines run into OUT/<pipeline>);
# `adapt` also writes pretrained/ and `tune` prefix/, told apart by their own files first.
BENCHMARK_DIRS = ("prefix", "pretrained", "ablation", *(p for p in PIPELINES if p != "train"))
# What marks another command's directory: `adapt`'s manifest, `tune`'s results and trial logs.
OTHER_OUTPUTS = {"adapt": ("adapt.json",), "tune": ("best.toml", "trials.json", "trials")}


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def slug(term: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", term) or "term"


def _entries(path: Path) -> list[str]:
    # Hidden entries (a lock, a killed write's temporary) say nothing about whose runs these are.
    return [p.name for p in path.iterdir() if not p.name.startswith(".")] if path.is_dir() else []


def holds_files(out: Path) -> bool:
    """``out`` holds something besides a lock file and empty directories."""
    return any(p.name != LOCK_FILE and (not p.is_dir() or any(p.iterdir())) for p in Path(out).iterdir())


def output_kind(out: Path) -> str | None:
    """Whose output directory ``out`` is: ``"report"``, ``"benchmark"``, ``"adapt"``, ``"tune"``
    or None (none of theirs).

    Both keep their runs in ``OUT/runs``: a report's are named by experiment (H1-H4), a
    benchmark's by domain. Empty run directories prove nothing and count for neither."""
    out = Path(out)
    if (out / "report.json").is_file():
        return "report"
    for command, markers in OTHER_OUTPUTS.items():
        if any((out / m).exists() for m in markers):
            return command
    if any((out / f"{stem}.json").is_file() for stem in STEMS):
        return "benchmark"
    runs = _entries(out / RUNS_DIR)
    if runs:
        return "report" if all(r in EXPERIMENTS for r in runs) else "benchmark"
    if any(_entries(out / d) for d in BENCHMARK_DIRS):
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
