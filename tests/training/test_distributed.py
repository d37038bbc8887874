"""Two CPU processes through ``accelerate launch`` (gloo) train as one process with twice
the gradient accumulation, up to float summation order."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from sparse_adapt.modeling.encoder import SpladeEncoder, SpladeSettings
from sparse_adapt.training.distributed import SingleProcess
from tests.conftest import _tokenizer
from tests.training.test_stages import DICTIONARY, DOCS, TERMS_JSON, TRAIN, _jsonl

ROOT = Path(__file__).resolve().parents[2]
ACCELERATE = shutil.which("accelerate", path=str(Path(sys.executable).parent))


def _no_dropout_model(path: Path) -> None:
    # Dropout draws from each process's own RNG; without it the only difference between one
    # and two processes is the order in which gradients are summed.
    torch.manual_seed(0)
    tok = _tokenizer()
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    SpladeEncoder(BertForMaskedLM(cfg).eval(), tok, SpladeSettings(query_max_length=16, doc_max_length=48)).save_pretrained(path)


@pytest.mark.slow
@pytest.mark.skipif(ACCELERATE is None, reason="accelerate's launcher is not installed")
def test_two_gloo_processes_match_one_process_with_double_accumulation(tmp_path):
    _no_dropout_model(tmp_path / "model")
    (tmp_path / "terms.json").write_text(json.dumps(TERMS_JSON))
    train = TRAIN * 2  # 4 queries: two optimiser steps of 2 batches per epoch
    common = [
        "--base", str(tmp_path / "model"), "--corpus", str(_jsonl(tmp_path / "docs.jsonl", DOCS)),
        "--terms", str(tmp_path / "terms.json"), "--dictionary", str(_jsonl(tmp_path / "dict.jsonl", DICTIONARY)),
        "--train", str(_jsonl(tmp_path / "train.jsonl", [dict(r, qid=f"{r['qid']}-{i}") for i, r in enumerate(train)])),
        "--stages", "extend,distill", "--seed", "1",
    ]
    env = _env(HF_HOME=str(tmp_path / "hf-home"))  # no accelerate config of the machine's

    def config(name: str, accum: int) -> str:
        path = tmp_path / name
        path.write_text(json.dumps({"distill": {"epochs": 2, "batch_size": 1, "grad_accum": accum, "lr": 1e-3}}))
        return str(path)

    one = [sys.executable, "-m", "sparse_adapt", "--device", "cpu", "--threads", "1", "train", *common,
           "--config", config("one.json", 2), "--out", str(tmp_path / "one")]
    subprocess.run(one, check=True, env=env, cwd=ROOT, capture_output=True)
    two = [ACCELERATE, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
           "--dynamo_backend", "no", "--main_process_port", str(_free_port()), "-m", "sparse_adapt", "--device", "cpu",
           "--threads", "1", "train", *common, "--config", config("two.json", 1), "--out", str(tmp_path / "two")]
    proc = subprocess.run(two, env=env, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]

    a = SpladeEncoder.from_pretrained(tmp_path / "one" / "final").mlm.state_dict()
    b = SpladeEncoder.from_pretrained(tmp_path / "two" / "final").mlm.state_dict()
    start = SpladeEncoder.from_pretrained(tmp_path / "one" / "extend").mlm.state_dict()
    assert any(not torch.equal(a[k], start[k]) for k in a)  # training moved the weights
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-4, atol=1e-6, msg=k)
    steps = lambda out: [json.loads(l)["step"] for l in (out / "train_log.jsonl").read_text().splitlines() if '"step"' in l]  # noqa: E731
    assert steps(tmp_path / "one") == steps(tmp_path / "two") == [1, 2, 3, 4]  # the main process logs once per step
    # The logged losses are over both processes' batches, as one process logs its two (once: rank 0's alone).
    losses = lambda out: [json.loads(l)["loss"] for l in (out / "train_log.jsonl").read_text().splitlines() if '"step"' in l]  # noqa: E731
    assert losses(tmp_path / "two") == pytest.approx(losses(tmp_path / "one"), rel=1e-4)


def _env(**extra: str) -> dict[str, str]:
    """A child's environment: this checkout importable, one thread, none of the machine's
    ACCELERATE_* settings."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("ACCELERATE_")}, "PYTHONPATH": str(ROOT),
            "OMP_NUM_THREADS": "1", **extra}


def _free_port() -> int:
    """A port no one listens on now: a fixed one clashed with another job's group on the same host."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class _Rank(SingleProcess):
    """Rank ``rank`` of a group of two, its collectives answered locally: the loop's own
    behaviour per rank, without launching processes. ``gather`` puts ``other`` (what the
    other rank sent, for RNG states) at the other rank's place."""

    world = 2

    def __init__(self, rank: int, other=None) -> None:
        self.rank, self.is_main, self.other = rank, rank == 0, other

    def gather(self, obj):
        if isinstance(obj, dict) and "generator" in obj and self.other is not None:
            return [obj, self.other] if self.rank == 0 else [self.other, obj]
        return [obj] * self.world

    def sum_int(self, value: int) -> int:
        return value * self.world


