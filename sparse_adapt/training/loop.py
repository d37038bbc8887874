"""The training loop: the one loop every stage runs (optimiser, schedule, data order,
clipping, logging, progress). A stage supplies only how one batch becomes losses.

Per epoch the items are visited in a fresh random order (from the stage's seeded
generator); each batch goes through ``step(indices, step_number)``, which returns the
named loss tensors of the batch (the objective under ``"loss"``), or ``None`` to skip a
batch that has nothing to learn from (e.g. no position was masked).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn

from sparse_adapt.progress import SILENT, Hooks

StepFn = Callable[[Sequence[int], int], "dict[str, torch.Tensor] | None"]


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch; return a torch generator for data order and masking."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def make_optimizer(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    # No decay on biases and LayerNorm weights (standard BERT fine-tuning practice).
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (no_decay if p.ndim < 2 else decay).append(p)
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=lr
    )


def linear_schedule(opt: torch.optim.Optimizer, total: int, warmup_frac: float = 0.1):
    """Linear warm-up over the first 10% of steps, then linear decay to 0 (BERT schedule)."""
    warm = max(1, int(total * warmup_frac))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total - step) / max(1, total - warm))

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


@dataclass
class LoopConfig:
    name: str  # the stage's name, in log records and progress
    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    max_grad_norm: float
    log_every: int = 0  # print a console line every N steps (0: never); every step is logged


@dataclass
class LoopResult:
    steps: int = 0
    epoch_means: list[dict[str, float]] = field(default_factory=list)  # mean of each loss per epoch
    last: dict[str, float] = field(default_factory=dict)  # the losses of the last step


def run_loop(
    model: nn.Module,
    n_items: int,
    cfg: LoopConfig,
    step: StepFn,
    generator: torch.Generator,
    log: Callable[[dict], None],
    hooks: Hooks = SILENT,
    step_line: Callable[[int, dict[str, float]], str] | None = None,
    on_epoch_end: Callable[[int], bool] | None = None,
) -> LoopResult:
    """Train ``model`` (in place) for ``cfg.epochs`` over ``n_items`` items.

    ``on_epoch_end(epoch)`` (1-based) runs after each epoch; returning True stops early.
    """
    n_batches = (n_items + cfg.batch_size - 1) // cfg.batch_size
    total = cfg.epochs * n_batches
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay)
    sched = linear_schedule(opt, max(1, total))
    task = hooks.task(cfg.name, total)
    result = LoopResult()
    model.train()
    for epoch in range(cfg.epochs):
        order = torch.randperm(n_items, generator=generator).tolist()
        sums: dict[str, float] = {}
        counted = 0
        for b in range(n_batches):
            losses = step(order[b * cfg.batch_size : (b + 1) * cfg.batch_size], result.steps + 1)
            if losses is None:
                task.advance()
                continue
            opt.zero_grad(set_to_none=True)
            losses["loss"].backward()
            nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            opt.step()
            sched.step()
            result.steps += 1
            counted += 1
            result.last = {k: float(v.detach()) for k, v in losses.items()}
            for k, v in result.last.items():
                sums[k] = sums.get(k, 0.0) + v
            log({"stage": cfg.name, "epoch": epoch + 1, "step": result.steps, **result.last, "lr": sched.get_last_lr()[0]})
            task.advance(description=f"{cfg.name} epoch {epoch + 1}/{cfg.epochs} loss {result.last['loss']:.3f}")
            if step_line is not None and cfg.log_every and result.steps % cfg.log_every == 0:
                hooks.message(step_line(result.steps, result.last))
        if counted:
            result.epoch_means.append({k: v / counted for k, v in sums.items()})
            hooks.message(f"{cfg.name}: epoch {epoch + 1}/{cfg.epochs} done. Avg loss: {result.epoch_means[-1]['loss']:.4f}")
        if on_epoch_end is not None:
            model.eval()  # evaluation inside the callback must not see dropout
            stop = on_epoch_end(epoch + 1)
            model.train()
            if stop:
                break
    model.eval()
    return result
