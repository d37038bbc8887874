"""The architecture, checked: imports point one way, no cycles, no module too long.

Layers, bottom to top: the core (``sparse_adapt`` without ``cli`` and ``report``) ->
``diagnostics`` -> the composers (``sparse_adapt.report``, ``sparse_adapt.cli``). Every
import counts, also one inside a function.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sparse_adapt", "diagnostics")
COMPOSERS = ("sparse_adapt.cli", "sparse_adapt.report", "sparse_adapt.__main__")
MAX_LINES = 400


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (``from a import b`` counts ``a.b`` when it is a module)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                           for a in node.names]
            else:
                continue
            edges |= {t for t in targets if t in modules and t != name}
        graph[name] = edges
    return graph


def _in(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles():
    assert find_cycle(import_graph()) is None


def test_core_never_imports_diagnostics_or_composers():
    bad = [(m, t) for m, ts in import_graph().items() for t in ts
           if _in(m, ("sparse_adapt",)) and not _in(m, COMPOSERS) and _in(t, ("diagnostics", *COMPOSERS))]
    assert bad == []


def test_diagnostics_never_imports_composers():
    bad = [(m, t) for m, ts in import_graph().items() for t in ts if _in(m, ("diagnostics",)) and _in(t, COMPOSERS)]
    assert bad == []


@pytest.mark.parametrize("name", sorted(_modules()))
def test_no_module_is_too_long(name):
    lines = len(_modules()[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{name}: {lines} lines"


def test_importing_the_package_changes_no_global_state():
    code = (
        "from transformers.utils import logging as l; before = l.is_progress_bar_enabled(); "
        "import sparse_adapt, sparse_adapt.modeling.encoder, sparse_adapt.training.pipeline, diagnostics; "
        "assert l.is_progress_bar_enabled() == before, 'progress bars switched'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_training_and_the_cli_do_not_import_ranx():
    """ranx (with numba) is ~1.3 s of imports, about 2% of a default `train`, which evaluates nothing."""
    code = ("import sys, sparse_adapt.cli, sparse_adapt.training.pipeline, sparse_adapt.retrieval.evaluation; "
            "assert 'ranx' not in sys.modules, 'ranx imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
