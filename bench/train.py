"""Training benchmark: sparse-adapt against named peers, each system in its own process.

    python -m bench.train [--quick] [--model minilm|bert-base|tiny] [--threads N] [--repeats R] [--json PATH]
                          [--parts warmup,distill,rss,extend]

Parts (every number is a ratio to its peer measured in the same invocation; processes are
interleaved round by round so load from other work hits every system alike). Where CUDA is
present every system trains on it, the peers with ``bf16=True`` since sparse-adapt trains
under bf16 autocast there:

- ``warmup``: one epoch of masked-LM on synthetic documents (1-10 sentences, batch 8,
  max 256 pieces, the offline MiniLM base). Peer: Hugging Face ``Trainer`` with
  ``DataCollatorForLanguageModeling`` (15% masking); ``hf-trainer-grouped`` is the same with
  ``train_sampling_strategy="group_by_length"`` (batches of similar lengths, less padding). sparse-adapt runs its warmup stage
  twice: fixed batches of 8, and a token budget of 8 x 128 padded pieces with length
  bucketing. Time covers data preparation and training, not model loading.
- ``distill``: one epoch of distillation over the bundled teacher-scored candidate lists
  (repeated to 60 queries). Peer: sentence-transformers ``SparseEncoderTrainer`` with
  ``SpladeLoss(SparseMarginMSELoss)`` on the same model and the same lists turned into
  (query, best candidate, other candidate, teacher margin) triples.
- ``rss``: peak RSS (``VmHWM``) of the warmup stage with ``max_steps`` fixed, over 1k,
  10k and 50k synthetic documents: memory must not grow with the corpus.
- ``extend``: ``extend_vocabulary`` with 10,000 made-up terms: time and peak RSS.

``--json`` is written after every measured run (with ``"partial": true`` until the last), so a
run stopped by a time limit (a lent GPU's minutes) keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

from bench.workload import MODELS, model_dir, peak_rss_mb, synthetic_corpus
from sparse_adapt.atomic import write_atomic

ROOT = Path(__file__).resolve().parent.parent
SYSTEMS = {
    "warmup": ("hf-trainer", "hf-trainer-grouped", "sparse-adapt", "sparse-adapt-budget"),
    "distill": ("st-trainer", "sparse-adapt"),
}


def _docs_file(root: Path, n: int) -> Path:
    path = root / f"docs-{n}.jsonl"
    if not path.is_file():
        texts = synthetic_corpus(n, seed=7)
        path.write_text("".join(json.dumps({"doc_id": f"s{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    return path


def _train_file(root: Path, n_queries: int) -> Path:
    from corpora import GATROCRAPTIC

    path = root / f"train-{n_queries}.jsonl"
    if not path.is_file():
        rows = [json.loads(l) for l in GATROCRAPTIC.train.read_text().splitlines() if l.strip()]
        out = [dict(rows[i % len(rows)], qid=f"q{i}") for i in range(n_queries)]
        path.write_text("".join(json.dumps(r) + "\n" for r in out))
    return path


# ---------------------------------------------------------------------------- workers
def _sparse_adapt_stage(model: Path, work: Path, stage: str, section: dict, docs: Path, train: Path) -> dict:
    from corpora import GATROCRAPTIC
    from sparse_adapt.training.pipeline import run_pipeline

    out = Path(tempfile.mkdtemp(dir=work, prefix=f"run-{stage}-"))
    run_pipeline(base=str(model), corpus=docs, terms=GATROCRAPTIC.terms, dictionary=GATROCRAPTIC.dictionary,
                 train=train, out=out / "run", stages=stage, config=_config(stage, section), seed=0)
    records = [json.loads(l) for l in (out / "run" / "train_log.jsonl").read_text().splitlines()]
    end = next(r for r in records if r.get("event") == "stage_end")
    tokens = sum(r.get("tokens", 0) for r in records if "step" in r)
    return {"seconds": end["seconds"], "steps": end["steps"], "tokens": tokens}


def _config(stage: str, section: dict):
    from sparse_adapt.training.config_files import config_from_dict

    return config_from_dict({stage: section})


def _hf_trainer_warmup(model: Path, work: Path, docs: Path, group_by_length: bool = False) -> dict:
    import torch
    from transformers import (AutoModelForMaskedLM, AutoTokenizer, DataCollatorForLanguageModeling, Trainer,
                              TrainingArguments)

    tok = AutoTokenizer.from_pretrained(model)
    mlm = AutoModelForMaskedLM.from_pretrained(model)
    start = time.perf_counter()
    texts = [json.loads(l)["text"] for l in docs.read_text().splitlines() if l.strip()]
    encoded = [tok(t, truncation=True, max_length=256) for t in texts]
    dataset = [{"input_ids": e["input_ids"], "attention_mask": e["attention_mask"]} for e in encoded]
    args = TrainingArguments(
        output_dir=str(Path(tempfile.mkdtemp(dir=work))), per_device_train_batch_size=8, num_train_epochs=1,
        learning_rate=2e-4, save_strategy="no", report_to=[], logging_strategy="no", disable_tqdm=True,
        use_cpu=not torch.cuda.is_available(), bf16=torch.cuda.is_available(), seed=0, dataloader_num_workers=0,
        train_sampling_strategy="group_by_length" if group_by_length else "random",
    )
    collator = DataCollatorForLanguageModeling(tok, mlm_probability=0.15)
    Trainer(model=mlm, args=args, train_dataset=dataset, data_collator=collator).train()
    return {"seconds": time.perf_counter() - start, "tokens": sum(len(e["input_ids"]) for e in encoded)}


def _st_trainer_distill(model: Path, work: Path, train: Path) -> dict:
    import torch
    from datasets import Dataset
    from sentence_transformers.sparse_encoder import SparseEncoder, SparseEncoderTrainer, SparseEncoderTrainingArguments
    from sentence_transformers.sparse_encoder.losses import SparseMarginMSELoss, SpladeLoss
    from sentence_transformers.sparse_encoder.models import MLMTransformer, SpladePooling

    st = SparseEncoder(modules=[MLMTransformer(str(model), max_seq_length=256), SpladePooling("max")])
    start = time.perf_counter()
    rows = {"query": [], "positive": [], "negative": [], "label": []}
    for line in train.read_text().splitlines():
        r = json.loads(line)
        best = max(range(len(r["doc_ids"])), key=lambda i: r["teacher_scores"][i])
        for i, text in enumerate(r["doc_texts"]):
            if i != best:
                rows["query"].append(r["query"])
                rows["positive"].append(r["doc_texts"][best])
                rows["negative"].append(text)
                rows["label"].append(r["teacher_scores"][best] - r["teacher_scores"][i])
    loss = SpladeLoss(st, SparseMarginMSELoss(st), document_regularizer_weight=0.2, query_regularizer_weight=0.2)
    args = SparseEncoderTrainingArguments(
        output_dir=str(Path(tempfile.mkdtemp(dir=work))), per_device_train_batch_size=8, num_train_epochs=1,
        learning_rate=2.5e-4, save_strategy="no", report_to=[], logging_strategy="no", disable_tqdm=True,
        use_cpu=not torch.cuda.is_available(), bf16=torch.cuda.is_available(), seed=0,
    )
    SparseEncoderTrainer(model=st, args=args, train_dataset=Dataset.from_dict(rows), loss=loss).train()
    return {"seconds": time.perf_counter() - start, "triples": len(rows["query"])}


def _extend(model: Path, n_terms: int) -> dict:
    import random

    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.modeling.vocabulary import extend_vocabulary

    splade = SpladeEncoder.from_pretrained(model)
    rng = random.Random(0)
    syllables = ["zor", "blat", "quen", "trax", "vel", "mib", "dorn", "skel", "prav", "lute", "cyn", "oph"]
    terms = sorted({"".join(rng.choice(syllables) for _ in range(4)) + str(i) for i in range(n_terms)})
    start = time.perf_counter()
    report = extend_vocabulary(splade, {"jargon": terms})
    return {"seconds": time.perf_counter() - start, "added": len(report.added)}


# What --parts takes: the timed comparisons with a peer, then sparse-adapt alone.
PARTS = ("warmup", "distill", "rss", "extend")


def worker(part: str, system: str, model: Path, work: Path, size: int, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    if part == "warmup":
        docs = _docs_file(work, size)
        if system.startswith("hf-trainer"):
            result = _hf_trainer_warmup(model, work, docs, group_by_length=system == "hf-trainer-grouped")
        else:
            section = {"epochs": 1, "batch_size": 8, "max_length": 256, "lr": 2e-4, "checkpoint_every": 0}
            if system == "sparse-adapt-budget":
                section.update(batch_size=64, batch_tokens=8 * 128)
            result = _sparse_adapt_stage(model, work, "warmup", section, docs, _train_file(work, 15))
    elif part == "distill":
        train = _train_file(work, size)
        if system == "st-trainer":
            result = _st_trainer_distill(model, work, train)
        else:
            section = {"epochs": 1, "batch_size": 5, "checkpoint_every": 0}
            result = _sparse_adapt_stage(model, work, "distill", section, _docs_file(work, 32), train)
    elif part == "rss":
        section = {"epochs": 1, "batch_size": 8, "max_length": 256, "max_steps": 10, "checkpoint_every": 0}
        result = _sparse_adapt_stage(model, work, "warmup", section, _docs_file(work, size), _train_file(work, 15))
    elif part == "extend":
        result = _extend(model, size)
    else:
        raise ValueError(f"unknown part {part!r}")
    return {"part": part, "system": system, "size": size, **result, "peak_rss_mb": round(peak_rss_mb(), 1)}


def _run(part: str, system: str, model: Path, work: Path, size: int, threads: int) -> dict:
    cmd = [sys.executable, "-m", "bench.train", "--worker", part, system, str(model), str(work), str(size), str(threads)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{part}/{system} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--parts", default="warmup,distill,rss,extend")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "sparse-adapt-bench-train")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--model", choices=MODELS, help="default: tiny with --quick, else minilm")
    parser.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:  # before any model is built or written
        parser.error(f"--parts takes {', '.join(PARTS)}; got {', '.join(unknown) or 'none'}")
    if args.worker:
        part, system, model, work, size, threads = args.worker
        print(json.dumps(worker(part, system, Path(model), Path(work), int(size), int(threads))))
        return 0
    args.workdir.mkdir(parents=True, exist_ok=True)
    model = model_dir(args.model or ("tiny" if args.quick else "minilm"), args.workdir)
    sizes = {"warmup": 40 if args.quick else 600, "distill": 10 if args.quick else 60,
             "rss": (200, 400) if args.quick else (1000, 10000, 50000), "extend": 200 if args.quick else 10000}
    runs = []

    def measure(part: str, system: str, size: int) -> None:
        runs.append(_run(part, system, model, args.workdir, size, args.threads))
        if args.json:  # after every run, atomically: one stopped by a time limit keeps what it measured
            write_atomic(args.json, json.dumps({"summary": summarise(runs), "runs": runs, "threads": args.threads,
                                                "partial": True}, indent=2) + "\n")

    for r in range(args.repeats):
        for part in parts:
            if part in SYSTEMS:
                for s in SYSTEMS[part][r % len(SYSTEMS[part]):] + SYSTEMS[part][: r % len(SYSTEMS[part])]:
                    measure(part, s, sizes[part])
            elif part == "rss" and r == 0:
                for n in sizes["rss"]:
                    measure(part, "sparse-adapt", n)
            elif part == "extend" and r == 0:
                measure(part, "sparse-adapt", sizes["extend"])
    summary = summarise(runs)
    print(json.dumps(summary, indent=2))
    if args.json:
        write_atomic(args.json, json.dumps({"summary": summary, "runs": runs, "threads": args.threads}, indent=2) + "\n")
    return 0


def summarise(runs: list[dict]) -> dict:
    """Median seconds per system and the ratio to each part's peer (a part whose systems have
    not all run is left out), peak RSS per corpus size, and the extension's cost."""
    summary = {}
    for part, systems in SYSTEMS.items():
        times = {s: median(x["seconds"] for x in runs if x["part"] == part and x["system"] == s)
                 for s in systems if any(x["part"] == part and x["system"] == s for x in runs)}
        if len(times) == len(systems):
            peer = times[systems[0]]
            summary[part] = {s: {"seconds": round(t, 2), "ratio_to_peer": round(t / peer, 3)} for s, t in times.items()}
    rss = [x for x in runs if x["part"] == "rss"]
    if rss:
        summary["rss"] = {str(x["size"]): x["peak_rss_mb"] for x in rss}
        summary["rss"]["largest_over_smallest"] = round(rss[-1]["peak_rss_mb"] / rss[0]["peak_rss_mb"], 3)
    ext = [x for x in runs if x["part"] == "extend"]
    if ext:
        summary["extend"] = {"terms": ext[0]["size"], "seconds": ext[0]["seconds"], "peak_rss_mb": ext[0]["peak_rss_mb"]}
    return summary


if __name__ == "__main__":
    sys.exit(main())
