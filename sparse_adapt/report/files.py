"""Writing the report: PNGs, ``report.json`` and ``report.md``, each atomically."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from sparse_adapt.atomic import write_atomic
from sparse_adapt.report.figures import figures
from sparse_adapt.report.markdown import render_markdown
from sparse_adapt.report.results import PLOTS, Report

def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def slug(term: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", term) or "term"




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
