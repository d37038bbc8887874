"""CUDA against CPU on one machine: the same training command, the same evaluation, two devices.

    python -m bench.cuda [--base offline-splade-tiny] [--domain gatrocraptic] [--threads N] [--json PATH]

For each device (``cuda``, then ``cpu``), in its own process: ``sparse-adapt train`` with the
default stages and config on the bundled domain, then ``export`` of its documents, then
``evaluate`` of its final on the domain's queries and its held-out queries. Then the
CUDA-trained final is evaluated and exported once more on CPU: the same model must rank the
same and give (nearly) the same impacts on either device, since CUDA trains under bf16
autocast but encodes in fp32.

Reported: each device's stage seconds and whole-process seconds, the ratio CPU / CUDA, both
finals' metrics (with the number of queries), and the agreement of the CUDA final's impacts
encoded on CUDA and on CPU. CI never has a GPU: this runs only where ``torch.cuda`` is there.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sparse_adapt.data import load_queries
from sparse_adapt.retrieval.export import VECTORS_FILE

ROOT = Path(__file__).resolve().parent.parent


def _cli(args: list[str], device: str, threads: int | None) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "sparse_adapt", "--device", device]
    cmd += ["--threads", str(threads)] if threads else []
    start = time.perf_counter()
    done = subprocess.run(cmd + args, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:1])} on {device} failed (rc {done.returncode}):\n{done.stderr[-4000:]}")
    return seconds, done.stdout


def _evaluate(model: Path, files, device: str, threads: int | None) -> dict:
    out = {}
    for name, queries, qrels in (("queries", files.queries, files.qrels),
                                 ("heldout", files.heldout_queries, files.heldout_qrels)):
        if queries is None:
            continue
        seconds, stdout = _cli(["evaluate", "--model", str(model), "--docs", str(files.docs), "--queries",
                                str(queries), "--qrels", str(qrels), "--json"], device, threads)
        out[name] = {"metrics": json.loads(stdout.strip().splitlines()[-1]), "n_queries": len(load_queries(queries)),
                     "seconds": round(seconds, 2)}
    return out


def _impacts(folder: Path) -> dict[str, dict[str, int]]:
    lines = (folder / VECTORS_FILE).read_text(encoding="utf-8").splitlines()
    return {r["id"]: r["vector"] for r in map(json.loads, filter(str.strip, lines))}


def _agreement(a: dict[str, dict[str, int]], b: dict[str, dict[str, int]]) -> dict:
    same = total = 0
    worst = 0
    for doc, va in a.items():
        vb = b[doc]
        for term in set(va) | set(vb):
            total += 1
            diff = abs(va.get(term, 0) - vb.get(term, 0))
            same += diff == 0
            worst = max(worst, diff)
    return {"impacts": total, "identical_share": round(same / max(total, 1), 4), "max_abs_diff": worst}


def _save(result: dict, path: Path | None) -> None:
    # After every step: a run stopped by a time limit keeps what it measured.
    if path is not None:
        path.write_text(json.dumps(result, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cuda", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="offline-splade-tiny")
    parser.add_argument("--domain", default="gatrocraptic")
    parser.add_argument("--threads", type=int,
                        help="CPU threads for every run, the cuda ones too (default: torch's choice)")
    parser.add_argument("--devices", default="cuda,cpu")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    from corpora import get

    files = get(args.domain)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="sparse-adapt-bench-cuda-"))
    result: dict = {"base": args.base, "domain": args.domain, "devices": {}}
    for device in [d.strip() for d in args.devices.split(",") if d.strip()]:
        run = work / device / "run"
        wall, _ = _cli(["train", "--base", args.base, "--corpus", str(files.docs), "--terms", str(files.terms),
                        "--dictionary", str(files.dictionary), "--train", str(files.train), "--out", str(run)],
                       device, args.threads)
        records = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines() if line.strip()]
        stages = {r["stage"]: round(r["seconds"], 2) for r in records if r.get("event") == "stage_end"}
        export_s, _ = _cli(["export", "--model", str(run / "final"), "--docs", str(files.docs), "--out",
                            str(work / device / "vectors")], device, args.threads)
        result["devices"][device] = {"train_wall_seconds": round(wall, 2), "stage_seconds": stages,
                                     "export_seconds": round(export_s, 2)}
        _save(result, args.json)
        result["devices"][device]["evaluate"] = _evaluate(run / "final", files, device, args.threads)
        _save(result, args.json)
    devices = result["devices"]
    if "cuda" in devices and "cpu" in devices:
        result["cpu_over_cuda"] = {
            "train_wall": round(devices["cpu"]["train_wall_seconds"] / devices["cuda"]["train_wall_seconds"], 3),
            **{stage: round(devices["cpu"]["stage_seconds"][stage] / max(seconds, 1e-9), 3)
               for stage, seconds in devices["cuda"]["stage_seconds"].items() if stage in devices["cpu"]["stage_seconds"]},
        }
    if "cuda" in devices:
        cuda_final = work / "cuda" / "run" / "final"
        _cli(["export", "--model", str(cuda_final), "--docs", str(files.docs), "--out", str(work / "cuda" / "vectors-on-cpu")],
             "cpu", args.threads)
        result["cuda_final_on_cpu"] = {
            "evaluate": _evaluate(cuda_final, files, "cpu", args.threads),
            "impacts_cuda_vs_cpu_encoding": _agreement(_impacts(work / "cuda" / "vectors"),
                                                       _impacts(work / "cuda" / "vectors-on-cpu")),
        }
    print(json.dumps(result, indent=2))
    _save(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
