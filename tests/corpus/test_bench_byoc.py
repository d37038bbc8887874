"""bench.byoc's scoring of a suite domain's held-out groups (the training it drives is run_adapt,
tested in test_adapt.py)."""

from __future__ import annotations

import pytest

import corpora
from bench.byoc import GROUPS, group_mean, heldout_per_query, paired_change


def test_heldout_groups_are_scored_with_their_query_counts(tiny_bert):
    scores = heldout_per_query(tiny_bert, corpora.get("pharma"))
    assert set(scores) == set(GROUPS)
    assert [len(v) for v in scores.values()] == [7, 7, 7]
    assert all(0.0 <= x <= 1.0 for v in scores.values() for x in v.values())


def test_group_means_equal_the_benchmark_suites(tiny_bert):
    from sparse_adapt.report.benchmark_md import METRIC
    from sparse_adapt.report.domains import EvalSet

    files = corpora.get("pharma")
    per_query = heldout_per_query(tiny_bert, files)
    suite = EvalSet.load(files).scores(tiny_bert)
    for g in GROUPS:
        assert (group_mean(per_query[g]), len(per_query[g])) == (pytest.approx(suite[g][METRIC], abs=1e-6), suite[g]["queries"])


def test_max_active_dims_scores_the_cut_documents(tiny_bert, monkeypatch):
    import bench.byoc as byoc

    seen = []
    real = byoc.score_in_memory
    monkeypatch.setattr(byoc, "score_in_memory", lambda *a, **k: seen.append(k.get("max_active_dims")) or real(*a, **k))
    cut = heldout_per_query(tiny_bert, corpora.get("pharma"), max_active_dims=2)
    full = heldout_per_query(tiny_bert, corpora.get("pharma"))
    assert seen == [2, None]
    assert cut != full  # two terms per document rank this random model's documents differently


def test_feedback_scores_with_rocchio_queries(tiny_bert, monkeypatch):
    import bench.byoc as byoc
    from sparse_adapt.retrieval.feedback import Feedback

    runs = []
    real = byoc.score_in_memory

    def spy(*a, **k):
        runs.append((k.get("feedback"), real(*a, **k)))
        return runs[-1][1]

    monkeypatch.setattr(byoc, "score_in_memory", spy)
    strong = Feedback(docs=3, weight=20.0, terms=4)  # a random model's vectors are dense: push hard
    heldout_per_query(tiny_bert, corpora.get("pharma"), feedback=strong)
    heldout_per_query(tiny_bert, corpora.get("pharma"))
    (fb, fed), (none, plain) = runs
    assert (fb, none) == (strong, None)
    top = lambda run: {q: sorted(s, key=lambda d: (-s[d], d))[:10] for q, s in run.items()}  # noqa: E731
    assert top(fed) != top(plain)  # the fed-back documents' terms rerank this random model's documents


def test_pool_adds_every_other_domain_with_prefixed_ids(tiny_bert, monkeypatch):
    import bench.byoc as byoc
    from sparse_adapt.data import load_documents

    pool = byoc.pool_documents("pharma")
    others = [n for n in corpora.names() if n != "pharma"]
    assert len(pool) == sum(len(load_documents(corpora.get(n).docs)) for n in others)
    assert {d.doc_id.split("/")[0] for d in pool} == set(others)
    own = {d.doc_id for d in load_documents(corpora.get("pharma").docs)}
    assert not own & {d.doc_id for d in pool}
    searched = []
    real = byoc.score_in_memory
    monkeypatch.setattr(byoc, "score_in_memory", lambda m, docs, *a, **k: searched.append(len(docs)) or real(m, docs, *a, **k))
    pooled = heldout_per_query(tiny_bert, corpora.get("pharma"), extra_documents=pool)
    alone = heldout_per_query(tiny_bert, corpora.get("pharma"))
    assert searched == [len(own) + len(pool), len(own)]
    # more non-relevant documents can only push relevant ones down: no query gains
    assert all(pooled[g][q] <= alone[g][q] + 1e-9 for g in GROUPS for q in alone[g])
    assert pooled != alone