def _draws(rank: int, *, resume=None, checkpoint=None, other=None) -> dict[int, float]:
    """Run a loop of 8 batches (4 steps) on ``rank``; the draw each of its batches takes from the
    loop's generator, as masking does, by batch position."""
    from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, seed_everything

    gen = seed_everything(7)
    model = torch.nn.Linear(2, 1)
    drawn: dict[int, float] = {}

    def step(idx, step_number):
        drawn[idx[0]] = float(torch.rand(1, generator=gen))
        return StepResult({"loss": model(torch.ones(2)).sum()}, 1)

    cfg = LoopConfig(name="mlm", epochs=1, batch_size=1, lr=1e-3, weight_decay=0.0, max_grad_norm=1.0,
                     checkpoint_every=2 if checkpoint else 0)
    run_loop(model, lambda g: [[i] for i in range(8)], cfg, step, gen, lambda record: None,
             resume=resume, checkpoint=checkpoint, processes=_Rank(rank, other) if rank is not None else None)
    return drawn


def test_ranks_draw_their_masks_apart_and_rank_zero_as_one_process():
    """One seed on every rank had masked the same positions in each rank's k-th batch."""
    alone, first, second = _draws(None), _draws(0), _draws(1)
    assert sorted(first) == [0, 2, 4, 6] and sorted(second) == [1, 3, 5, 7]
    assert [first[i] for i in sorted(first)] == [alone[i] for i in sorted(alone)][:4]  # rank 0: the seed's stream
    assert not set(first.values()) & set(second.values())


def test_each_rank_resumes_from_its_own_random_state():
    from sparse_adapt.training.loop import rng_state, seed_everything

    saved: list[dict] = []
    elsewhere = rng_state(seed_everything(99))  # what rank 0 sent: restoring it on rank 1 breaks the stream
    unbroken = _draws(1, checkpoint=saved.append, other=elsewhere)
    assert saved[0]["steps"] == 2 and len(saved[0]["rng_ranks"]) == 2
    resumed = _draws(1, resume=saved[0], other=elsewhere)
    assert sorted(resumed) == [5, 7] and all(resumed[i] == unbroken[i] for i in resumed)


# Each rank's view of the collectives, printed as one JSON line. Rank 1 has no gradient for
# ``b`` (its batches did not reach that parameter) and reaches the barrier late.
COLLECTIVES = """
import json, sys, time
import torch
from sparse_adapt.training.distributed import Processes

p = Processes(torch.device("cpu"))
r = p.rank
a, b, c = (torch.nn.Parameter(torch.zeros(s)) for s in ((2, 2), (3,), (1,)))
a.grad = torch.full((2, 2), float(r + 1))
b.grad = torch.arange(3.0) if r == 0 else None
c.grad = torch.tensor([10.0 * (r + 1)])
p.sum_gradients([a, b, c])
seen = {"world": p.world, "rank": r, "main": p.is_main, "broadcast": p.broadcast(f"from {r}"),
        "gather": p.gather((r, f"r{r}")), "sum_int": p.sum_int(r + 2), "a": a.grad.tolist(),
        "b": b.grad.tolist(), "c": c.grad.tolist(), "device": str(p.device(torch.device("cuda", 1)))}
if r == 1:
    time.sleep(1.0)
seen["before_barrier"] = time.time()
p.barrier()
seen["after_barrier"] = time.time()
print(json.dumps(seen))
"""


@pytest.mark.parametrize("local_ranks", [(0, 1), (0, 0)], ids=["one-machine", "two-machines"])
def test_two_gloo_ranks_sum_gradients_broadcast_rank_zeros_object_and_gather_in_rank_order(local_ranks):
    """The collectives the loop relies on, on a real gloo group of two processes (no launcher):
    a wrong reduction or a dropped early return passed the single-process tests. On two machines
    each is its machine's local rank 0, and only the global rank 0 is the main process."""
    env = _env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE="2")
    procs = [subprocess.Popen([sys.executable, "-c", COLLECTIVES], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**env, "RANK": str(r), "LOCAL_RANK": str(local_ranks[r])})
             for r in (0, 1)]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:  # a rank left waiting on a collective its peer never joined
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    zero, one = (json.loads(out.strip().splitlines()[-1]) for out, _ in outs)
    for seen, rank in ((zero, 0), (one, 1)):
        assert (seen["world"], seen["rank"], seen["main"]) == (2, rank, rank == 0)
        assert seen["a"] == [[3.0, 3.0], [3.0, 3.0]]  # 1 + 2, summed (not averaged) over the ranks
        assert seen["b"] == [0.0, 1.0, 2.0]  # rank 1's missing gradient counts as zeros
        assert seen["c"] == [30.0]  # the last parameter of the flat vector, at its own offset
        assert seen["broadcast"] == "from 0"
        assert seen["gather"] == [[0, "r0"], [1, "r1"]]  # one object per rank, in rank order
        assert seen["sum_int"] == 5  # 2 + 3
        assert seen["device"].split(":")[0] == "cpu"  # a launched rank's own device (the gloo group's CPU), not cuda:1
    assert zero["after_barrier"] >= one["before_barrier"]  # rank 0 waited for the late rank 1


def test_a_plain_run_keeps_the_device_it_asked_for():
    # One process: --device cuda:1 stays cuda:1 (Accelerate's own device would be another).
    from sparse_adapt.training.distributed import Processes

    processes = Processes(torch.device("cpu"))
    assert processes.world == 1 and processes.device(torch.device("cuda", 1)) == torch.device("cuda", 1)
