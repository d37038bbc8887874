"""Encoding benchmark: sparse-adapt against a plain Hugging Face loop and sentence-transformers.

    python -m bench.encode [--quick] [--threads N] [--docs 600] [--models minilm,bert-base:200]

Each (model, system) run is its own subprocess, so the peak resident memory it reports
(``VmHWM``: imports + weights + encoding, the whole process) belongs to that system
alone. Runs are interleaved (model by model, systems in rotating order, ``--repeats``
rounds) so load from other work on a shared machine spreads over all systems; results are
reported as ratios to the straightforward loop. Every system's vectors are saved and
compared: top-10 terms per document (special tokens excluded) and the largest difference.
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
from typing import Callable

import numpy as np
import scipy.sparse as sp

from bench.workload import MODELS, model_dir, peak_rss_mb, synthetic_corpus

SYSTEMS = ("hf-loop", "sentence-transformers", "sparse-adapt", "sparse-adapt-export")
BASELINE = "hf-loop"


# --------------------------------------------------------------------------- systems
# Each loads from a model directory and returns the function that encodes texts to a
# (n, V) CSR in input order, special-token columns as the system produces them.

Encode = Callable[[list[str]], sp.csr_matrix]


def load_hf_loop(directory: Path, batch_size: int, max_length: int) -> Encode:
    """What one writes first: full MLM logits, log1p(relu), mask, max; batches in input order."""
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory)
    mlm = AutoModelForMaskedLM.from_pretrained(directory).eval()

    @torch.no_grad()
    def encode(texts: list[str]) -> sp.csr_matrix:
        rows = []
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(
                texts[start : start + batch_size], padding=True, truncation=True, max_length=max_length,
                return_tensors="pt",
            )
            logits = mlm(**batch).logits  # (B, L, V)
            act = torch.log1p(torch.relu(logits)) * batch["attention_mask"].unsqueeze(-1)
            rows.append(sp.csr_matrix(act.amax(dim=1).numpy()))
        return sp.vstack(rows, format="csr")

    return encode


def load_sentence_transformers(directory: Path, batch_size: int, max_length: int) -> Encode:
    """sentence-transformers' SparseEncoder (sorts by length; full logits per batch)."""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling, Transformer

    model = SparseEncoder(
        modules=[Transformer(str(directory), transformer_task="fill-mask", max_seq_length=max_length), SpladePooling("max")],
        device="cpu",
    )

    def encode(texts: list[str]) -> sp.csr_matrix:
        out = model.encode(texts, batch_size=batch_size, convert_to_sparse_tensor=True, show_progress_bar=False)
        out = out.coalesce()
        (r, c), v = out.indices().numpy(), out.values().numpy()
        return sp.csr_matrix((v, (r, c)), shape=tuple(out.shape), dtype=np.float32)

    return encode


def load_sparse_adapt(directory: Path, batch_size: int, max_length: int) -> Encode:
    from sparse_adapt.modeling.encoder import SpladeEncoder

    splade = SpladeEncoder.from_pretrained(directory)
    splade.settings.doc_max_length = max_length
    return lambda texts: splade.encode(texts, "document", batch_size=batch_size)


