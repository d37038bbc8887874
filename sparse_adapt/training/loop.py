"""The training loop: the one loop every stage runs (optimiser, schedule, data order,
gradient accumulation, clipping, autocast, logging, progress, mid-stage checkpoints).
A stage supplies only its batches (``plan``) and how one batch becomes losses (``step``).

Each epoch asks ``plan(generator)`` for its batches (lists of item indices) and feeds each
to ``step(indices, step_number)``, which returns a :class:`StepResult` (the named losses,
the objective under ``"loss"``, and the tokens processed) or ``None`` to skip a batch with
nothing to learn from (e.g. no position was masked). ``grad_accum`` micro-batches make one
optimiser step, whose gradient is the mean over the batches it holds (an epoch's last step
may hold fewer, a skipped batch leaves one out). ``max_steps`` > 0 ends the stage after that many optimiser steps whatever
the epochs; ``step_cap`` > 0 lets the epochs decide but stops at that many steps, so a stage
sized in epochs for a small corpus stays bounded on a large one.

Every ``checkpoint_every`` optimiser steps the loop hands ``checkpoint`` a state dict:
optimiser, scheduler, every RNG state, the epoch's batch plan and the position in it. Fed
back as ``resume``, the run continues exactly where it stopped: on CPU the result equals an
uninterrupted run bit for bit.

With several processes (``distributed.py``) every rank starts from the same seed, so the
first plan agrees; then every rank but 0 reseeds ``generator`` apart (:func:`seed_apart`),
so the masks of the MLM stages differ between ranks' batches (one seed had masked the same
positions in every rank's k-th batch), while rank 0, and a single process, keep the seed's
own stream. A checkpoint keeps every rank's RNG state and each rank resumes from its own.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Sequence

import numpy as np
import torch
from torch import nn

from sparse_adapt.device import autocast
from sparse_adapt.errors import NonFiniteError
from sparse_adapt.modeling.base import eval_mode, nonfinite_parameters
from sparse_adapt.progress import SILENT, Hooks
from sparse_adapt.progress import counted as counted_noun  # run_loop has a local "counted"
from sparse_adapt.training.distributed import Processes, SingleProcess


class StepResult(NamedTuple):
    losses: dict[str, torch.Tensor]  # "loss" is backpropagated; every entry is logged
    tokens: int  # non-padding tokens the step processed (throughput)


StepFn = Callable[[Sequence[int], int], "StepResult | None"]
PlanFn = Callable[[torch.Generator], "list[list[int]]"]


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch; return a torch generator for data order and masking."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def shuffled_batches(n_items: int, batch_size: int) -> PlanFn:
    """A fresh random order each epoch, cut into consecutive batches of ``batch_size``."""

    def plan(generator: torch.Generator) -> list[list[int]]:
        order = torch.randperm(n_items, generator=generator).tolist()
        return [order[b : b + batch_size] for b in range(0, n_items, batch_size)]

    return plan


def make_optimizer(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    # No decay on biases and LayerNorm weights (standard BERT fine-tuning practice).
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (no_decay if p.ndim < 2 else decay).append(p)
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=lr
    )


def linear_schedule(
    opt: torch.optim.Optimizer, total: int, warmup_frac: float = 0.1
) -> tuple[torch.optim.lr_scheduler.LambdaLR, list[int]]:
    """Linear warm-up over the first 10% of steps, then linear decay to 0 (BERT schedule).

    Also returns the horizon, ``[total]``, where the decay ends: a stage whose epochs differ
    in length (token-budget batches) moves it each epoch, or a longer later epoch trained its
    last steps at a rate of 0 and a shorter one ended above 0. (A list beside the scheduler,
    not an attribute of it: ``load_state_dict`` would replace an attribute with a copy.)"""
    warm = max(1, int(total * warmup_frac))
    horizon = [total]

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (horizon[0] - step) / max(1, horizon[0] - warm))

    return torch.optim.lr_scheduler.LambdaLR(opt, factor), horizon


def _apply_rate(sched: torch.optim.lr_scheduler.LambdaLR) -> None:
    """The coming step's rate under a moved horizon (the last step computed it with the old one)."""
    for group, base, factor in zip(sched.optimizer.param_groups, sched.base_lrs, sched.lr_lambdas):
        group["lr"] = base * factor(sched.last_epoch)
    sched._last_lr = [group["lr"] for group in sched.optimizer.param_groups]  # noqa: SLF001 - what get_last_lr reads


