"""Installed files found through a distribution's RECORD, without importing the package."""

from __future__ import annotations

import importlib.metadata
import re

import pytest

from sparse_adapt.errors import ConfigError
from sparse_adapt.installed import installed_file


def test_the_file_is_the_one_at_its_whole_path_not_the_first_with_its_name():
    # pytest's RECORD lists _pytest/__init__.py (and a dozen more __init__.py) before pytest/__init__.py.
    import pytest as package

    found = installed_file("pytest", ("pytest", "__init__.py"), "pytest", "the tests need")
    assert found.is_absolute() and found.samefile(package.__file__)


def test_a_file_the_distribution_lacks_names_its_whole_path_and_the_pin_to_reinstall():
    with pytest.raises(ConfigError, match=re.escape("the installed pytest has no pytest/missing.json; "
                                                    "reinstall pytest==9.2.0")):
        installed_file("pytest", ("pytest", "missing.json"), "pytest==9.2.0", "the tests need", ConfigError)


def test_a_distribution_without_a_file_list_is_one_that_lacks_the_file(monkeypatch):
    # No RECORD (a package installed by a system tool): dist.files is None, not a traceback.
    class NoRecord:
        files = None

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: NoRecord())
    with pytest.raises(ConfigError, match=r"has no pytest/__init__\.py; reinstall pytest==9\.2\.0$"):
        installed_file("pytest", ("pytest", "__init__.py"), "pytest==9.2.0", "the tests need", ConfigError)


def test_a_missing_distribution_says_who_needs_it_and_the_command_that_installs_it():
    with pytest.raises(ConfigError, match=re.escape("lay-word glosses need the package nosuchpkg==1.0 "
                                                    "(pip install nosuchpkg==1.0)")):
        installed_file("nosuchpkg-sparse-adapt", ("x",), "nosuchpkg==1.0", "lay-word glosses need", ConfigError)


def test_the_modules_the_docstring_names_as_users_are_the_ones_that_call_installed_file():
    # The docstring is where a reader learns what depends on an installed distribution's RECORD.
    from pathlib import Path

    import sparse_adapt.installed as module

    package = Path(module.__file__).parent
    callers = {str(p.relative_to(package)) for p in package.rglob("*.py")
               if p.name != "installed.py" and "installed_file(" in p.read_text(encoding="utf-8")}
    assert set(re.findall(r"``([\w/]+\.py)``", module.__doc__)) == callers
