"""What `adapt` generates from the suite's documents, before any model is trained on it.

    python -m bench.generated --out FILE [--domains A,B] [--bases offline-minilm,offline-splade-tiny] [--seeds 0,1]

Per domain and base: the mined terms (kept and every candidate), the dictionary harvested
for them, and the pseudo-queries cropped for each seed; per domain, the dictionary and the
queries of its hand-written terms too. Nothing here loads a model's weights (mining needs the
tokenizer alone; queries and dictionaries need neither) nor a teacher: a minute for the whole
suite. Two dumps compared (``--compare OLD``) say whether a change to mining, harvesting or
query cropping changes any input the suite's measured rows were trained on; when none
changes, those rows stand without a new run (bench/RESULTS.md, "Thirty-second session").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence


def generate(domains: Sequence[str], bases: Sequence[str], seeds: Sequence[int]) -> dict[str, object]:
    """``"<source>/<domain>" -> {"terms", "candidates", "dictionary", "queries": {seed: [...]}}``,
    ``source`` a base (mined terms) or ``hand`` (the domain's own ``domain_terms.json``)."""
    import corpora
    from sparse_adapt.corpus.harvest import build_dictionary
    from sparse_adapt.corpus.mining import mine_with_rest, terms_json
    from sparse_adapt.corpus.pseudo import generate_queries
    from sparse_adapt.corpus.text import locate_terms
    from sparse_adapt.data import load_documents, load_domain_terms
    from sparse_adapt.modeling.builtin import load_tokenizer

    tokenizers = {b: load_tokenizer(b) for b in bases}
    out: dict[str, object] = {}
    for name in domains:
        files = corpora.get(name)
        docs = load_documents(files.docs)
        sources = {"hand": (load_domain_terms(files.terms), None)}
        for base, tok in tokenizers.items():
            kept, scored = mine_with_rest(docs, tok)
            sources[base] = (terms_json(kept), [c.term for c in scored])
        for source, (terms, candidates) in sources.items():
            groups = locate_terms(docs, terms)
            out[f"{source}/{name}"] = {
                "terms": terms, "candidates": candidates,
                "dictionary": build_dictionary(docs, groups),
                "queries": {str(s): [[q.qid, q.kind, q.text] for q in generate_queries(docs, groups, seed=s)]
                            for s in seeds},
            }
    return out


def differences(old: dict, new: dict) -> list[str]:
    """One line per key and part that differs (or exists on one side only)."""
    lines = []
    for key in sorted(set(old) | set(new)):
        if key not in old or key not in new:
            lines.append(f"{key}: only in the {'new' if key in new else 'old'} dump")
            continue
        lines += [f"{key}: {part} differ" for part in ("terms", "candidates", "dictionary", "queries")
                  if old[key].get(part) != new[key].get(part)]
    return lines


def main(argv: list[str] | None = None) -> int:
    import corpora

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--domains", default=None, help="comma-separated (default: the bundled corpus and the suite)")
    parser.add_argument("--bases", default="offline-minilm,offline-splade-tiny")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--compare", type=Path, default=None, help="an earlier dump: print what differs, exit 1 if any")
    args = parser.parse_args(argv)
    domains = args.domains.split(",") if args.domains else ["gatrocraptic", *corpora.SPLITS["dev"], *corpora.SPLITS["test"]]
    dump = generate(domains, args.bases.split(","), [int(s) for s in args.seeds.split(",")])
    args.out.write_text(json.dumps(dump, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({len(dump)} domain x source entries)")
    if args.compare is None:
        return 0
    lines = differences(json.loads(args.compare.read_text(encoding="utf-8")), dump)
    print("\n".join(lines) if lines else f"nothing differs from {args.compare}")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