def require_finite(model: nn.Module, stage: str) -> None:
    """Refuse to go on with (and save) a model holding a NaN or infinite weight, or whose
    finite weights give non-finite logits: one step of a huge decay left weights near 1e30,
    all finite, and a saved model whose every vector was NaN."""
    bad = nonfinite_parameters(model)
    if bad:
        raise NonFiniteError(f"{stage}: {len(bad)} weight tensors are not finite (e.g. {bad[0]}); not saved")
    if not _outputs_finite(model):
        raise NonFiniteError(f"{stage}: the model's outputs are not finite (its weights are finite but far too large: "
                             "a learning rate or weight decay far too high?); not saved")


def _outputs_finite(model: nn.Module) -> bool:
    """Whether a masked LM's logits on a few pieces are all finite: the first ids and the last
    (where added domain tokens are)."""
    vocab = model.get_input_embeddings().num_embeddings
    ids = torch.tensor([*range(1, 9), *range(vocab - 8, vocab)], device=next(model.parameters()).device)
    ids = (ids % vocab).unsqueeze(0)  # (1, 16)
    with eval_mode(model), torch.no_grad():
        return bool(torch.isfinite(model(input_ids=ids).logits).all())  # logits: (1, 16, V)


def _host_values(losses: dict[str, torch.Tensor]) -> dict[str, float]:
    """The scalar losses as floats, in one copy to the host: on a GPU each ``float(tensor)``
    waits for the device, and a distill step has eight of them."""
    values = torch.stack([v.detach().float().reshape(()) for v in losses.values()]).tolist()
    return dict(zip(losses, values))


def _check_finite(cfg: "LoopConfig", epoch: int, step: int, what: str, values: dict[str, float]) -> None:
    bad = [k for k, v in values.items() if not math.isfinite(v)]
    if bad:
        raise NonFiniteError(
            f"{cfg.name}: epoch {epoch}, step {step}: {what} is not finite "
            f"({', '.join(f'{k}={values[k]}' for k in bad)}); training stopped "
            f"before this step changed the weights (try a lower {cfg.name}.lr; check the section's loss weights and "
            "temperatures, or the data)"
        )


# Optimiser steps above which an epoch-sized stage says how to bound it: epochs chosen on corpora
# of ~40 documents take hours on one of thousands (warmup's 10 epochs: 1.25 steps a document).
LONG_STAGE = 1000


@dataclass
class LoopConfig:
    name: str  # the stage's name, in log records and progress
    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    max_grad_norm: float
    log_every: int = 0  # print a console line every N optimiser steps (0: never); every step is logged
    grad_accum: int = 1  # micro-batches per optimiser step
    max_steps: int = 0  # optimiser steps of the stage; 0: the epochs decide
    checkpoint_every: int = 0  # optimiser steps between mid-stage checkpoints; 0: none
    step_cap: int = 0  # at most this many optimiser steps; below it the epochs decide (0: no cap)


@dataclass
class LoopResult:
    steps: int = 0
    epoch_means: list[dict[str, float]] = field(default_factory=list)  # mean of each loss per epoch
    last: dict[str, float] = field(default_factory=dict)  # the losses of the last step
    tokens: int = 0  # non-padding tokens processed


def rng_state(generator: torch.Generator) -> dict:
    # Plain Python/tensor values only, so the checkpoint loads with torch.load(weights_only=True).
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "generator": generator.get_state(), "torch": torch.get_rng_state(), "python": random.getstate(),
        "numpy": [kind, torch.from_numpy(keys.copy()), pos, has_gauss, cached],
        # This process's own GPU only: a checkpoint resumed where fewer GPUs are visible (or
        # by another rank) must not index a device that is not there.
        "cuda": [torch.cuda.get_rng_state()] if torch.cuda.is_available() else [],
    }


def seed_apart(generator: torch.Generator, rank: int) -> None:
    """Give rank ``rank`` > 0 a stream of its own, drawn from the shared one (so it still
    depends on the run's seed) and offset by the rank."""
    generator.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)) + rank)


def set_rng_state(state: dict, generator: torch.Generator) -> None:
    generator.set_state(state["generator"])
    torch.set_rng_state(state["torch"])
    random.setstate(tuple(tuple(x) if isinstance(x, list) else x for x in state["python"]))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy(), pos, has_gauss, cached))
    if state["cuda"] and torch.cuda.is_available():
        # Checkpoints before 2026-11-26 saved every visible GPU's state; the first is this
        # process's device in a single-GPU run, the only kind that wrote one.
        torch.cuda.set_rng_state(state["cuda"][0])


