"""Training-step benchmark: one distillation step with all six losses (``DistillationLoss()``: the seventh,
preservation, weighs 0) against KD only.

    python -m bench.train_step [--quick] [--threads N] [--queries 4] [--steps 6] [--heads chunked]

A step is: encode the batch's queries and unique candidate documents with gradients, the
loss, backward, AdamW. Tokenisation happens once, outside the step. Times come from one
process per head that alternates KD-only and six-term steps, so load from other work on a
shared machine hits both alike. Peak RSS (``VmHWM``, whole process) comes from one
short process per (head, loss). ``--heads chunked,full`` adds the straightforward head (full (B, L, V) logits) for
comparison with sparse-adapt's chunked head. ``--long-docs`` replaces the short training
documents by synthetic ones of 1-10 sentences, where the head's memory matters.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import median

from bench.workload import MODELS, model_dir, peak_rss_mb, synthetic_corpus

LOSSES = ("kd", "six")
HEADS = ("chunked", "full")


@dataclass
class StepRun:
    model: str
    losses: list[str]  # the losses this process alternated
    head: str
    steps: int  # measured steps per loss
    seconds_per_step: dict[str, float]  # loss -> median wall time over its measured steps (warm-up excluded)
    cpu_seconds_per_step: dict[str, float]  # the same in CPU time: steadier on a shared machine
    peak_rss_mb: float


def _batch(splade, n_queries: int, long_docs: bool):
    from corpora import GATROCRAPTIC
    from sparse_adapt.data import load_train
    from sparse_adapt.training.stages import collate_candidates

    examples = load_train(GATROCRAPTIC.train)[:n_queries]
    texts, doc_index, teacher = collate_candidates(examples)  # doc_index, teacher: (B, N)
    if long_docs:
        texts = synthetic_corpus(len(texts), seed=2)
    return {
        "queries": splade.tokenize([ex.query for ex in examples], "query"),
        "docs": splade.tokenize(texts, "document"),
        "doc_index": doc_index,
        "teacher": teacher,
        "mask": doc_index >= 0,
    }


def worker(model: str, directory: Path, losses: list[str], head: str, n_queries: int, steps: int, threads: int, long_docs: bool) -> StepRun:
    import torch

    from corpora import GATROCRAPTIC
    from sparse_adapt.data import load_domain_terms
    from sparse_adapt.losses import DistillationLoss, KDLoss
    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.modeling.pooling import pool_logits as splade_pool
    from sparse_adapt.modeling.vocabulary import extend_vocabulary

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    splade = SpladeEncoder.from_pretrained(directory)
    extend_vocabulary(splade, load_domain_terms(GATROCRAPTIC.terms))  # so the domain terms are not empty
    if head == "full":  # the straightforward head, for comparison
        def forward(input_ids, attention_mask):
            return splade_pool(splade.logits(input_ids, attention_mask), attention_mask) * splade.output_mask

        splade.forward = forward
    splade.train()
    batch = _batch(splade, n_queries, long_docs)
    domain_ids = splade.domain_token_ids
    six, kd = DistillationLoss(), KDLoss()
    optimizer = torch.optim.AdamW(splade.parameters(), lr=2e-5)
    times: dict[str, list[float]] = {loss: [] for loss in losses}
    cpu_times: dict[str, list[float]] = {loss: [] for loss in losses}
    for step in range(1, (steps + 1) * len(losses) + 1):
        loss = losses[(step - 1) % len(losses)]
        start, cpu = time.perf_counter(), time.process_time()
        qw = splade(batch["queries"]["input_ids"], batch["queries"]["attention_mask"])  # (B, V)
        dw = splade(batch["docs"]["input_ids"], batch["docs"]["attention_mask"])  # (U, V)
        if loss == "six":
            total = six(
                query_weights=qw, query_input_ids=batch["queries"]["input_ids"], doc_weights=dw,
                doc_input_ids=batch["docs"]["input_ids"], doc_index=batch["doc_index"], teacher=batch["teacher"],
                mask=batch["mask"], domain_ids=domain_ids, step=step,
            )["total"]
        else:
            student = torch.einsum("bv,bnv->bn", qw, dw[batch["doc_index"].clamp(min=0)])  # (B, N)
            total = kd(student, batch["teacher"], batch["mask"])
        optimizer.zero_grad(set_to_none=True)
        total.backward()
        optimizer.step()
        if step > len(losses):  # each loss's first step pays one-off allocations
            times[loss].append(time.perf_counter() - start)
            cpu_times[loss].append(time.process_time() - cpu)
    peak = peak_rss_mb()
    return StepRun(
        model, losses, head, steps, {k: median(t) for k, t in times.items()}, {k: median(t) for k, t in cpu_times.items()}, peak
    )


def _spawn(args, directory: Path, losses: list[str], head: str, steps: int) -> StepRun:
    cmd = [
        sys.executable, "-m", "bench.train_step", "--worker", ",".join(losses), head, str(directory),
        "--model", args.model, "--queries", str(args.queries), "--steps", str(steps), "--threads", str(args.threads),
    ] + (["--long-docs"] if args.long_docs else [])
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    if done.returncode != 0:
        raise RuntimeError(f"{'/'.join(losses)} with the {head} head failed:\n{done.stderr[-3000:]}")
    return StepRun(**json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(prog="python -m bench.train_step", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 queries, 2 steps per loss, chunked head only")
    parser.add_argument("--model", default="minilm", choices=MODELS)
    parser.add_argument("--queries", type=int, default=4, help="training queries per step (8 candidates each)")
    parser.add_argument("--steps", type=int, default=6, help="measured steps per loss, after one warm-up step each")
    parser.add_argument("--heads", default="chunked", help=f"comma-separated: {', '.join(HEADS)}")
    parser.add_argument("--long-docs", action="store_true", help="synthetic 1-10 sentence documents as candidates")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "sparse-adapt-bench")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--worker", nargs=3, metavar=("LOSSES", "HEAD", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        losses, head, directory = args.worker
        run = worker(args.model, Path(directory), losses.split(","), head, args.queries, args.steps, args.threads, args.long_docs)
        print(json.dumps(asdict(run)))
        return 0

    if args.quick:
        args.queries, args.steps, args.heads = 2, 2, "chunked"
    heads = [h for h in args.heads.split(",") if h]
    for h in heads:
        if h not in HEADS:
            parser.error(f"--heads: unknown head {h!r}; choose from {', '.join(HEADS)}")
    directory = model_dir(args.model, args.workdir / "models")
    summary: dict = {}
    runs: list[StepRun] = []
    for head in heads:
        timing = _spawn(args, directory, list(LOSSES), head, args.steps)
        runs.append(timing)
        for loss in LOSSES:
            memory = _spawn(args, directory, [loss], head, 1)
            runs.append(memory)
            summary.setdefault(head, {})[loss] = {
                "seconds_per_step": round(timing.seconds_per_step[loss], 3),
                "time_ratio_to_kd": round(timing.seconds_per_step[loss] / timing.seconds_per_step["kd"], 3),
                "cpu_seconds_per_step": round(timing.cpu_seconds_per_step[loss], 3),
                "cpu_ratio_to_kd": round(timing.cpu_seconds_per_step[loss] / timing.cpu_seconds_per_step["kd"], 3),
                "peak_rss_mb": round(memory.peak_rss_mb),
            }
            print(
                f"  {head:8s} {loss:4s} {timing.seconds_per_step[loss]:7.2f} s/step  "
                f"{timing.cpu_seconds_per_step[loss]:7.2f} CPU s/step  {memory.peak_rss_mb:7.0f} MB", file=sys.stderr,
            )

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"distillation step ({args.model}, {args.queries} queries x 8 candidates, threads {args.threads})")
    for col in ("head", "loss", "s/step", "time / KD-only", "CPU s/step", "CPU / KD-only", "peak RSS MB"):
        table.add_column(col)
    for head, per in summary.items():
        for loss, row in per.items():
            table.add_row(
                head, loss, f"{row['seconds_per_step']:.2f}", f"{row['time_ratio_to_kd']:.2f}",
                f"{row['cpu_seconds_per_step']:.2f}", f"{row['cpu_ratio_to_kd']:.2f}", str(row["peak_rss_mb"]),
            )
    Console(width=120).print(table)
    if args.json:
        settings = {"model": args.model, "queries": args.queries, "steps": args.steps, "threads": args.threads,
                    "long_docs": args.long_docs}
        args.json.write_text(json.dumps({"settings": settings, "results": summary, "runs": [asdict(r) for r in runs]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
