"""bench.compare: pooling two bench.byoc result files query by query (hand-worked values)."""

from __future__ import annotations

import json

import pytest

from bench.byoc import GROUPS, row_key
from bench.compare import _rows, compare


def _row(domain: str, seed: int, values: dict[str, float]) -> dict:
    # per_query is [base model, adapted]; only the adapted value is compared.
    return {"domain": domain, "base": "b", "inputs": "corpus", "seed": seed,
            "groups": {g: {"per_query": {q: [0.0, v] for q, v in values.items()}} for g in GROUPS}}


def _keyed(*rows: dict) -> dict:
    return {row_key(r): r for r in rows}


def test_pools_matched_rows_and_gives_the_exact_p_by_hand():
    default = _keyed(_row("a", 0, {"q1": 0.5, "q2": 0.5}), _row("a", 1, {"q1": 0.2, "q2": 0.4}), _row("c", 0, {"q1": 0.1}))
    variant = _keyed(_row("a", 0, {"q1": 1.0, "q2": 0.5}), _row("a", 1, {"q1": 0.6, "q2": 0.4}), _row("z", 0, {"q1": 0.9}))
    out = compare(default, variant)["heldout-domain-semantic"]
    # Only the two rows of domain a match. The query is the unit, its seeds averaged:
    # q1 0.35 -> 0.8 (+0.45), q2 0.45 -> 0.45 (0) -> mean change 0.225.
    assert out["queries"] == 2 and (out["wins"], out["losses"]) == (1, 0)
    assert out["change"] == pytest.approx(0.225)
    assert out["default"] == pytest.approx(0.4) and out["variant"] == pytest.approx(0.625)
    # One query changed: both its sign flips are as extreme.
    assert out["p_value"] == 1.0
    assert out["per_domain"] == {"a": [pytest.approx(0.4), pytest.approx(0.625)]}


def test_identical_files_give_no_change_and_p_one():
    rows = _keyed(_row("a", 0, {"q1": 0.3, "q2": 0.7}))
    out = compare(rows, rows)["heldout-control"]
    assert (out["change"], out["wins"], out["losses"], out["p_value"]) == (0.0, 0, 0, 1.0)


def test_refuses_rows_scored_on_different_queries_and_files_without_a_shared_row():
    with pytest.raises(ValueError, match="different queries"):
        compare(_keyed(_row("a", 0, {"q1": 0.3})), _keyed(_row("a", 0, {"q9": 0.3})))
    with pytest.raises(ValueError, match="share no"):
        compare(_keyed(_row("a", 0, {"q1": 0.3})), _keyed(_row("a", 1, {"q1": 0.3})))


def test_rows_without_per_query_values_are_refused_by_name(tmp_path):
    old = _row("pharma", 0, {"q1": 0.3})
    del old["groups"]["heldout-control"]["per_query"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps([old]))
    with pytest.raises(ValueError, match="pharma/b/corpus/seed 0 has no per-query values"):
        _rows(path, None, None, None)


def _benchmark(adapted: dict[int, float]) -> dict:
    """A benchmark JSON of one domain and one query per group: the base scores 0.5."""
    def groups(v: float) -> dict:
        return {g: {"queries": 1, "ndcg@10": v, "per_query": {"h1": v}} for g in GROUPS}

    results = [{"domain": "joined", "split": "outside", "seed": None, "variant": "base", "groups": groups(0.5)}]
    results += [{"domain": "joined", "split": "outside", "seed": s, "variant": "full", "groups": groups(v)}
                for s, v in adapted.items()]
    results.append({"domain": "joined", "split": "outside", "seed": 0, "variant": "no-kd", "groups": groups(0.0)})
    return {"schema": "x", "inputs": {"base": "b", "pipeline": "adapt-corpus"}, "results": results}


def test_benchmark_files_compare_their_adapted_runs_seed_by_seed(tmp_path):
    paths = []
    for name, adapted in (("default", {0: 0.6, 1: 0.7}), ("variant", {0: 0.9, 1: 0.7})):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(_benchmark(adapted)))
    default, variant = (_rows(p, None, None, None) for p in paths)
    assert set(default) == {("joined", "b", "adapt-corpus", 0), ("joined", "b", "adapt-corpus", 1)}  # no ablation row
    assert default[("joined", "b", "adapt-corpus", 0)]["groups"]["heldout-control"]["per_query"] == {"h1": [0.5, 0.6]}
    out = compare(default, variant)["heldout-domain-semantic"]
    # one query, its seeds averaged: 0.65 -> 0.8; one pair: both sign flips are as extreme
    assert (out["queries"], out["wins"], out["losses"], out["p_value"]) == (1, 1, 0, 1.0)
    assert out["change"] == pytest.approx(0.15)
