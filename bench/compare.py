"""Compare two ``bench.byoc`` result files (a default and a variant) query by query; a
``sparse-adapt benchmark`` JSON (``benchmark-adapt-corpus.json``...) is read too.

    python -m bench.compare default.json variant.json [--domains pharma,hardware,software] [--base offline-minilm] [--inputs corpus]

Rows are matched on (domain, base, inputs, seed); for each held-out group every query of the
matched rows is one pair, its nDCG@10 the mean over its matched seeds (the query is the unit:
counting a query of two seeds twice, as this did before 2026-11-26, gave p-values up to 10x too
small), and the change is tested with ``sparse_adapt.report.paired.paired_test`` (a paired
permutation test: exact up to 16 queries that changed, 100,000 seeded Monte Carlo draws beyond). Per domain it
prints the mean of each group over the matched seeds. Decide with a rule written down before
the variant runs; this tool only reports.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from bench.byoc import GROUPS, row_key
from sparse_adapt.report.paired import paired_test

# byoc.json rounds values to 6 decimals, so smaller differences are rounding, counted as ties.
TIE = 1e-5


def benchmark_rows(report: dict) -> list[dict]:
    """A ``sparse-adapt benchmark`` JSON's adapted runs as ``bench.byoc`` rows: ``inputs`` is the
    pipeline and each query's ``per_query`` value is ``[base model, adapted]``."""
    base = {r["domain"]: r["groups"] for r in report["results"] if r["variant"] == "base"}
    rows = []
    for r in report["results"]:
        if r["variant"] != "full":
            continue  # ablation rows are not the adapted model
        groups = {g: {"per_query": {q: [base[r["domain"]][g]["per_query"][q], v]
                                    for q, v in r["groups"][g]["per_query"].items()}} for g in GROUPS}
        rows.append({"domain": r["domain"], "base": report["inputs"]["base"], "inputs": report["inputs"]["pipeline"],
                     "seed": r["seed"], "groups": groups})
    return rows


def _rows(path: Path, domains: set[str] | None, base: str | None, inputs: str | None) -> dict[tuple, dict]:
    out = {}
    data = json.loads(path.read_text(encoding="utf-8"))
    for r in benchmark_rows(data) if isinstance(data, dict) else data:
        if (domains and r["domain"] not in domains) or (base and r["base"] != base) or (inputs and r["inputs"] != inputs):
            continue
        if any("per_query" not in r["groups"][g] for g in GROUPS):
            raise ValueError(f"{path}: row {r['domain']}/{r['base']}/{r['inputs']}/seed {r.get('seed', 0)} has no per-query values (rerun bench.byoc)")
        out[row_key(r)] = r
    return out


def compare(default: dict[tuple, dict], variant: dict[tuple, dict]) -> dict:
    """``{group: {queries, default, variant, change, wins, losses, p_value, per_domain}}`` over the
    rows both dicts (keyed by (domain, base, inputs, seed)) hold; a row's ``per_query`` values are
    ``[base model, adapted]`` and the adapted one is compared."""
    keys = sorted(set(default) & set(variant))
    if not keys:
        raise ValueError("the two files share no (domain, base, inputs, seed) row")
    out = {}
    for g in GROUPS:
        seeds: dict[tuple, tuple[list[float], list[float]]] = {}  # (domain, base, inputs, qid) -> per seed
        per_domain = {}
        for k in keys:
            d, v = default[k]["groups"][g]["per_query"], variant[k]["groups"][g]["per_query"]
            if sorted(d) != sorted(v):
                raise ValueError(f"{'/'.join(map(str, k))} {g}: the two rows were scored on different queries")
            row_b, row_a = [d[q][1] for q in sorted(d)], [v[q][1] for q in sorted(d)]
            for q, x_b, x_a in zip(sorted(d), row_b, row_a):
                pair = seeds.setdefault((*k[:3], q), ([], []))
                pair[0].append(x_b)
                pair[1].append(x_a)
            means = per_domain.setdefault(k[0], ([], []))
            means[0].append(float(np.mean(row_b)))
            means[1].append(float(np.mean(row_a)))
        x = np.array([np.mean(p[1]) for p in seeds.values()])
        y = np.array([np.mean(p[0]) for p in seeds.values()])
        test = paired_test(x, y, TIE)
        out[g] = {
            "queries": len(x), "default": round(float(y.mean()), 6), "variant": round(float(x.mean()), 6),
            "change": round(float((x - y).mean()), 6), "wins": test["wins"], "losses": test["losses"],
            "p_value": test["p_value"],
            "per_domain": {dom: [round(float(np.mean(m[0])), 6), round(float(np.mean(m[1])), 6)] for dom, m in per_domain.items()},
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("default", type=Path)
    ap.add_argument("variant", type=Path)
    ap.add_argument("--domains", default=None, help="comma-separated; default: every domain both files hold")
    ap.add_argument("--base", default=None)
    ap.add_argument("--inputs", default=None)
    args = ap.parse_args()
    domains = set(args.domains.split(",")) if args.domains else None
    result = compare(_rows(args.default, domains, args.base, args.inputs), _rows(args.variant, domains, args.base, args.inputs))
    for g, r in result.items():
        doms = ", ".join(f"{d} {m[0]:.3f} -> {m[1]:.3f}" for d, m in r["per_domain"].items())
        print(f"{g}: {r['default']:.3f} -> {r['variant']:.3f} ({r['change']:+.3f}; {r['queries']} queries (seed means), "
              f"{r['wins']} up, {r['losses']} down, p = {r['p_value']:.3f}) | {doms}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