def load_sparse_adapt_export(directory: Path, batch_size: int, max_length: int) -> Encode:
    """What `sparse-adapt export` does: stream docs.jsonl -> Pyserini JsonVectorCollection
    (integer impacts, scale 100). Read back as weights / scale for the agreement check, so
    top-10 agreement is up to quantisation ties."""
    import tempfile

    from sparse_adapt.retrieval.export import VECTORS_FILE, ExportConfig, export_vectors, lucene_vocabulary
    from sparse_adapt.modeling.encoder import SpladeEncoder

    splade = SpladeEncoder.from_pretrained(directory)
    splade.settings.doc_max_length = max_length
    config = ExportConfig(scale=EXPORT_SCALE, batch_size=batch_size)

    def encode(texts: list[str]) -> sp.csr_matrix:
        with tempfile.TemporaryDirectory() as tmp:
            docs = Path(tmp) / "docs.jsonl"
            docs.write_text("".join(json.dumps({"doc_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
            export_vectors(splade, docs, Path(tmp) / "vectors", config)
            column = {tok: i for i, tok in enumerate(lucene_vocabulary(splade))}
            rows, cols, vals = [], [], []
            with (Path(tmp) / "vectors" / VECTORS_FILE).open(encoding="utf-8") as f:
                for r, line in enumerate(f):
                    for tok, impact in json.loads(line)["vector"].items():
                        rows.append(r), cols.append(column[tok]), vals.append(impact / config.scale)
        return sp.csr_matrix((vals, (rows, cols)), shape=(len(texts), len(column)), dtype=np.float32)

    return encode


LOADERS: dict[str, Callable[[Path, int, int], Encode]] = {
    "hf-loop": load_hf_loop,
    "sentence-transformers": load_sentence_transformers,
    "sparse-adapt": load_sparse_adapt,
    "sparse-adapt-export": load_sparse_adapt_export,
}


# --------------------------------------------------------------------------- one run


@dataclass
class Run:
    model: str
    system: str
    docs: int
    seconds: float  # encoding only, wall clock
    cpu_seconds: float  # encoding only, CPU time of all threads: steadier than wall on a shared machine
    load_seconds: float  # imports and weights, reported apart
    peak_rss_mb: float  # whole process: interpreter, imports, weights, encoding

    @property
    def docs_per_s(self) -> float:
        return self.docs / self.seconds


def worker(system: str, model: str, directory: Path, corpus: Path, out: Path, batch_size: int, max_length: int, threads: int) -> Run:
    import torch

    torch.set_num_threads(threads)
    texts = json.loads(corpus.read_text(encoding="utf-8"))
    start = time.perf_counter()
    encode = LOADERS[system](directory, batch_size, max_length)
    loaded, cpu = time.perf_counter(), time.process_time()
    matrix = encode(texts)
    seconds, cpu = time.perf_counter() - loaded, time.process_time() - cpu
    sp.save_npz(out, matrix.tocsr().astype(np.float32))
    peak = peak_rss_mb()
    return Run(model, system, len(texts), seconds, cpu, loaded - start, peak)


def run_subprocess(system: str, model: str, directory: Path, corpus: Path, out: Path, args) -> Run:
    cmd = [
        sys.executable, "-m", "bench.encode", "--worker", system, "--worker-model", model,
        "--worker-dir", str(directory), "--worker-corpus", str(corpus), "--worker-out", str(out),
        "--batch-size", str(args.batch_size), "--max-length", str(args.max_length), "--threads", str(args.threads),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    if done.returncode != 0:
        raise RuntimeError(f"{system} on {model} failed:\n{done.stderr[-3000:]}")
    return Run(**json.loads(done.stdout.strip().splitlines()[-1]))


# --------------------------------------------------------------------------- agreement


EXPORT_SCALE = 100  # `sparse-adapt export`'s default --scale


def quantised_like_export(m: sp.csr_matrix, scale: int) -> sp.csr_matrix:
    q = m.tocsr(copy=True)
    q.data = np.round(q.data * scale) / scale
    q.eliminate_zeros()
    return q


def top_k_agreement(a: sp.csr_matrix, b: sp.csr_matrix, excluded: list[int], k: int = 10) -> tuple[int, float]:
    """(documents whose top-k term ids are identical in order, largest absolute weight difference)."""
    a, b = a.tolil(copy=True), b.tolil(copy=True)
    a[:, excluded] = 0
    b[:, excluded] = 0
    a, b = a.toarray(), b.toarray()
    same = 0
    for row_a, row_b in zip(a, b):
        top_a = np.argsort(-row_a, kind="stable")[:k]
        top_b = np.argsort(-row_b, kind="stable")[:k]
        # A term outside the top-k on both sides can only swap in when weights tie exactly.
        same += bool(np.array_equal(top_a, top_b))
    return same, float(np.abs(a - b).max()) if a.size else 0.0


# --------------------------------------------------------------------------- report


def summarise(runs: list[Run], agreement: dict) -> dict:
    out = {}
    for model in dict.fromkeys(r.model for r in runs):
        mine = [r for r in runs if r.model == model]
        base_s = median(r.seconds for r in mine if r.system == BASELINE)
        base_cpu = median(r.cpu_seconds for r in mine if r.system == BASELINE)
        base_rss = median(r.peak_rss_mb for r in mine if r.system == BASELINE)
        out[model] = {}
        for system in [s for s in SYSTEMS if any(r.system == s for r in mine)]:
            rs = [r for r in mine if r.system == system]
            s, rss = median(r.seconds for r in rs), median(r.peak_rss_mb for r in rs)
            cpu = median(r.cpu_seconds for r in rs)
            out[model][system] = {
                "docs": rs[0].docs,
                "seconds": round(s, 2),
                "docs_per_s": round(rs[0].docs / s, 2),
                "peak_rss_mb": round(rss),
                "cpu_seconds": round(cpu, 2),
                "time_ratio": round(s / base_s, 3),  # < 1: faster than the HF loop
                "cpu_ratio": round(cpu / base_cpu, 3),
                "rss_ratio": round(rss / base_rss, 3),  # < 1: leaner than the HF loop
                **agreement.get((model, system), {}),
            }
    return out


def print_table(summary: dict, settings: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"SPLADE encoding ({settings})")
    for col in ("model", "system", "docs/s", "seconds", "CPU s", "peak RSS MB", "time / hf-loop", "CPU / hf-loop", "RSS / hf-loop", "top-10 same", "max |diff|"):
        table.add_column(col, justify="right" if col not in ("model", "system") else "left")
    for model, systems in summary.items():
        for system, row in systems.items():
            table.add_row(
                model, system, f"{row['docs_per_s']:.2f}", f"{row['seconds']:.1f}", f"{row['cpu_seconds']:.1f}",
                f"{row['peak_rss_mb']}", f"{row['time_ratio']:.2f}", f"{row['cpu_ratio']:.2f}", f"{row['rss_ratio']:.2f}",
                f"{row.get('top10_identical', '-')}/{row['docs']}", f"{row.get('max_abs_diff', 0):.1e}",
            )
    Console(width=150).print(table)


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(prog="python -m bench.encode", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 64 docs, MiniLM only, max 128 tokens")
    parser.add_argument("--docs", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument(
        "--models", default="minilm,bert-base:200",
        help=f"comma-separated NAME[:DOCS] ({', '.join(MODELS)}); DOCS overrides --docs for that model",
    )
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated: {', '.join(SYSTEMS)}")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved rounds; medians are reported")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch threads per run")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "sparse-adapt-bench")
    parser.add_argument("--json", type=Path, help="also write the results here")
    for name in ("worker", "worker-model", "worker-dir", "worker-corpus", "worker-out"):
        parser.add_argument(f"--{name}", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        run = worker(
            args.worker, args.worker_model, Path(args.worker_dir), Path(args.worker_corpus), Path(args.worker_out),
            args.batch_size, args.max_length, args.threads,
        )
        print(json.dumps(asdict(run)))
        return 0

    if args.quick:
        args.docs, args.models, args.max_length = 64, "minilm", 128
    n_docs = {}
    for spec in filter(None, args.models.split(",")):
        name, _, docs = spec.partition(":")
        if name not in MODELS:
            parser.error(f"--models: unknown model {name!r}; choose from {', '.join(MODELS)}")
        n_docs[name] = int(docs) if docs else args.docs
    models = list(n_docs)
    systems = [s for s in args.systems.split(",") if s]
    for s in systems:
        if s not in LOADERS:
            parser.error(f"--systems: unknown system {s!r}; choose from {', '.join(SYSTEMS)}")
    if BASELINE not in systems:
        parser.error(f"--systems must include the baseline {BASELINE!r}: results are ratios to it")
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus_files = {}
    for model, n in n_docs.items():
        corpus_files[model] = args.workdir / f"corpus-{n}.json"  # the first n of the same seeded corpus
        corpus_files[model].write_text(json.dumps(synthetic_corpus(max(n_docs.values()))[:n]), encoding="utf-8")
    dirs = {m: model_dir(m, args.workdir / "models") for m in models}

    runs: list[Run] = []
    outputs: dict[tuple[str, str], Path] = {}
    for round_ in range(args.repeats):
        for model in models:
            shift = (round_ + models.index(model)) % len(systems)
            for system in systems[shift:] + systems[:shift]:
                out = args.workdir / f"vectors-{model}-{system}.npz"
                run = run_subprocess(system, model, dirs[model], corpus_files[model], out, args)
                print(f"  {model:10s} {system:22s} {run.seconds:8.1f} s  {run.cpu_seconds:8.1f} CPU s  {run.peak_rss_mb:7.0f} MB", file=sys.stderr)
                runs.append(run)
                outputs[(model, system)] = out

    agreement = {}
    for model in models:
        from transformers import AutoTokenizer

        special = AutoTokenizer.from_pretrained(dirs[model]).all_special_ids
        reference = sp.load_npz(outputs[(model, BASELINE)])
        for system in systems:
            # The export writes integer impacts: compare it with the reference quantised the same
            # way (round(w * 100) / 100), so agreement means "exactly the impacts it should write".
            ref = reference if system != "sparse-adapt-export" else quantised_like_export(reference, EXPORT_SCALE)
            same, diff = top_k_agreement(sp.load_npz(outputs[(model, system)]), ref, special)
            agreement[(model, system)] = {"top10_identical": same, "max_abs_diff": diff}

    settings = {"docs": n_docs, "batch_size": args.batch_size, "max_length": args.max_length, "threads": args.threads, "repeats": args.repeats}
    summary = summarise(runs, agreement)
    print_table(summary, settings)
    if args.json:
        args.json.write_text(json.dumps({"settings": settings, "results": summary, "runs": [asdict(r) for r in runs]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
