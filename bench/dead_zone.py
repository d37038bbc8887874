"""Query expansion's dead zone: (training query, target domain token) pairs whose max logit is <= 0.

    python -m bench.dead_zone RUN_DIR

``RUN_DIR`` is an ``adapt`` output (its ``train.jsonl``, ``domain_terms.json`` and
``training/<stage>`` models). For every training query and every domain token that occurs in
one of its positives (teacher > 0), the token's max logit over the query's positions is read
with the model distill started from (``dictionary``) and the one it ended with (``distill``):
QExp gives no gradient to a pair whose logit is <= 0 (``sparse_adapt/losses/query_expansion.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from sparse_adapt.data import flat_terms
from sparse_adapt.modeling.encoder import SpladeEncoder

STAGES = ("dictionary", "distill")


def dead_pairs(run: Path, stage: str) -> dict:
    enc = SpladeEncoder.from_pretrained(run / "training" / stage, device="cpu")
    tok = enc.tokenizer
    terms = flat_terms(json.loads((run / "domain_terms.json").read_text(encoding="utf-8")))
    pieces = {t: tok.tokenize(t) for t in terms}
    ids = {t: tok.convert_tokens_to_ids(p)[0] for t, p in pieces.items() if len(p) == 1}
    rows = [json.loads(line) for line in (run / "train.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    dead, weights = 0, []
    for r in rows:
        positives = " ".join(t for t, s in zip(r["doc_texts"], r["teacher_scores"]) if s > 0)
        present = set(tok(positives)["input_ids"])
        targets = [i for i in ids.values() if i in present]
        if not targets:
            continue
        x = enc.tokenize([r["query"]], "query")
        with torch.no_grad():
            logits = enc.max_logits(x["input_ids"], x["attention_mask"])[0]  # (V,)
        for i in targets:
            dead += bool(logits[i] <= 0)
            weights.append(float(torch.log1p(torch.relu(logits[i]))))
    return {"stage": stage, "pairs": len(weights), "dead": dead,
            "mean_weight": round(sum(weights) / max(len(weights), 1), 3), "single_token_terms": len(ids)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dead_zone", description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    args = parser.parse_args(argv)
    for stage in STAGES:
        print(json.dumps(dead_pairs(args.run, stage)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
