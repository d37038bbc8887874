"""Cross-term leakage: how much of a text's weight lands on *other* domain terms' tokens.

    python -m bench.leak DOMAIN MODEL_DIR [MODEL_DIR ...]

A domain term names one thing, so a query naming (or describing) one term should weigh that
term's token, not the others': each other term's token it weighs adds score to the documents
about that other term. Per held-out domain group (``heldout-domain-semantic``,
``heldout-domain-explicit``) it reports the mean over queries of the summed weight on the
domain tokens that occur in the query's relevant documents (``right``) and on every other
domain token (``other``); per document kind (naming a domain term or not), the summed weight on
the domain tokens its own text contains and on the others (document expansion). Used in
bench/RESULTS.md (the dev counterparts of the test domains) to find where the leak
comes from (each stage's checkpoint in ``DIR/training/<stage>`` is a model directory).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

import numpy as np
import scipy.sparse as sp
import torch

GROUPS = ("heldout-domain-semantic", "heldout-domain-explicit")


def weight_split(vectors: sp.csr_matrix, right: Sequence[set[int]], domain_ids: Sequence[int]) -> dict[str, float]:
    """Mean over rows of the summed weight on ``right[i]`` and on the other ``domain_ids``.

    vectors: (n, V); ``right[i]`` a subset of ``domain_ids`` for row i.
    """
    if vectors.shape[0] != len(right):
        raise ValueError(f"{vectors.shape[0]} vectors but {len(right)} sets of right tokens")
    if not len(right):
        return {"rows": 0, "right": 0.0, "other": 0.0}
    ids = list(domain_ids)
    dense = vectors[:, ids].toarray()  # (n, |D|)
    column = {t: j for j, t in enumerate(ids)}
    mask = np.zeros_like(dense, dtype=bool)
    for i, tokens in enumerate(right):
        mask[i, [column[t] for t in tokens]] = True
    return {
        "rows": len(right),
        "right": round(float((dense * mask).sum(1).mean()), 4),
        "other": round(float((dense * ~mask).sum(1).mean()), 4),
    }


def term_leak(splade, files) -> dict[str, dict]:
    """``{group or document kind: weight_split(...)}`` for one model on one domain's files."""
    from sparse_adapt.report.domains import EvalSet

    ev = EvalSet.load(files)
    domain = set(splade.domain_token_ids)

    # doc_id -> the domain tokens its text contains (each document tokenized once)
    own = {d.doc_id: set(splade.tokenizer(d.text, add_special_tokens=False)["input_ids"]) & domain for d in ev.documents}

    out = {}
    queries = {q.qid: q.text for q in ev.queries}
    for group in GROUPS:
        qids = [q for q in ev.groups.get(group, []) if q in ev.qrels]
        right = [set().union(*[own[d] for d, g in ev.qrels[q].items() if g > 0 and d in own]) for q in qids]
        out[group] = weight_split(splade.encode_query([queries[q] for q in qids]), right, sorted(domain))
    docs = [(d.text, own[d.doc_id]) for d in ev.documents]
    for kind, chosen in (("documents naming a term", [d for d in docs if d[1]]), ("other documents", [d for d in docs if not d[1]])):
        vectors = splade.encode_document([t for t, _ in chosen]) if chosen else sp.csr_matrix((0, 1))
        out[kind] = weight_split(vectors, [r for _, r in chosen], sorted(domain))
    return out


def main(argv: list[str] | None = None) -> int:
    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.report.domains import resolve_domain

    parser = argparse.ArgumentParser(prog="python -m bench.leak", description=__doc__.split("\n\n")[0])
    parser.add_argument("domain")
    parser.add_argument("models", nargs="+")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    files = resolve_domain(args.domain).files
    print(json.dumps({m: term_leak(SpladeEncoder.from_pretrained(m), files) for m in args.models}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