def _total_steps(cfg: LoopConfig, epoch_steps: int) -> int:
    if cfg.max_steps > 0:
        return cfg.max_steps
    return min(cfg.epochs * epoch_steps, cfg.step_cap) if cfg.step_cap > 0 else cfg.epochs * epoch_steps


def run_loop(
    model: nn.Module,
    plan: PlanFn,
    cfg: LoopConfig,
    step: StepFn,
    generator: torch.Generator,
    log: Callable[[dict], None],
    hooks: Hooks = SILENT,
    step_line: Callable[[int, dict[str, float]], str] | None = None,
    *,
    resume: dict | None = None,
    checkpoint: Callable[[dict], None] | None = None,
    processes: Processes | None = None,
    on_epoch_end: Callable[[int], bool] | None = None,
    extra_state: Callable[[], dict] | None = None,
) -> LoopResult:
    """Train ``model`` in place; see the module docstring (and ``distributed.py`` for N processes).

    ``on_epoch_end(epoch)`` (1-based) runs after each epoch; returning True stops early. It runs
    once more when ``max_steps`` or ``step_cap`` ends the stage inside an epoch.
    ``extra_state()`` is saved in each checkpoint under ``"extra"`` (the caller's own state,
    e.g. the epoch selection's, which it restores from ``resume["extra"]``).
    """
    processes = processes or SingleProcess()
    world, rank = processes.world, processes.rank
    group = cfg.grad_accum * world  # batches per optimiser step, over all processes
    device = next(model.parameters()).device
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay)
    result = LoopResult()
    if resume is None:
        epoch, position = 0, 0
        batches = processes.broadcast(plan(generator))
        sums: dict[str, float] = {}
        counted = 0
        if rank:
            seed_apart(generator, rank)
    else:
        epoch, position, batches = resume["epoch"], resume["position"], resume["plan"]
        sums, counted = resume["sums"], resume["counted"]
        result = LoopResult(resume["steps"], resume["epoch_means"], resume["last"], resume["tokens"])
    epoch_steps = -(-len(batches) // group)  # optimiser steps an epoch (its last may be short)
    if resume is not None:
        # Token-budget batches give each epoch its own count: the warm-up stays the one the first
        # epoch sized (and the horizon comes back from the checkpoint), or a resumed run would
        # decay its lr differently from an unbroken one.
        epoch_steps = resume.get("epoch_steps", epoch_steps)
    total = _total_steps(cfg, epoch_steps)
    capped = cfg.max_steps <= 0 and 0 < cfg.step_cap < cfg.epochs * epoch_steps
    if capped and resume is None:
        hooks.message(f"{cfg.name}: {cfg.step_cap:,} optimiser steps (its step_cap), not the "
                      f"{cfg.epochs * epoch_steps:,} of {counted_noun(cfg.epochs, 'epoch')}")
    elif cfg.max_steps <= 0 and cfg.step_cap <= 0 and total > LONG_STAGE and resume is None:
        hooks.message(f"{cfg.name}: {total:,} optimiser steps ({counted_noun(cfg.epochs, 'epoch')} of {epoch_steps:,}); "
                      f"{cfg.name}.step_cap in --config bounds them")
    if total == 0 and resume is None:
        hooks.message(f"warning: {cfg.name}: {cfg.name}.epochs 0 and no max_steps: the stage trains nothing")
    sched, horizon = linear_schedule(opt, max(1, total))
    if resume is not None:
        opt.load_state_dict(resume["optimizer"])
        sched.load_state_dict(resume["scheduler"])
        horizon[0] = resume.get("horizon", total)
        # Checkpoints of several processes before 2026-11-26 kept rank 0's state alone.
        set_rng_state(resume["rng_ranks"][rank] if "rng_ranks" in resume else resume["rng"], generator)
    task = hooks.task(cfg.name, total)
    if result.steps:
        task.advance(result.steps)
    epochs = cfg.epochs if cfg.max_steps <= 0 else None  # None: until max_steps
    model.train()
    pending: list[dict[str, float]] = []  # losses of this process's batches of the current optimiser step
    pending_tokens, consumed, started = 0, 0, time.perf_counter()

    def finished() -> bool:
        # step_cap also where the first epoch did not reach it: a later token-budget epoch may be longer
        return ((cfg.max_steps > 0 or capped) and result.steps >= total) or 0 < cfg.step_cap <= result.steps

    while (epochs is None or epoch < epochs) and not finished() and batches:
        while position < len(batches) and not finished():
            if consumed % world == rank:
                with autocast(device):
                    out = step(batches[position], result.steps + 1)
                if out is not None:
                    values = _host_values(out.losses)
                    _check_finite(cfg, epoch + 1, result.steps + 1, "the loss", values)
                    (out.losses["loss"] / group).backward()
                    pending.append(values)
                    pending_tokens += out.tokens
            position += 1
            consumed += 1
            if consumed < group and position < len(batches):
                continue
            consumed = 0
            held = processes.sum_int(len(pending))  # batches in this step, over every process
            if not held:
                continue
            processes.sum_gradients(params)
            if held != group:  # an epoch's short last group, or a skipped batch: the mean over those held
                for p in params:
                    if p.grad is not None:
                        p.grad.mul_(group / held)
            norm = nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            _check_finite(cfg, epoch + 1, result.steps + 1, "the gradient", {"grad_norm": float(norm)})
            lr = sched.get_last_lr()[0]  # the rate this step applied, not the next step's
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            result.steps += 1
            counted += 1
            # The mean over every process's batches of the step, as one process with grad_accum x N logs.
            shares = processes.gather((len(pending), {k: sum(p[k] for p in pending) for k in pending[0]} if pending else {}))
            batches_done = sum(n for n, _ in shares)
            if batches_done:
                keys = next(sums_ for n, sums_ in shares if n)
                result.last = {k: sum(sums_.get(k, 0.0) for _, sums_ in shares) / batches_done for k in keys}
            pending_tokens = processes.sum_int(pending_tokens)
            result.tokens += pending_tokens
            seconds = time.perf_counter() - started
            for k, v in result.last.items():
                sums[k] = sums.get(k, 0.0) + v
            rate = pending_tokens / max(seconds, 1e-9)
            log({"stage": cfg.name, "epoch": epoch + 1, "step": result.steps, **result.last,
                 "lr": lr, "tokens": pending_tokens, "tokens_per_s": round(rate, 1)})
            task.advance(description=f"{cfg.name} epoch {epoch + 1} loss {result.last['loss']:.3f} {rate:,.0f} tok/s")
            if step_line is not None and cfg.log_every and result.steps % cfg.log_every == 0:
                hooks.message(step_line(result.steps, result.last))
            pending, pending_tokens, started = [], 0, time.perf_counter()
            if checkpoint is not None and cfg.checkpoint_every and result.steps % cfg.checkpoint_every == 0 \
                    and not finished():
                states = processes.gather(rng_state(generator))  # every rank's; rank 0 writes them
                checkpoint({
                    "epoch": epoch, "position": position, "plan": batches, "sums": sums, "counted": counted,
                    "steps": result.steps, "epoch_means": result.epoch_means, "last": result.last,
                    "tokens": result.tokens, "epoch_steps": epoch_steps, "horizon": horizon[0], "world": world,
                    "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                    "rng": states[0], **({"rng_ranks": states} if world > 1 else {}),
                    **({"extra": extra_state()} if extra_state is not None else {}),
                })
        if position >= len(batches):
            if counted:
                result.epoch_means.append({k: v / counted for k, v in sums.items()})
                of = f"/{epochs}" if epochs is not None else ""
                hooks.message(f"{cfg.name}: epoch {epoch + 1}{of} done. Avg loss: {result.epoch_means[-1]['loss']:.4f}")
            if on_epoch_end is not None:
                model.eval()  # evaluation inside the callback must not see dropout
                stop = on_epoch_end(epoch + 1)
                model.train()
                if stop:
                    break
            epoch, position, sums, counted = epoch + 1, 0, {}, 0
            if (epochs is None or epoch < epochs) and not finished():
                batches = processes.broadcast(plan(generator))
                steps_now = -(-len(batches) // group)
                if epochs is not None and (steps_now != epoch_steps or horizon[0] != total):
                    # this epoch's own length: the decay reaches 0 with the last epoch's last step (or the cap)
                    planned = max(result.steps + 1, result.steps + (epochs - epoch) * steps_now)
                    horizon[0] = min(planned, cfg.step_cap) if cfg.step_cap > 0 else planned
                    _apply_rate(sched)
    if on_epoch_end is not None and counted and position < len(batches):
        # max_steps or step_cap ended the stage inside an epoch: what it trained there is still
        # a candidate (validation), or a stage bounded below one epoch would never be validated.
        hooks.message(f"{cfg.name}: stopped in epoch {epoch + 1} after {result.steps} optimiser steps")
        model.eval()
        on_epoch_end(epoch + 1)
    model.eval()
    return result
