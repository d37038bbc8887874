"""Execute the case-study notebook headlessly and save it with its outputs.

    .venv/bin/python notebooks/execute.py                 # full settings, outputs saved in place
    .venv/bin/python notebooks/execute.py --reduced       # 1-2 epochs per stage (minutes)

The notebook's first code cell (tagged ``parameters``) is replaced by the given values, the
notebook runs with nbclient in ``notebooks/`` (so ``OUT`` is relative to it), and the
result is written atomically. ``tests/report/test_notebook.py`` calls :func:`execute` with a
tiny model.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
NOTEBOOK = HERE / "01_gatrocraptic_case_study.ipynb"
# The full run: the training defaults of sparse_adapt.training.config, the README's main job.
FULL = {"OUT": "../runs/case-study", "BASE": "offline-minilm", "CONFIG": None, "SEED": 0, "TERMS": None}
# Enough to show every stage's effect direction in minutes on 2 CPU cores, not to pass the criteria.
REDUCED = {
    "OUT": "../runs/case-study-reduced", "BASE": "offline-minilm", "SEED": 0, "TERMS": None,
    "CONFIG": {"warmup": {"epochs": 1}, "dictionary": {"epochs": 2}, "distill": {"epochs": 1}},
}


def parameters_source(params: dict[str, Any]) -> str:
    lines = ["# Parameters (notebooks/execute.py replaces this cell)."]
    lines += [f"{k} = {v!r}" for k, v in params.items()]
    return "\n".join(lines) + "\n"


def execute(params: dict[str, Any], out: Path | None = None, notebook: Path = NOTEBOOK, timeout: int = 3600):
    """Run ``notebook`` with ``params`` injected; write it (with outputs) to ``out``."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(notebook, as_version=4)
    cell = next((c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        raise SystemExit(f"{notebook}: no cell tagged 'parameters'")
    cell.source = parameters_source(params)
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    target = Path(out or notebook)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    nbformat.write(nb, tmp)
    os.replace(tmp, target)
    return nb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reduced", action="store_true", help="1-2 epochs per stage instead of the training defaults")
    ap.add_argument("--out", type=Path, default=None, help="where to save the executed notebook (default: in place)")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=JSON",
                    help='override one parameter, e.g. --param SEED=1 --param \'CONFIG={"distill": {"epochs": 5}}\'')
    args = ap.parse_args()
    params = dict(REDUCED if args.reduced else FULL)
    for item in args.param:
        name, _, value = item.partition("=")
        if name not in params:
            raise SystemExit(f"--param {name}: unknown parameter; valid: {', '.join(params)}")
        try:
            params[name] = json.loads(value)
        except ValueError:
            ap.error(f"--param {name}: {value!r} is not JSON (a string needs its quotes: {name}='\"...\"')")
    execute(params, args.out)
    print(f"wrote {args.out or NOTEBOOK}")


if __name__ == "__main__":
    main()
