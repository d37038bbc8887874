"""Query encoding: ONNX Runtime (the `sparse-adapt onnx` export) against PyTorch (`SpladeEncoder`).

    python -m bench.onnx [--quick] [--model minilm] [--batch-sizes 1,32] [--threads 1] [--repeats 5]

Both encode the same queries (every bundled corpus's queries, repeated to ``--queries``)
with the same model, in one process, interleaved: each round times PyTorch and ONNX
Runtime in alternating order per batch size, medians over ``--repeats`` rounds, reported
as ONNX Runtime / PyTorch ratios. Batch size 1 is a search service encoding one query at
a time; 32 is batch retrieval. Agreement: the largest weight difference and the queries
whose top-10 term ids (in order) are identical.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from statistics import median

from bench.workload import MODELS, model_dir

SYSTEMS = ("pytorch", "onnxruntime")
PEER = "pytorch"


def bundled_queries(n: int) -> list[str]:
    """``n`` queries: the bundled corpora's queries in order, repeated as needed."""
    import corpora
    from sparse_adapt.data import load_queries

    texts = [q.text for name in corpora.names() for q in load_queries(corpora.get(name).queries)]
    return [texts[i % len(texts)] for i in range(n)]


def time_encode(encode, texts: list[str], batch_size: int) -> float:
    """Seconds to encode ``texts`` in batches of ``batch_size`` (encoding only)."""
    start = time.perf_counter()
    for b0 in range(0, len(texts), batch_size):
        encode(texts[b0 : b0 + batch_size])
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm", choices=MODELS)
    parser.add_argument("--queries", type=int, default=256)
    parser.add_argument("--batch-sizes", default="1,32")
    parser.add_argument("--threads", type=int, default=1, help="torch threads and ONNX Runtime intra-op threads")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="tiny model, 32 queries, 2 rounds (smoke run)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "sparse-adapt-bench")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.model, args.queries, args.repeats = "tiny", 32, 2

    import torch

    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.modeling.onnx import OnnxSpladeEncoder, compare, export_onnx

    torch.set_num_threads(args.threads)
    directory = model_dir(args.model, args.workdir)
    splade = SpladeEncoder.from_pretrained(directory)
    onnx_dir = args.workdir / f"{args.model}-onnx"
    t0 = time.perf_counter()
    export_onnx(splade, onnx_dir, source=str(directory))
    export_seconds = time.perf_counter() - t0
    onnx = OnnxSpladeEncoder(onnx_dir, threads=args.threads)
    texts = bundled_queries(args.queries)
    encoders = {"pytorch": lambda t: splade.encode(t, "query", len(t)), "onnxruntime": lambda t: onnx.encode(t, "query", len(t))}

    agreement = compare(splade.encode(texts, "query"), onnx.encode(texts, "query"))
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    seconds: dict[tuple[int, str], list[float]] = {(b, s): [] for b in batch_sizes for s in SYSTEMS}
    for b in batch_sizes:
        for system in SYSTEMS:  # warm-up: first calls allocate and pick kernels
            time_encode(encoders[system], texts[: 2 * b], b)
    for r in range(args.repeats):
        for b in batch_sizes:
            order = SYSTEMS if r % 2 == 0 else SYSTEMS[::-1]
            for system in order:
                seconds[(b, system)].append(time_encode(encoders[system], texts, b))

    rows = []
    for b in batch_sizes:
        peer = median(seconds[(b, PEER)])
        for system in SYSTEMS:
            s = median(seconds[(b, system)])
            rows.append({
                "batch_size": b, "system": system, "queries": len(texts), "seconds": round(s, 3),
                "ms_per_query": round(1000 * s / len(texts), 3), "ratio_to_pytorch": round(s / peer, 3),
            })
    summary = {
        "model": args.model, "threads": args.threads, "repeats": args.repeats, "export_seconds": round(export_seconds, 1),
        "agreement": {"queries": agreement.rows, "top10_identical": agreement.top_identical,
                      "max_abs_diff": agreement.max_abs_diff, "same_nonzeros": agreement.same_nonzeros},
        "rows": rows,
        "versions": {"torch": torch.__version__, "onnxruntime": __import__("onnxruntime").__version__},
    }
    print(f"model {args.model}, {len(texts)} queries, {args.threads} thread(s), median of {args.repeats} rounds; "
          f"export {export_seconds:.1f} s")
    print("| batch | system | ms/query | time / PyTorch |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['batch_size']} | {row['system']} | {row['ms_per_query']:.2f} | {row['ratio_to_pytorch']:.2f} |")
    print(f"agreement: top-10 identical {agreement.top_identical}/{agreement.rows}, "
          f"max |diff| {agreement.max_abs_diff:.1e}, same non-zeros: {agreement.same_nonzeros}")
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
