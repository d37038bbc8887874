"""Mid-stage checkpoints: a ``NAME.partial/`` directory a rerun continues from.

It holds the model (``model/``, safetensors) and ``trainer_state.pt``: the training loop's
state (optimiser, scheduler, RNG states, data position; ``loop.run_loop``'s ``checkpoint``),
plain tensors and Python values, loaded with ``torch.load(weights_only=True)``. It is written
atomically, so a rerun finds the last complete one or none. Used by the pipeline's stages
(``OUT/<stage>.partial/``) and by general-English pretraining (``OUT.partial/`` beside ``OUT``).
"""

from __future__ import annotations

from pathlib import Path

import torch

from sparse_adapt.atomic import atomic_directory
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.training import rundir

TRAINER_STATE = "trainer_state.pt"
MODEL = "model"


def save_partial(path: Path, splade: SpladeEncoder, state: dict) -> None:
    with atomic_directory(path) as tmp:
        splade.save_pretrained(tmp / MODEL)
        torch.save(state, tmp / TRAINER_STATE)


def holds_checkpoint(path: Path) -> bool:
    """``path`` holds a complete checkpoint (its files only; nothing is loaded)."""
    return (path / TRAINER_STATE).is_file() and rundir.complete(path / MODEL)


def load_partial(path: Path, device: torch.device | None = None) -> tuple[SpladeEncoder, dict] | None:
    """The model and loop state saved at ``path``; None when there is no complete checkpoint."""
    if not holds_checkpoint(path):
        return None
    state = torch.load(path / TRAINER_STATE, weights_only=True, map_location="cpu")
    return SpladeEncoder.from_pretrained(path / MODEL, device=device), state


def partial_value(path: Path, key: str, default=None):
    """One value of the loop state saved at ``path`` (``default`` without a checkpoint); mmap:
    only this key is read, not the optimiser state beside it."""
    if not (path / TRAINER_STATE).is_file():
        return default
    return torch.load(path / TRAINER_STATE, weights_only=True, map_location="cpu", mmap=True).get(key, default)