def test_paired_change_counts_and_exact_p_value_by_hand():
    # Three queries all gaining 0.5: of the 2^3 sign flips only "all +" and "all -" reach
    # |mean| >= 0.5, so the two-sided p is 2/8.
    out = paired_change({"a": 0.5, "b": 0.5, "c": 0.5}, {"a": 1.0, "b": 1.0, "c": 1.0})
    assert (out["change"], out["wins"], out["ties"], out["losses"]) == (0.5, 3, 0, 0)
    assert out["p_value"] == 0.25
    assert out["per_query"]["b"] == [0.5, 1.0]
    # Seven queries all gaining: 2/128; one rank move among seven (one win, six ties): every
    # flip of the one difference reaches it, p = 1.
    seven = {str(i): 0.2 for i in range(7)}
    assert paired_change(seven, {k: 0.9 for k in seven})["p_value"] == round(2 / 128, 6)
    one = paired_change(seven, {**seven, "3": 0.5})
    assert (one["wins"], one["ties"], one["losses"], one["p_value"]) == (1, 6, 0, 1.0)
    # A gain and a loss of the same size: mean change 0.
    mixed = paired_change({"a": 0.4, "b": 0.6}, {"a": 0.6, "b": 0.4})
    assert (mixed["change"], mixed["wins"], mixed["losses"], mixed["p_value"]) == (0.0, 1, 1, 1.0)


def test_paired_change_refuses_different_queries():
    with pytest.raises(ValueError, match="different queries"):
        paired_change({"a": 0.1}, {"b": 0.2})


def test_a_variant_config_reaches_adapt(monkeypatch, tmp_path):
    import sparse_adapt.corpus.adapt as adapt
    from bench.byoc import run_one

    seen = {}

    class Stop(Exception):
        pass

    def fake(corpus, out, base, **kw):
        seen.update(kw, out=out, base=base)
        raise Stop

    monkeypatch.setattr(adapt, "run_adapt", fake)
    cfg = tmp_path / "variant.toml"
    with pytest.raises(Stop):
        run_one("pharma", "offline-minilm", "corpus", tmp_path / "w", seed=1, config=cfg)
    assert seen["config"] == cfg and seen["seed"] == 1 and seen["glosses"] is False
    assert seen["out"] == tmp_path / "w" / "pharma" / "offline-minilm" / "corpus" / "seed1"
    with pytest.raises(Stop):
        run_one("pharma", "offline-minilm", "corpus", tmp_path / "w", glosses=True)
    assert seen["glosses"] is True
    assert "negatives" not in seen  # make-train's own defaults unless a variant names them
    with pytest.raises(Stop):
        run_one("pharma", "offline-minilm", "corpus", tmp_path / "w", make_train={"negatives": 3})
    assert seen["negatives"] == 3 and "siblings" not in seen
    assert seen["pretrain"] is None and seen["base"] == "offline-minilm"  # adapt decides (pretrains offline-minilm)
    with pytest.raises(Stop):
        run_one("pharma", "offline-minilm", "corpus", tmp_path / "w", pretrain=False)
    assert seen["pretrain"] is False
    # a pretrained base made once is trained from, not pretrained again; the run stays under the base's name
    with pytest.raises(Stop):
        run_one("pharma", "offline-minilm", "corpus", tmp_path / "w", pretrained=tmp_path / "pre")
    assert (seen["base"], seen["pretrain"]) == (str(tmp_path / "pre"), False)
    assert seen["out"] == tmp_path / "w" / "pharma" / "offline-minilm" / "corpus" / "seed0"


def test_a_domain_without_a_scored_group_is_refused_before_any_training(monkeypatch, tmp_path, capsys):
    # gatrocraptic has no heldout-domain-explicit: the row's scoring raised KeyError after the training
    import sys

    import bench.byoc as byoc

    def trained(*args, **kwargs):
        raise AssertionError("trained before the domain's groups were checked")

    monkeypatch.setattr(byoc, "run_one", trained)
    monkeypatch.setattr(sys, "argv", ["byoc", "--domains", "gatrocraptic", "--workdir", str(tmp_path / "w")])
    with pytest.raises(SystemExit) as stopped:
        byoc.main()
    err = capsys.readouterr().err.strip().splitlines()
    assert stopped.value.code == 2
    assert "gatrocraptic: its query_groups.json has no heldout-domain-explicit group" in err[-1]
    assert not (tmp_path / "w").exists()
