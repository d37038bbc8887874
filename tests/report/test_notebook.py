"""The case-study notebook runs headlessly (nbclient) on a reduced setting, so it cannot rot,
and the committed copy carries the outputs of a real execution."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import nbformat
import pytest

from test_report import TINY_CONFIG, tiny_base, two_terms  # a sibling test module, as pytest imports it

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "01_gatrocraptic_case_study.ipynb"


def _notebook_runner():
    """notebooks/execute.py, loaded by path: the folder is no package, and putting it on
    sys.path would let its module names shadow others' for the rest of the session."""
    spec = importlib.util.spec_from_file_location("notebook_execute", ROOT / "notebooks" / "execute.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_runner = _notebook_runner()
execute, parameters_source = _runner.execute, _runner.parameters_source


def _markdown_outputs(cell) -> str:
    return "\n".join(o.get("data", {}).get("text/markdown", "") for o in cell.outputs if o.output_type == "display_data")


@pytest.mark.slow
def test_notebook_executes_on_a_tiny_model(tmp_path):
    committed = NOTEBOOK.read_bytes()
    params = {"OUT": str(tmp_path / "case"), "BASE": str(tiny_base(tmp_path / "tiny")), "CONFIG": TINY_CONFIG,
              "SEED": 0, "TERMS": str(two_terms(tmp_path))}
    nb = execute(params, tmp_path / "executed.ipynb", timeout=600)  # raises CellExecutionError on any failure
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].source == parameters_source(params)
    for name in ("H1", "H2", "H3", "H4"):
        cell = next(c for c in code if f'experiment("{name}")' in c.source)
        assert "| Criterion | Expected | Actual | Status |" in _markdown_outputs(cell), name
    report = json.loads((tmp_path / "case" / "report.json").read_text(encoding="utf-8"))
    assert [s["name"] for s in report["stages"]] == ["base", "H1", "H2", "H3", "H4"]
    assert (tmp_path / "case" / "report.md").is_file()
    images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(images) == 4
    assert NOTEBOOK.read_bytes() == committed  # the repository copy is untouched: the run wrote elsewhere


def test_committed_notebook_has_outputs_and_no_errors():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", [])
    assert all(c.execution_count is not None for c in code)
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs)


def test_the_notebook_holds_out_s_lock_from_before_its_first_write_to_its_last_cell():
    # it wrote runs/case-study beside a `sparse-adapt report` of the same folder, unlocked
    code = [c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code"]
    taken = next(i for i, s in enumerate(code) if "writing.enter_context(locked(inputs.out))" in s)
    first_write = next(i for i, s in enumerate(code) if "run_experiment(" in s or "write_report(" in s)
    assert taken < first_write and "writing.close()" in code[-1]


def test_execute_s_docstring_places_the_parameters_cell_where_the_notebook_has_it():
    # it said "the notebook's first cell" while the title's markdown cell comes first
    nb = nbformat.read(NOTEBOOK, as_version=4)
    tagged = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    place = "first cell" if tagged == 0 else "first code cell" if tagged == first_code else None
    assert place is not None, f"the parameters cell is cell {tagged}: say where it is in execute.py's docstring"
    assert f"notebook's {place} (tagged ``parameters``)" in " ".join(_runner.__doc__.split())


def test_the_text_before_the_printed_commands_names_the_folder_their_paths_start_from():
    # the commands print paths relative to the kernel's folder (notebooks/), useless from the repository root
    import shlex

    nb = nbformat.read(NOTEBOOK, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "reproduce_commands(" in c.source)
    printed = "".join(o.get("text", "") for o in nb.cells[at].outputs if o.output_type == "stream")
    words = shlex.split(printed.splitlines()[0])
    docs = words[words.index("--docs") + 1]
    starts = [d for d in (ROOT, NOTEBOOK.parent) if (d / docs).resolve().is_relative_to(ROOT) and (d / docs).is_file()]
    assert len(starts) == 1, f"{docs} is the bundled corpus from exactly one of the repository's folders"
    folder = "." if starts[0] == ROOT else starts[0].relative_to(ROOT).as_posix()
    text = next(c.source for c in reversed(nb.cells[:at]) if c.cell_type == "markdown")
    assert f"`{folder}/`" in text


def test_the_notebook_s_experiment_table_lists_each_experiment_s_stages():
    import re

    from sparse_adapt.training.stages import EXPERIMENTS

    nb = nbformat.read(NOTEBOOK, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    rows = dict(re.findall(r"^\| (H\d) \| ([^|]+?) \|", text, flags=re.M))
    assert rows == {name: " → ".join(stages) for name, stages in EXPERIMENTS.items()}
