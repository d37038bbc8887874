"""``.ci/constraints.txt`` (the lock ``.ci/setup`` installs with) agrees with ``pyproject.toml``.

A dependency range moved in pyproject.toml without re-running ``.ci/relock`` would make
``.ci/setup`` fail to resolve on a clean clone; this says which package, here.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def locked() -> dict[str, Version]:
    out: dict[str, Version] = {}
    for n, line in enumerate((ROOT / ".ci/constraints.txt").read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        assert m, f".ci/constraints.txt:{n}: not NAME==VERSION: {line!r}"
        name = canonicalize_name(m.group(1))
        assert name not in out, f".ci/constraints.txt:{n}: {name} twice"
        out[name] = Version(m.group(2))
    return out


def test_every_declared_dependency_is_locked_inside_its_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lock = locked()
    declared = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]]
    wrong = []
    for req in declared:
        name = canonicalize_name(req.name)
        if name == "torch":  # pinned and installed first by .ci/setup itself, not through the lock
            assert name not in lock, "torch is in the lock: .ci/setup's first install decides it"
            continue
        if name not in lock:
            wrong.append(f"{req.name}: declared in pyproject.toml, missing from .ci/constraints.txt")
        elif not req.specifier.contains(lock[name], prereleases=True):
            wrong.append(f"{req.name}: locked {lock[name]}, pyproject.toml asks {req.specifier}")
    assert not wrong, "run bash .ci/relock:\n" + "\n".join(wrong)
    assert len(declared) > 20  # the parser did read both lists


def test_setup_installs_through_the_lock():
    setup = (ROOT / ".ci/setup").read_text(encoding="utf-8")
    # torch's own dependencies (setuptools among them) and the package's
    assert re.search(r"^pip_install torch==\S+ -c \.ci/constraints\.txt$", setup, flags=re.M)
    # and the isolated build environment, which only PIP_CONSTRAINT reaches (PIP_BUILD_CONSTRAINT from pip 25.3)
    assert re.search(r'^PIP_CONSTRAINT="\$PWD/\.ci/constraints\.txt" PIP_BUILD_CONSTRAINT="\$PWD/\.ci/constraints\.txt" \\\n'
                     r'    pip_install -e \'\.\[dev\]\' -c \.ci/constraints\.txt$', setup, flags=re.M)


def test_the_build_backend_is_locked_inside_its_range():
    """pyproject.toml's [build-system] requirements build the package in .ci/setup: a
    setuptools released since must not change how it is built either."""
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]["requires"]
    lock = locked()
    for req in map(Requirement, requires):
        name = canonicalize_name(req.name)
        assert name in lock, f"{req.name} (build-system) missing from .ci/constraints.txt: run bash .ci/relock"
        assert req.specifier.contains(lock[name]), f"{req.name}: locked {lock[name]}, build-system asks {req.specifier}"
    assert "pip" not in lock  # the interpreter's own pip, never replaced by the lock
