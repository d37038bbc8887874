"""The processes of one training run, through Hugging Face Accelerate.

``accelerate launch --multi_gpu --num_processes N -m sparse_adapt train ...`` starts N
processes (one per GPU, or N CPU processes on the gloo backend); a plain run is one
process and everything here is a no-op. Data parallelism is gradient accumulation across
processes: one optimiser step consumes ``grad_accum x N`` batches, process ``r`` computing
those at positions ``r, r + N, ...``; the gradients are summed over processes before the
step, so N processes train as one process with ``grad_accum x N`` would, up to float
summation order. Only the main process writes files and logs.
"""

from __future__ import annotations

from typing import Any

import torch
from accelerate import PartialState
from accelerate.utils import broadcast_object_list, gather_object, reduce

from sparse_adapt.errors import ConfigError


class Processes:
    def __init__(self, device: torch.device) -> None:
        # cpu=True lets a CPU launch form a gloo group instead of one process per node.
        try:
            self.state = PartialState(cpu=device.type == "cpu")
        except ValueError as e:  # accelerate's int() of a launcher variable (WORLD_SIZE=abc): a traceback
            raise ConfigError(f"cannot join the run's processes ({e}): the variables a launcher sets (WORLD_SIZE, "
                              "RANK, LOCAL_RANK ...) must be numbers; unset them for a plain run") from None

    @property
    def world(self) -> int:
        return self.state.num_processes

    @property
    def rank(self) -> int:
        return self.state.process_index

    @property
    def is_main(self) -> bool:
        return self.state.is_main_process

    def device(self, requested: torch.device) -> torch.device:
        """Each process's own device (``cuda:LOCAL_RANK``) when launched on GPUs."""
        return self.state.device if self.world > 1 and requested.type == "cuda" else requested

    def barrier(self) -> None:
        if self.world > 1:
            self.state.wait_for_everyone()

    def broadcast(self, obj: Any) -> Any:
        """The main process's ``obj`` on every process."""
        if self.world == 1:
            return obj
        return broadcast_object_list([obj], from_process=0)[0]

    def sum_gradients(self, params: list[torch.nn.Parameter]) -> None:
        """Sum every gradient over the processes (one flat all-reduce)."""
        if self.world == 1:
            return
        for p in params:
            if p.grad is None:  # a parameter this process's batches did not reach
                p.grad = torch.zeros_like(p)
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        flat = reduce(flat, reduction="sum")
        offset = 0
        for p in params:
            n = p.numel()
            p.grad.copy_(flat[offset : offset + n].view_as(p.grad))
            offset += n

    def gather(self, obj: Any) -> list[Any]:
        """Every process's ``obj``, in rank order (one object gather; ``[obj]`` alone)."""
        if self.world == 1:
            return [obj]
        return gather_object([obj])

    def sum_int(self, value: int) -> int:
        if self.world == 1:
            return value
        return int(reduce(torch.tensor([value], dtype=torch.long, device=self.state.device), reduction="sum")[0])


class SingleProcess(Processes):
    """One process, no Accelerate state (library calls outside ``accelerate launch``)."""

    def __init__(self) -> None:
        pass

    world = 1
    rank = 0
    is_main = True

    def device(self, requested: torch.device) -> torch.device:
        return requested
