"""Which device models run on: ``auto`` (CUDA when present, else CPU), ``cpu``, ``cuda``, ``mps``.

``SpladeEncoder.from_pretrained(..., device=None)`` and the training pipeline use the
process default (:func:`set_default_device`; the CLI's global ``--device`` sets it), so
one flag moves every command. Training on CUDA runs under bf16 autocast (:func:`autocast`);
CPU stays fp32 (this CPU kind has no fast bf16, and fp32 keeps CPU runs bit-reproducible).
"""

from __future__ import annotations

import re
from contextlib import nullcontext

import torch

from sparse_adapt.errors import ConfigError

CHOICES = ("auto", "cpu", "cuda", "mps")
INDEXED = tuple(c for c in CHOICES if c != "auto")  # the kinds that take an index (cuda:1); "auto" picks its own
_default = "auto"


def _available(kind: str) -> bool:
    probes = {
        "cpu": lambda: True,
        "cuda": torch.cuda.is_available,
        "mps": lambda: getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available(),
    }
    return probes[kind]()


def resolve_device(name: str | torch.device | None = None) -> torch.device:
    """``name`` (or the process default) as a torch device; an unavailable one is an error."""
    if isinstance(name, torch.device) and name.type not in CHOICES:
        return name  # another backend the caller chose (xpu, meta): torch says what it lacks
    name = _default if name is None else str(name)  # a torch.device("cuda") is checked as "cuda"
    kind = name.split(":")[0]
    # torch.device("cpu:abc") raised RuntimeError (a traceback), and "auto:3" dropped its ":3"
    if kind not in CHOICES or not re.fullmatch(rf"auto|(?:{'|'.join(INDEXED)})(?::\d+)?", name):
        raise ConfigError(f"device must be one of {', '.join(CHOICES)}; {', '.join(INDEXED)} may take an index "
                          f"(cuda:1), got {name!r}")
    if kind == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not _available(kind):
        raise ConfigError(f"device {name!r}: no {kind.upper()} device is available on this machine")
    return torch.device(name)


def set_default_device(name: str) -> None:
    """Set the process default (validated now, so a typo fails before any work)."""
    global _default
    resolve_device(name)
    _default = name


def autocast(device: torch.device):
    """bf16 autocast on CUDA; nothing elsewhere."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return nullcontext()
