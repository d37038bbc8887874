"""Join registered domains into one corpus directory: a larger corpus holding several domains' terms.

    python -m bench.join --out DIR pharma,hardware,software,...
    sparse-adapt benchmark --domains DIR --pipeline adapt-corpus ...

What a user with a larger corpus than one suite domain brings: the documents of every domain
given in one ``docs.jsonl``, and each domain's queries, qrels and query groups merged, so that
each held-out query is searched among all the joined documents (the other domains' never
relevant). The hand-written ``domain_terms.json`` and ``dictionary.jsonl`` are merged too,
for ``--pipeline adapt``. Document ids and query ids must already be unique across the
domains (the suite's are): a clash is refused rather than renamed, so qrels never silently
point at another domain's document.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _unique(kind: str, key: str, rows: list[tuple[str, str]]) -> None:
    seen: dict[str, str] = {}
    for domain, line in rows:
        value = json.loads(line)[key]
        if value in seen:
            raise SystemExit(f"bench.join: {kind} {key} {value!r} is in both {seen[value]} and {domain}")
        seen[value] = domain


def join(files: list, out: Path) -> dict[str, int]:
    """Write the joined ``corpora.CorpusFiles`` into ``out`` (which must not exist); return counts."""
    out.mkdir(parents=True)
    counts: dict[str, int] = {}
    for name, key in (("docs", "doc_id"), ("queries", "qid"), ("heldout_queries", "qid"), ("train", "qid"),
                      ("dictionary", "term")):
        rows = [(f.name, line) for f in files for line in _lines(getattr(f, name))]
        if key != "term":  # a term's entry is unique within a domain; another domain's may repeat it
            _unique(name, key, rows)
        (out / getattr(files[0], name).name).write_text("".join(line + "\n" for _, line in rows), encoding="utf-8")
        counts[name] = len(rows)
    for name in ("qrels", "heldout_qrels"):
        rows = [line for f in files for line in _lines(getattr(f, name))]
        (out / getattr(files[0], name).name).write_text("".join(line + "\n" for line in rows), encoding="utf-8")
    groups: dict[str, list[str]] = {}
    terms: dict[str, list[str]] = {}
    for f in files:
        for group, qids in json.loads(f.query_groups.read_text(encoding="utf-8")).items():
            groups.setdefault(group, []).extend(qids)
        for category, entries in json.loads(f.terms.read_text(encoding="utf-8")).items():
            terms.setdefault(category, []).extend(e for e in entries if e not in terms.get(category, []))
    (out / files[0].query_groups.name).write_text(json.dumps(groups, indent=1) + "\n", encoding="utf-8")
    (out / files[0].terms.name).write_text(json.dumps(terms, indent=1) + "\n", encoding="utf-8")
    counts["terms"] = sum(len(v) for v in terms.values())
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.join", description=__doc__.split("\n\n")[0])
    parser.add_argument("domains", help="comma-separated registered domains")
    parser.add_argument("--out", type=Path, required=True, help="a directory that does not exist yet")
    args = parser.parse_args(argv)
    if args.out.exists():
        parser.error(f"--out {args.out} exists")
    import corpora

    counts = join([corpora.get(d.strip()) for d in args.domains.split(",") if d.strip()], args.out)
    print(" ".join(f"{k}={v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
