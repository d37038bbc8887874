"""The benchmark's pooled test: per split and held-out group, every query of its domains
(each its seeds' mean) against the base, by a paired permutation test (``paired.py``), and the
lines and table that show it."""

from __future__ import annotations

from statistics import mean
from typing import Sequence

from sparse_adapt.progress import signed
from sparse_adapt.report.paired import paired_test

# The groups the quality bar reads (held-out queries, never trained on).
HELDOUT = ("heldout-domain-semantic", "heldout-domain-explicit", "heldout-control")
SHORT = {"heldout-domain-semantic": "semantic", "heldout-domain-explicit": "explicit", "heldout-control": "control"}


def measured(results: list[dict], seeds: Sequence[int]):
    """Per domain that has a base row, in order: ``(name, rows, base, full)``, ``full`` the
    adapted (variant ``full``) rows of ``seeds``, possibly empty."""
    for name in dict.fromkeys(r["domain"] for r in results):
        rows = [r for r in results if r["domain"] == name]
        base = next((r for r in rows if r["variant"] == "base"), None)
        if base is not None:
            yield name, rows, base, [r for r in rows if r["variant"] == "full" and r["seed"] in seeds]


def pooled(results: list[dict], seeds: Sequence[int]) -> list[dict]:
    """Per split and held-out group, every query of its domains, each with its adapted nDCG
    averaged over the seeds: ``{split, group, queries, seeds, base, adapted}`` means and the
    paired permutation test (``paired.py``: wins, ties, losses, p_value) over those queries.

    The query is the unit: its seeds share one base value and one text, so testing each
    query-seed pair as independent (as this did before 2026-11-26) doubled n and gave p-values
    up to 10x too small. Empty for results without per-query values (schema /1, older /2
    files). The benchmark stores it as ``pooled``: the test takes seconds on a hundred
    queries, so the tables and the CLI read it instead of testing again."""
    per_query: dict[tuple[str, str], dict[tuple[str, str], tuple[float, list[float]]]] = {}
    for name, _, base, full in measured(results, seeds):
        if {r["seed"] for r in full} != set(seeds):  # a domain measured on fewer seeds (an ablation's)
            continue
        for g in (g for g in HELDOUT if g in base["groups"]):
            before = base["groups"][g].get("per_query")
            for r in full:
                after = r["groups"].get(g, {}).get("per_query")
                if before is None or after is None:
                    return []
                group = per_query.setdefault((base["split"], g), {})
                for q in after:
                    group.setdefault((name, q), (before[q], []))[1].append(after[q])
    out = []
    for (split, g), queries in per_query.items():
        b = [v[0] for v in queries.values()]
        a = [mean(v[1]) for v in queries.values()]
        out.append({"split": split, "group": g, "queries": len(a), "seeds": len(seeds), "base": mean(b),
                    "adapted": mean(a), **paired_test(a, b)})
    return out


def stored_pooled(report: dict) -> list[dict] | None:
    """The benchmark file's own pooled test when it is per query; None for a file written when
    it tested query-seed pairs (``pairs``), which is tested again."""
    stored = report.get("pooled")
    if stored is None or any("queries" not in p for p in stored):
        return None
    return stored


def pooled_line(p: dict) -> str:
    """One :func:`pooled` entry as a line of text."""
    return (f"{p['split']} {SHORT[p['group']]}: {p['base']:.3f} -> {p['adapted']:.3f} "
            f"({signed(p['adapted'] - p['base'])}, n={p['queries']} queries, mean of {p['seeds']} seeds, "
            f"p {'' if p['p_value'] < 0.001 else '= '}{_p(p['p_value'])})")


def pooled_table(summaries: list[dict]) -> list[str]:
    """:func:`pooled`'s entries as a table; empty without any."""
    if not summaries:
        return []
    lines = ["| split | group | queries (seed means) | base | adapted | change | wins / ties / losses | p |",
             "|---|---|---|---|---|---|---|---|"]
    for p in summaries:
        lines.append(f"| {p['split']} | {SHORT[p['group']]} | {p['queries']} | {p['base']:.3f} | {p['adapted']:.3f} | "
                     f"{signed(p['adapted'] - p['base'])} | {p['wins']} / {p['ties']} / {p['losses']} | "
                     f"{_p(p['p_value'])} |")
    return lines


def _p(p: float) -> str:
    """Three decimals, or as many more as keep it on its side of 0.05 (0.0496, 0.04996)."""
    if p < 0.001:
        return "<0.001"
    for digits in range(3, 8):
        shown = f"{p:.{digits}f}"
        if (float(shown) < 0.05) == (p < 0.05):
            return shown
    return f"{p:.8f}"
