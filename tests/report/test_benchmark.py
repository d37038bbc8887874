"""``sparse-adapt benchmark``: domains x seeds base vs adapted, the ablation of the seven
terms, and the tables and bar computed from constructed results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import corpora

from sparse_adapt.cli import main
from sparse_adapt.corpus.pseudo import DEFAULT_MAX_QUERIES
from sparse_adapt.errors import ConfigError, SparseAdaptError
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.report.benchmark import BenchmarkInputs, without
from sparse_adapt.report.domains import EvalSet, pool_documents, resolve_domain
from sparse_adapt.retrieval.feedback import Feedback
from sparse_adapt.report.benchmark_md import (
    CORPUS_BAR, ablation_table, bar_status, domain_table, load_benchmark,
)
from sparse_adapt.report.pooled import pooled, pooled_line, pooled_table
from sparse_adapt.training.config import TrainConfig
from tests.corpus.test_adapt import setup  # noqa: F401 (fixture: tiny base, tiny cross-encoder, one-epoch config)
from tests.report.test_report import tiny_base
from tests.training.test_stages import DICTIONARY, DOCS, TERMS_JSON, TRAIN, _jsonl

HELDOUT = [{"qid": "h1", "text": "tracking what departments spend"}, {"qid": "h2", "text": "Zorblatt review"},
           {"qid": "h3", "text": "installing an agent"}]
GROUPS = {"control": ["q2"], "domain-semantic": ["q1"], "heldout-domain-semantic": ["h1"],
          "heldout-domain-explicit": ["h2"], "heldout-control": ["h3"]}
# kd, sp, ctr and qexp off: the ablation then reruns only ret, dom and pres (fewer runs, same logic).
ONE_EPOCH = {"warmup": {"epochs": 1, "batch_size": 2}, "dictionary": {"epochs": 1, "batch_size": 2},
             "distill": {"epochs": 1, "batch_size": 2, "pres": 1.0, "kd": 0.0, "sp": 0.0, "ctr": 0.0, "qexp": 0.0}}
ABLATED = ("ret", "dom", "pres")


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory) -> Path:
    return tiny_base(tmp_path_factory.mktemp("bench") / "base")


def write_domain(root: Path) -> Path:
    write_judged(root, DOCS, [{"qid": t["qid"], "text": t["query"]} for t in TRAIN], HELDOUT,
                 "q1 0 d1 2\nq1 0 d3 2\nq2 0 d2 2\n", "h1 0 d1 2\nh2 0 d3 2\nh3 0 d2 2\n")
    _jsonl(root / "train.jsonl", TRAIN)
    _jsonl(root / "dictionary.jsonl", DICTIONARY)
    (root / "domain_terms.json").write_text(json.dumps(TERMS_JSON))
    return root


def write_judged(root: Path, docs: list[dict], queries: list[dict], heldout: list[dict], qrels: str,
                 heldout_qrels: str) -> None:
    """What every benchmark domain has: documents, queries in GROUPS, their judgements."""
    root.mkdir(parents=True)
    _jsonl(root / "docs.jsonl", docs)
    _jsonl(root / "queries.jsonl", queries)
    _jsonl(root / "heldout_queries.jsonl", heldout)
    (root / "query_groups.json").write_text(json.dumps(GROUPS))
    (root / "qrels.tsv").write_text(qrels)
    (root / "heldout_qrels.tsv").write_text(heldout_qrels)


def test_benchmark_trains_each_seed_ablates_each_term_and_writes_tables(base_dir, tmp_path, capsys):
    domain = write_domain(tmp_path / "mini")
    config = tmp_path / "c.json"
    config.write_text(json.dumps(ONE_EPOCH))
    out = tmp_path / "bench"
    code = main(["benchmark", "--out", str(out), "--domains", str(domain), "--seeds", "0,1", "--base", str(base_dir),
                 "--config", str(config), "--ablation", str(domain), "--ablation-seeds", "0"])
    assert code == 0, capsys.readouterr().err
    report = json.loads((out / "benchmark.json").read_text())
    # the markdown names what the --config changed (the runs' batch sizes, epochs and weights), not the defaults
    from sparse_adapt.training.config import TrainConfig

    defaults = TrainConfig().to_dict()
    expected = {f"{s}.{k}": v for s, values in ONE_EPOCH.items() for k, v in values.items() if defaults[s][k] != v}
    assert report["inputs"]["overrides"] == expected and "distill.epochs" in expected
    said = " ".join((out / "benchmark.md").read_text().split())
    assert "Training config: the defaults (with the settings recommended for the base) except `warmup.epochs = 1`" \
        in said
    # the pooled test is of the benchmark's seeds, not the ablation's
    assert report["pooled"] == pooled(report["results"], [0, 1])
    variants = [(r["seed"], r["variant"]) for r in report["results"]]
    assert variants == [(None, "base"), (0, "full"), (1, "full"), *((0, f"no-{t}") for t in ABLATED)]
    for t in ABLATED:
        run = json.loads((out / "ablation" / "mini" / "seed0" / f"no-{t}" / "run.json").read_text())
        assert run["config"]["distill"][t] == 0.0 and run["stages"] == ["distill"]
        assert run["reference"] == str(base_dir)
        assert run["base"] == str(out / "prefix" / "mini" / "seed0" / "dictionary")  # shared MLM prefix
    assert all(r["split"] == "outside" for r in report["results"])
    md = (out / "benchmark.md").read_text()
    assert "| mini | outside | heldout-domain-semantic | 1 |" in md
    assert "| no-pres |" in md and "## Ablation" in md and "| no-kd | (weight 0 in this config)" in md
    assert "with one weight set to 0 (seeds 0; mean over seeds)" in md
    # a rerun resumes every finished run instead of training again
    code = main(["benchmark", "--out", str(out), "--domains", str(domain), "--seeds", "0", "--base", str(base_dir),
                 "--config", str(config)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "resuming: extend, warmup, dictionary already complete" in printed
    assert "resuming: distill already complete" in printed
    # --feedback re-scores the finished runs into their own files and leaves the plain ones alone
    plain = (out / "benchmark.json").read_bytes()
    code = main(["benchmark", "--out", str(out), "--domains", str(domain), "--seeds", "0", "--base", str(base_dir),
                 "--config", str(config), "--feedback", "--feedback-docs", "2", "--feedback-weight", "4"])
    assert code == 0, capsys.readouterr().err
    assert "resuming: distill already complete" in capsys.readouterr().out
    assert (out / "benchmark.json").read_bytes() == plain
    fed = json.loads((out / "benchmark-feedback.json").read_text())
    assert fed["inputs"]["feedback"] == {"docs": 2, "weight": 4.0, "terms": 32}
    assert "Rocchio pseudo-relevance feedback: 2 document(s) fed back at weight 4" in (out / "benchmark-feedback.md").read_text()
    evalset = EvalSet.load(resolve_domain(str(domain)).files)
    feedback = Feedback(docs=2, weight=4.0)
    for r in fed["results"]:
        want = evalset.scores(SpladeEncoder.from_pretrained(r["model"]), feedback)
        assert r["groups"] == want
    assert [r["groups"] for r in fed["results"]] != [r["groups"] for r in json.loads(plain)["results"][:2]]


def test_pipeline_adapt_runs_adapt_on_the_hand_written_inputs_pretraining_once(base_dir, tmp_path, capsys, monkeypatch):
    import hashlib

    import sparse_adapt.corpus.adapt as adapt_module
    import sparse_adapt.modeling.builtin as builtin

    domain = write_domain(tmp_path / "mini")
    config = tmp_path / "c.json"
    # validation on, so each run's selection record is there to be read from DIR/training's log
    config.write_text(json.dumps({**ONE_EPOCH, "distill": {**ONE_EPOCH["distill"], "valid_fraction": 0.5}}))
    out = tmp_path / "bench"
    # Stand in for offline-minilm's 25-minute pretraining: the base "needs" it, and the spy
    # returns a copy of the tiny base, so the test sees where and how often it is made, and
    # that the runs train from it rather than from --base.
    import shutil

    made = []
    pretrained = shutil.copytree(base_dir, tmp_path / "pretrained-base")

    def pretrained_base(base, where, hooks=None):
        made.append((base, where))
        return str(pretrained)

    monkeypatch.setattr(builtin, "needs_pretraining", lambda name: True)
    monkeypatch.setattr(adapt_module, "pretrained_base", pretrained_base)
    code = main(["benchmark", "--out", str(out), "--domains", str(domain), "--seeds", "0,1", "--base", str(base_dir),
                 "--config", str(config), "--pipeline", "adapt"])
    assert code == 0, capsys.readouterr().err
    assert made == [(str(base_dir), out / "pretrained")]  # once for both seeds
    assert not (out / "benchmark.json").exists() and not (out / "runs").exists()
    report = json.loads((out / "benchmark-adapt.json").read_text())
    assert report["schema"] == "sparse-adapt.benchmark/2"
    assert report["inputs"]["pipeline"] == "adapt" and report["inputs"]["start"] == str(pretrained)
    assert report["inputs"]["config"]["distill"]["interpolate"] == 0.5  # adapt's own setting
    evalset = EvalSet.load(resolve_domain(str(domain)).files)
    for seed, r in zip((0, 1), report["results"][1:]):
        run = out / "adapt" / "mini" / f"seed{seed}"
        assert r["variant"] == "full" and r["model"] == str(run / "final")
        manifest = json.loads((run / "adapt.json").read_text())
        sha = lambda name: hashlib.sha256((domain / name).read_bytes()).hexdigest()  # noqa: E731
        assert manifest["given"] == {"terms": sha("domain_terms.json"), "dictionary": sha("dictionary.jsonl"),
                                     "train": sha("train.jsonl")}
        assert manifest["seed"] == seed and manifest["options"]["pretrain"] is False
        assert manifest["base"] == str(pretrained)
        assert not (run / "train.jsonl").exists()  # nothing generated: the hand-written lists trained
        assert r["groups"] == evalset.scores(SpladeEncoder.from_pretrained(run / "final"))
        assert r["selection"]["epochs_run"] == 1  # read from DIR/training's log
    md = (out / "benchmark-adapt.md").read_text()
    assert "`adapt` with the hand-written inputs" in md and "H4 (extend" not in md
    assert load_benchmark(out) == report  # `report --benchmark OUT` finds the only result file
    # the H4 benchmark can share the directory: its own files, its own runs
    code = main(["benchmark", "--out", str(out), "--domains", str(domain), "--seeds", "0", "--base", str(base_dir),
                 "--config", str(config)])
    assert code == 0, capsys.readouterr().err
    assert json.loads((out / "benchmark.json").read_text())["inputs"]["pipeline"] == "train"
    assert (out / "runs" / "mini" / "seed0").is_dir()
    # another config on the same --out: the runs' own message would offer --overwrite, which benchmark lacks
    other = tmp_path / "c2.json"
    other.write_text(json.dumps({**ONE_EPOCH, "warmup": {**ONE_EPOCH.get("warmup", {}), "lr": 3e-4}}))
    capsys.readouterr()
    assert main(["benchmark", "--out", str(out), "--domains", str(domain), "--seeds", "0", "--base", str(base_dir),
                 "--config", str(other)]) == 2
    err = capsys.readouterr().err
    assert "holds a run made with other settings than this benchmark's" in err and "--overwrite" not in err


def test_pipeline_adapt_refuses_an_ablation_and_unknown_pipelines(tmp_path, capsys):
    assert main(["benchmark", "--out", str(tmp_path / "b"), "--domains", "legal", "--pipeline", "adapt",
                 "--ablation", "legal"]) == 2
    err = capsys.readouterr().err
    assert "--ablation" in err and "without --pipeline adapt" in err and len(err.strip().splitlines()) == 1
    assert main(["benchmark", "--out", str(tmp_path / "b"), "--domains", "legal", "--pipeline", "nope"]) == 2
    err = capsys.readouterr().err
    assert "--pipeline must be one of train, adapt, adapt-corpus" in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()
    with pytest.raises(ConfigError, match="as a file"):  # adapt hashes its --config file into adapt.json
        BenchmarkInputs(out=tmp_path / "b", pipeline="adapt", config=TrainConfig())


def test_feedback_tuning_flag_alone_is_refused(tmp_path, capsys):
    assert main(["benchmark", "--out", str(tmp_path / "b"), "--domains", "legal", "--feedback-docs", "2"]) == 2
    err = capsys.readouterr().err
    assert "add --feedback" in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("argv, message", [
    (["--domains", "legal,legal"], "--domains names legal more than once"),
    (["--domains", f"legal,{corpora.get('legal').docs.parent}"], "--domains names legal more than once"),
    (["--domains", "legal", "--seeds", "0,0"], "--seeds names 0 more than once"),
])
def test_a_domain_or_seed_named_twice_is_refused(argv, message, tmp_path, capsys):
    """Named twice, each query pair would enter the pooled test twice: n doubled, p shrunk."""
    assert main(["benchmark", "--out", str(tmp_path / "b"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()


def test_unknown_domain_is_one_error_line(tmp_path, capsys):
    assert main(["benchmark", "--out", str(tmp_path / "b"), "--domains", "nope"]) == 2
    err = capsys.readouterr().err
    assert "neither a registered data set" in err and "Traceback" not in err
    with pytest.raises(ConfigError, match="lacks"):
        resolve_domain(str(tmp_path))


def test_a_domain_without_hand_written_inputs_still_needs_its_evaluation_files(tmp_path):
    # hand_written False excuses train.jsonl, domain_terms.json and dictionary.jsonl only: the
    # documents, queries, qrels and groups are what every benchmark evaluates
    domain = write_domain(tmp_path / "dom")
    for name in ("train.jsonl", "domain_terms.json", "dictionary.jsonl"):
        (domain / name).unlink()
    assert resolve_domain(str(domain), hand_written=False).split == "outside"
    (domain / "queries.jsonl").unlink()
    with pytest.raises(ConfigError, match=r"lacks queries\.jsonl$"):
        resolve_domain(str(domain), hand_written=False)


def test_a_domain_for_the_pipelines_that_train_on_its_hand_written_inputs_needs_them(tmp_path):
    domain = write_domain(tmp_path / "dom")
    (domain / "dictionary.jsonl").unlink()
    with pytest.raises(ConfigError, match=r"lacks dictionary\.jsonl$"):
        resolve_domain(str(domain))  # hand_written defaults to True: train's H4 and adapt from them


def test_the_pool_holds_every_other_registered_domains_documents_prefixed_and_none_of_its_own():
    pool = corpora.names()
    own = pool[0]
    ids = {d.doc_id for d in pool_documents(own)}
    assert {i.split("/", 1)[0] for i in ids} == set(pool) - {own}


def test_a_group_naming_a_query_the_domain_lacks_is_refused_on_loading(tmp_path):
    domain = write_domain(tmp_path / "dom")
    groups = json.loads((domain / "query_groups.json").read_text())
    first = next(iter(groups))
    groups[first] = [*groups[first], "no-such-query"]
    (domain / "query_groups.json").write_text(json.dumps(groups))
    with pytest.raises(SparseAdaptError, match="no-such-query"):
        EvalSet.load(resolve_domain(str(domain)).files)


def test_held_out_queries_in_no_group_are_warned_of_on_loading(tmp_path):
    """A query_groups.json without its held-out semantic group trained, scored and passed with
    exit 0: a third of the held-out queries were scored nowhere, without a word."""
    import shutil

    domain = tmp_path / "dom"
    shutil.copytree(resolve_domain("legal").files.docs.parent, domain)
    said: list[str] = []
    EvalSet.load(resolve_domain(str(domain)).files, said)
    assert said == []
    groups = json.loads((domain / "query_groups.json").read_text())
    left_out = groups.pop("heldout-domain-semantic")
    (domain / "query_groups.json").write_text(json.dumps(groups))
    EvalSet.load(resolve_domain(str(domain)).files, said)
    [line] = said
    heldout = sum(1 for _ in (domain / "heldout_queries.jsonl").open())
    assert line.startswith(f"{domain / 'query_groups.json'}: {len(left_out)} of the {heldout} judged held-out queries "
                           f"are in no group (e.g. {left_out[0]}): they are not scored")


@pytest.mark.parametrize("argv, message", [
    (["--domains", "legal", "--seeds", ""], "--seeds names no seed"),
    (["--domains", ","], "--domains names no domain"),
    (["--domains", "legal", "--ablation", "nope"], "--ablation: 'nope' is neither"),
    (["--domains", "legal", "--ablation-seeds", "x"], "--ablation-seeds must be comma-separated integers"),
    (["--domains", "legal", "--seeds", "0,18446744073709551616"], "--seeds must be between 0 and 9223372036854775807, got 18446744073709551616"),
    (["--domains", "legal", "--ablation-seeds", "-1"], "--ablation-seeds must be between 0"),
])
def test_empty_or_wrong_lists_are_one_error_line_before_any_run(argv, message, tmp_path, capsys):
    """An empty --seeds or --domains once wrote an empty benchmark.md and exited 0."""
    assert main(["benchmark", "--out", str(tmp_path / "b"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "b").exists()


def test_registered_domains_carry_their_split():
    assert resolve_domain("legal").split == "test" and resolve_domain("pharma").split == "dev"
    assert resolve_domain("gatrocraptic").split == "bundled"


def test_a_domain_folder_given_relative_is_named_and_resolved_like_an_absolute_one(tmp_path, monkeypatch):
    # "." is named after the folder it is (not ""), and a registered domain's folder spelled
    # relative is still that registered domain (not an "outside" copy pooled with itself)
    domain = write_domain(tmp_path / "dom")
    monkeypatch.chdir(domain)
    assert (resolve_domain(".").name, resolve_domain(".").split) == ("dom", "outside")
    legal = corpora.get("legal").docs.parent
    monkeypatch.chdir(legal.parent)
    assert (resolve_domain(f"./{legal.name}").name, resolve_domain(f"./{legal.name}").split) == ("legal", "test")


def test_without_zeroes_one_weight():
    cfg = without(TrainConfig(), "qexp")
    assert cfg.distill.qexp == 0.0 and cfg.distill.dom == TrainConfig().distill.dom


def test_pool_searches_every_registered_domains_documents_into_its_own_files(base_dir, tmp_path, capsys, monkeypatch):
    import corpora
    import sparse_adapt.retrieval.evaluation as evaluation
    from sparse_adapt.data import load_documents

    domain = write_domain(tmp_path / "mini")
    config = tmp_path / "c.json"
    config.write_text(json.dumps(ONE_EPOCH))
    out = tmp_path / "bench"
    args = ["benchmark", "--out", str(out), "--domains", str(domain), "--seeds", "0", "--base", str(base_dir),
            "--config", str(config)]
    assert main(args) == 0, capsys.readouterr().err
    plain = (out / "benchmark.json").read_bytes()
    searched = []
    real = evaluation.score_in_memory
    monkeypatch.setattr(evaluation, "score_in_memory",
                        lambda m, docs, *a, **k: searched.append([d.doc_id for d in docs]) or real(m, docs, *a, **k))
    assert main([*args, "--pool"]) == 0, capsys.readouterr().err
    assert "resuming: distill already complete" in capsys.readouterr().out  # re-scored, not retrained
    assert (out / "benchmark.json").read_bytes() == plain
    pooled = json.loads((out / "benchmark-pool.json").read_text())
    registered = sum(len(load_documents(corpora.get(n).docs)) for n in corpora.names())
    assert pooled["inputs"]["pool"] == {"documents": registered}
    md = " ".join((out / "benchmark-pool.md").read_text().split())
    assert "ranking over the pooled documents (below)" in md and "over the domain's documents" not in md
    # base and the one adapted model, each over the domain's 3 documents and every registered one
    assert [len(ids) for ids in searched] == [3 + registered] * 2
    assert len(set(searched[0])) == len(searched[0]) and {"d1", "d2", "d3"} <= set(searched[0])
    evalset = EvalSet.load(resolve_domain(str(domain)).files).pooled(None)
    monkeypatch.setattr(evaluation, "score_in_memory", real)
    for r in pooled["results"]:
        assert r["groups"] == evalset.scores(SpladeEncoder.from_pretrained(r["model"]))
    assert f"among the {registered} documents of all registered domains" in (out / "benchmark-pool.md").read_text()
    assert load_benchmark(out / "benchmark-pool.json") == pooled
    fed = BenchmarkInputs(out=out, pool=True, feedback=Feedback(), pipeline="adapt-corpus")
    assert fed.stem == "benchmark-adapt-corpus-pool-feedback"


def test_a_registered_domain_is_pooled_without_its_own_documents_twice():
    import corpora

    own = EvalSet.load(corpora.get("legal"))
    pooled = own.pooled("legal")
    ids = [d.doc_id for d in pooled.documents]
    assert len(ids) == len(set(ids))
    assert not any(i.startswith("legal/") for i in ids) and {d.doc_id for d in own.documents} <= set(ids)
    assert {i.split("/")[0] for i in ids if "/" in i} == set(corpora.names()) - {"legal"}


CORPUS_QUERIES = [{"qid": "q1", "text": "Zentrofax pump coolant"}, {"qid": "q2", "text": "sourdough bread"}]
CORPUS_HELDOUT = [{"qid": "h1", "text": "pump that circulates coolant"}, {"qid": "h2", "text": "Zentrofax seals"},
                  {"qid": "h3", "text": "jury trial witnesses"}]


def write_corpus_domain(root: Path) -> Path:
    """A domain of docs.jsonl and judged queries only: nothing hand-written to train on."""
    from tests.corpus.test_adapt import DOCS as CORPUS_DOCS

    write_judged(root, [{"doc_id": i, "text": t} for i, t in CORPUS_DOCS], CORPUS_QUERIES, CORPUS_HELDOUT,
                 "q1 0 d1 2\nq2 0 d8 2\n", "h1 0 d4 2\nh2 0 d2 2\nh3 0 d5 2\n")
    return root


def test_pipeline_adapt_corpus_generates_every_input_and_marks_the_corpus_bar(setup, tmp_path, capsys):
    domain = write_corpus_domain(tmp_path / "byoc")
    out = tmp_path / "bench"
    args = ["benchmark", "--out", str(out), "--domains", str(domain), "--seeds", "0", "--base", setup["base"],
            "--config", str(setup["config"]), "--pipeline", "adapt-corpus"]
    assert main([*args, "--teacher", str(tmp_path / "no-such-teacher")]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert not out.exists()  # refused before the base was scored: nothing of the run was written
    code = main([*args, "--teacher", setup["teacher"], "--negatives", "2", "--siblings", "0"])
    assert code == 0, capsys.readouterr().err
    report = json.loads((out / "benchmark-adapt-corpus.json").read_text())
    assert report["inputs"]["pipeline"] == "adapt-corpus" and report["inputs"]["teacher"] == setup["teacher"]
    assert report["inputs"]["generation"] == {"negatives": 2, "siblings": 0}
    run = out / "adapt-corpus" / "byoc" / "seed0"
    manifest = json.loads((run / "adapt.json").read_text())
    assert manifest["given"] == {"terms": None, "dictionary": None, "train": None}
    assert manifest["teacher"] == setup["teacher"]
    # the generation options reached adapt; the ones not given are adapt's defaults
    assert manifest["options"]["negatives"] == 2 and manifest["options"]["siblings"] == 0
    assert manifest["options"]["max_queries"] == DEFAULT_MAX_QUERIES
    lists = [json.loads(line)["doc_ids"] for line in (run / "train.jsonl").read_text().splitlines()]
    assert lists and all(len(ids) == 3 for ids in lists)  # the source and 2 negatives; adapt's 7 + 3 would fill 8
    for name in ("domain_terms.json", "dictionary.jsonl", "train.jsonl"):  # generated into the run dir
        assert (run / name).is_file() and not (domain / name).exists()
    assert "zentrofax" in (run / "domain_terms.json").read_text().lower()  # mined from the corpus
    final = report["results"][1]
    assert final["model"] == str(run / "final")
    evalset = EvalSet.load(resolve_domain(str(domain), hand_written=False).files)
    assert final["groups"] == evalset.scores(SpladeEncoder.from_pretrained(run / "final"))
    md = (out / "benchmark-adapt-corpus.md").read_text()
    assert "`adapt` given only docs.jsonl" in md
    assert f"Options given to every `adapt`: `--negatives 2 --siblings 0 --teacher {setup['teacher']}`" in md
    assert "held-out domain-semantic >= base + 0.10, held-out controls >= base - 0.02" in md
    assert "## Pooled by split" in md and "| outside | semantic | 1 |" in md
    assert "- pooled, outside semantic: " in capsys.readouterr().out  # printed at the end too
    assert report["pooled"] == pooled(report["results"], [0])  # tested once, stored for the tables and the CLI
    assert final["groups"]["heldout-domain-semantic"]["per_query"].keys() == {"h1"}
    base = report["results"][0]["groups"]
    gain = final["groups"]["heldout-domain-semantic"]["ndcg@10"] - base["heldout-domain-semantic"]["ndcg@10"]
    status = "pass" if gain >= 0.10 - 1e-9 else "fail"
    assert f"semantic {status}, explicit n/a" in md  # the corpus bar reads no explicit floor


def test_a_domain_without_hand_written_inputs_is_refused_for_the_pipelines_that_train_on_them(tmp_path, capsys):
    domain = write_corpus_domain(tmp_path / "byoc")
    assert resolve_domain(str(domain), hand_written=False).split == "outside"
    code = main(["benchmark", "--out", str(tmp_path / "b"), "--domains", str(domain), "--pipeline", "adapt"])
    assert code == 2
    err = capsys.readouterr().err
    assert "lacks train.jsonl, domain_terms.json, dictionary.jsonl" in err and len(err.strip().splitlines()) == 1
    assert main(["benchmark", "--out", str(tmp_path / "b"), "--domains", "legal", "--teacher", "x"]) == 2
    assert "give --pipeline adapt-corpus" in capsys.readouterr().err
    for option in (["--max-queries", "5"], ["--teacher-labels"]):
        assert main(["benchmark", "--out", str(tmp_path / "b"), "--domains", "legal", "--pipeline", "adapt", *option]) == 2
        err = capsys.readouterr().err
        assert f"{option[0]} shapes generated inputs" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "b").exists()


def test_generation_options_are_run_adapts_keywords():
    import inspect

    from sparse_adapt.corpus.adapt import GENERATION, run_adapt

    keywords = inspect.signature(run_adapt).parameters
    assert all(k in keywords and keywords[k].kind is inspect.Parameter.KEYWORD_ONLY for k in GENERATION)
    with pytest.raises(ConfigError, match="got maxqueries"):
        BenchmarkInputs(out=Path("x"), pipeline="adapt-corpus", generation={"maxqueries": 5})


def test_bar_status():
    assert bar_status("heldout-domain-semantic", 0.5, [0.91, 0.95]) == "pass"
    assert bar_status("heldout-domain-semantic", 0.5, [0.91, 0.89]) == "fail"
    assert bar_status("heldout-control", 0.96, [0.955, 0.951]) == "pass"
    assert bar_status("heldout-control", 0.96, [0.955, 0.949]) == "fail"
    assert bar_status("control", 0.96, [0.5]) == ""
    # bring-your-own-corpus: semantic >= base + 0.10 (0.6 - 0.5 is 0.09999... in floats), controls >= base - 0.02
    assert bar_status("heldout-domain-semantic", 0.5, [0.6, 0.7], CORPUS_BAR) == "pass"
    assert bar_status("heldout-domain-semantic", 0.5, [0.6, 0.59], CORPUS_BAR) == "fail"
    assert bar_status("heldout-domain-explicit", 0.5, [0.1], CORPUS_BAR) == ""
    assert bar_status("heldout-control", 0.96, [0.945], CORPUS_BAR) == "pass"
    assert bar_status("heldout-control", 0.96, [0.935], CORPUS_BAR) == "fail"
    # exactly at the bar passes, as its ">=" says, whatever float noise the subtraction leaves
    assert bar_status("heldout-domain-semantic", 0.5, [0.7 + 0.2]) == "pass"  # 0.8999999999999999
    assert bar_status("heldout-control", 0.3, [0.3 - 0.01]) == "pass"
    assert bar_status("heldout-control", 0.3, [0.3 - 0.0101]) == "fail"


def _r(domain, seed, variant, sem, ctl):
    return {"domain": domain, "split": "test", "seed": seed, "variant": variant,
            "groups": {"heldout-domain-semantic": {"queries": 5, "ndcg@10": sem},
                       "heldout-control": {"queries": 5, "ndcg@10": ctl}}}


def test_tables_from_constructed_results():
    results = [_r("a", None, "base", 0.5, 0.9), _r("a", 0, "full", 0.8, 0.8), _r("a", 1, "full", 0.9, 0.96),
               _r("a", 0, "no-pres", 0.7, 0.5)]
    rows = domain_table(results, [0, 1])
    assert "| a | test | heldout-domain-semantic | 5 | 0.500 | 0.800 | 0.900 | 0.850 | +0.350 | fail |" in rows
    assert "| a | test | heldout-control | 5 | 0.900 | 0.800 | 0.960 | 0.880 | -0.020 | fail |" in rows
    ablation = ablation_table(results, [0])
    assert "| no-pres | 0.700 | 0.500 | -0.200 |" in ablation
    assert "| full | 0.800 | 0.800 | - |" in ablation
    assert "| no-kd | (weight 0 in this config) | (weight 0 in this config) | - |" in ablation


def _pq(domain, split, seed, variant, values):
    return {"domain": domain, "split": split, "seed": seed, "variant": variant,
            "groups": {"heldout-domain-semantic": {"queries": len(values), "ndcg@10": sum(values.values()) / len(values),
                                                   "per_query": values}}}


def test_pooled_table_tests_every_query_of_a_split_with_its_seeds_averaged():
    """The query is the unit: its seeds share its base value, and testing each query-seed pair
    as independent gave p-values up to 10x too small (bench/RESULTS.md, thirty-sixth session)."""
    results = [_pq("a", "test", None, "base", {"q1": 0.5, "q2": 0.5}),
               _pq("a", "test", 0, "full", {"q1": 1.0, "q2": 0.5}),
               _pq("a", "test", 1, "full", {"q1": 1.0, "q2": 1.0}),
               _pq("b", "dev", None, "base", {"x": 0.8}), _pq("b", "dev", 0, "full", {"x": 0.6}),
               _pq("b", "dev", 1, "full", {"x": 0.6}),
               # measured on seed 0 alone (an ablation domain): not one of the split's full domains
               _pq("c", "test", None, "base", {"y": 0.1}), _pq("c", "test", 0, "full", {"y": 0.9})]
    rows = pooled_table(pooled(results, [0, 1]))
    # test: q1 0.5 -> mean(1.0, 1.0) = 1.0, q2 0.5 -> mean(0.5, 1.0) = 0.75; differences 0.5, 0.25 ->
    # mean +0.375; of the 4 sign flips, 2 reach |sum| >= 0.75: p = 0.5
    assert "| test | semantic | 2 | 0.500 | 0.875 | +0.375 | 2 / 0 / 0 | 0.500 |" in rows
    assert "| dev | semantic | 1 | 0.800 | 0.600 | -0.200 | 0 / 0 / 1 | 1.000 |" in rows  # one query: no test
    assert pooled_table(pooled(results, [0]))[2].startswith("| test | semantic | 3 |")  # c counts for seed 0
    assert pooled_line(pooled(results, [0, 1])[0]) == \
        "test semantic: 0.500 -> 0.875 (+0.375, n=2 queries, mean of 2 seeds, p = 0.500)"
    old = [{**r, "groups": {"heldout-domain-semantic": {"queries": 1, "ndcg@10": 0.5}}} for r in results]
    assert pooled_table(pooled(old, [0, 1])) == []  # files written before per-query values: no table
    # two domains' queries of one id are two queries
    same_id = [_pq("a", "test", None, "base", {"q1": 0.5}), _pq("a", "test", 0, "full", {"q1": 1.0}),
               _pq("b", "test", None, "base", {"q1": 0.5}), _pq("b", "test", 0, "full", {"q1": 0.9})]
    assert pooled(same_id, [0])[0]["queries"] == 2


def test_the_pooled_test_reads_held_out_groups_only_and_every_domain_s_per_query_values():
    def row(domain, seed, variant, groups):
        return {"domain": domain, "split": "test", "seed": seed, "variant": variant,
                "groups": {g: {"queries": len(v), "per_query": v} for g, v in groups.items()}}

    # domain-semantic is trained on: its queries never enter the quality bar's test
    both = {"heldout-domain-semantic": {"h": 0.5}, "domain-semantic": {"t": 0.5}}
    results = [row("a", None, "base", both),
               row("a", 0, "full", {"heldout-domain-semantic": {"h": 0.9}, "domain-semantic": {"t": 1.0}})]
    assert [(p["group"], p["queries"]) for p in pooled(results, [0])] == [("heldout-domain-semantic", 1)]
    # one domain without per-query values (an older file's): no pooled test rather than one
    # that silently leaves that domain's queries out
    older = [{**r, "domain": "b", "groups": {"heldout-domain-semantic": {"queries": 1, "ndcg@10": 0.5}}}
             for r in results]
    assert pooled(results + older, [0]) == []
    # the base alone without them is the same: nothing to pair the adapted values with
    bare_base = [{**results[0], "groups": {"heldout-domain-semantic": {"queries": 1, "ndcg@10": 0.5}}}, results[1]]
    assert pooled(bare_base, [0]) == []


def test_pooled_entries_follow_the_order_the_domains_were_measured_in():
    # one split per domain, so each domain makes its own entry; the benchmark's --domains order
    # is the table's (a set's order changed from one run to the next)
    names = ["legal", "med", "fin", "geo", "bio", "law", "ops", "hr"]
    results = [row for i, name in enumerate(names)
               for row in (_pq(name, f"s{i}", None, "base", {"q": 0.5}), _pq(name, f"s{i}", 0, "full", {"q": 0.6}))]
    assert [p["split"] for p in pooled(results, [0])] == [f"s{i}" for i in range(len(names))]


def test_a_pooled_line_with_a_p_value_below_0001_says_p_less_than():
    entry = {"split": "test", "group": "heldout-control", "queries": 40, "seeds": 2, "base": 0.5, "adapted": 0.75,
             "p_value": 0.0004}
    assert pooled_line(entry) == "test control: 0.500 -> 0.750 (+0.250, n=40 queries, mean of 2 seeds, p <0.001)"


def test_a_pooled_line_at_p_0001_shows_the_figure_with_its_equals_sign():
    # 0.001 is not below 0.001: the line gives its figure as the table does, not "p 0.001"
    entry = {"split": "test", "group": "heldout-control", "queries": 40, "seeds": 2, "base": 0.5, "adapted": 0.75,
             "p_value": 0.001}
    assert pooled_line(entry) == "test control: 0.500 -> 0.750 (+0.250, n=40 queries, mean of 2 seeds, p = 0.001)"


def test_a_stored_pooled_test_of_query_seed_pairs_is_tested_again_per_query():
    from sparse_adapt.report.pooled import stored_pooled

    fresh = [{"split": "test", "group": "heldout-domain-semantic", "queries": 2, "seeds": 2}]
    assert stored_pooled({"pooled": fresh}) == fresh
    assert stored_pooled({"pooled": [{"split": "test", "group": "heldout-domain-semantic", "pairs": 4}]}) is None
    assert stored_pooled({}) is None
    # one entry of the old form is enough: the file was written before the test was per query
    assert stored_pooled({"pooled": [*fresh, {"split": "dev", "group": "heldout-control", "pairs": 4}]}) is None


def test_the_bar_line_is_for_every_seed_as_the_domain_table_is():
    """A domain measured on seed 0 of 0,1 (an ablation domain) was said to pass from seed 0 alone."""
    from sparse_adapt.report.benchmark_md import bar_summary

    results = [_pq("a", "test", None, "base", {"q1": 0.5}), _pq("a", "test", 0, "full", {"q1": 0.95}),
               _pq("a", "test", 1, "full", {"q1": 0.95}),
               _pq("c", "test", None, "base", {"y": 0.5}), _pq("c", "test", 0, "full", {"y": 0.95})]
    assert bar_summary(results, [0, 1]) == ["- **a** (test): semantic pass", "- **c** (test): semantic n/a"]
    assert bar_summary(results, [0])[1] == "- **c** (test): semantic pass"


def test_paired_test_by_hand():
    from sparse_adapt.report.paired import paired_test

    # 7 pairs all +0.4: of 128 sign flips only all-plus and all-minus are as extreme, p = 2/128
    assert paired_test([0.9] * 7, [0.5] * 7) == {"wins": 7, "ties": 0, "losses": 0, "p_value": round(2 / 128, 6)}
    assert paired_test([0.5, 0.5], [0.5, 0.5])["p_value"] == 1.0
    # ties flip to themselves and are left out: 7 changed pairs among 27 are enumerated exactly
    assert paired_test([0.9] * 7 + [0.5] * 20, [0.5] * 27) == {"wins": 7, "ties": 20, "losses": 0,
                                                                "p_value": round(2 / 128, 6)}
    # float noise either way is a tie, not a win or a loss (0.1 + 0.2 is not 0.3 in floats)
    assert paired_test([0.1 + 0.2, 0.5], [0.3, 0.5 + 1e-12]) == {"wins": 0, "ties": 2, "losses": 0, "p_value": 1.0}


def test_paired_test_counts_losses_as_moved_pairs_and_a_difference_of_exactly_tie_as_a_tie():
    from sparse_adapt.report.paired import paired_test

    # six pairs +0.4 and one -0.4: |sum| >= 5 * 0.4 for 0, 1, 6 or 7 plus signs of 7, p = 16/128;
    # a loss left out of the flips would give 2/64
    assert paired_test([0.9] * 6 + [0.1], [0.5] * 7) == {"wins": 6, "ties": 0, "losses": 1, "p_value": 0.125}
    # "within tie" includes tie itself (0.75 - 0.5 is exactly 0.25): every pair is a win, a tie or a loss
    assert paired_test([0.75], [0.5], tie=0.25) == {"wins": 0, "ties": 1, "losses": 0, "p_value": 1.0}
    # the default tie is 1e-9: 1e-10 is noise, 1e-6 a real (if tiny) win
    assert paired_test([0.5 + 1e-10, 0.500001], [0.5, 0.5]) == {"wins": 1, "ties": 1, "losses": 0, "p_value": 1.0}


def test_a_difference_of_exactly_tie_is_left_out_of_the_sign_flips_too():
    from sparse_adapt.report.paired import paired_test

    # 0.75 - 0.5 is exactly the tie 0.25: counted a tie, it must not flip either. The two +0.4
    # pairs alone: 2 of 4 flips as extreme, p = 0.5; flipped as a third pair it would be 2/8
    assert paired_test([0.75, 0.9, 0.9], [0.5] * 3, tie=0.25) == {"wins": 2, "ties": 1, "losses": 0,
                                                                  "p_value": 0.5}


def test_paired_test_is_exact_up_to_16_moved_pairs_and_seeded_beyond():
    from sparse_adapt.report.paired import paired_test

    # 16 pairs all +0.4: all 2^16 flips enumerated, only all-plus and all-minus as extreme
    assert paired_test([0.9] * 16, [0.5] * 16)["p_value"] == round(2 / 2**16, 6)
    # 20 pairs (14 up, 6 down) are sampled: the exact p is 2 * sum(C(20, k), k <= 6) / 2^20 = 0.1153,
    # and a stored benchmark's p must not change from one run to the next
    a, b = [0.6] * 14 + [0.4] * 6, [0.5] * 20
    first = paired_test(a, b)["p_value"]
    assert first == paired_test(a, b)["p_value"]
    assert first == pytest.approx(0.1153, abs=0.005)


def test_check_out_refuses_a_foreign_directory_and_accepts_a_stopped_benchmark(tmp_path):
    from sparse_adapt.report.benchmark import check_out

    (tmp_path / "mine.txt").write_text("a user's file")
    with pytest.raises(ConfigError, match="holds no benchmark"):
        check_out(tmp_path)
    for ours in ("runs", "prefix", "adapt", "adapt-corpus", "pretrained", "pretrained.partial", "ablation"):
        (tmp_path / ours).mkdir()  # empty: proves nothing, the user's file stays theirs
        with pytest.raises(ConfigError, match="holds no benchmark"):
            check_out(tmp_path)
        (tmp_path / ours / "legal").mkdir()  # a benchmark of ours, possibly stopped early
        check_out(tmp_path)
        (tmp_path / ours / "legal").rmdir()
        (tmp_path / ours).rmdir()
    # Names alone are no proof: a user's own files of those names are refused, not written over.
    (tmp_path / "runs" / "exp1").mkdir(parents=True)
    (tmp_path / "runs" / "exp1" / "model.bin").write_text("theirs")
    (tmp_path / "ablation").mkdir()
    (tmp_path / "ablation" / "thesis.tex").write_text("theirs")
    (tmp_path / "benchmark.json").write_text('{"mine": true}')
    with pytest.raises(ConfigError, match="holds no benchmark"):
        check_out(tmp_path)
    (tmp_path / "runs" / "legal" / "seed0").mkdir(parents=True)
    (tmp_path / "runs" / "legal" / "seed0" / "run.json").write_text("{}")
    with pytest.raises(ConfigError, match="holds no benchmark"):  # still the user's exp1 in runs/
        check_out(tmp_path)
    (tmp_path / "benchmark-adapt-feedback.json").write_text('{"schema": "sparse-adapt.benchmark/2"}')
    check_out(tmp_path)
    with pytest.raises(ConfigError, match="is a file"):
        check_out(tmp_path / "mine.txt")


def test_report_and_benchmark_refuse_each_other_s_directories(tmp_path):
    from sparse_adapt.report.benchmark import check_out
    from sparse_adapt.report.experiments import _check_out as check_report_out

    bench, report, empty = tmp_path / "bench", tmp_path / "report", tmp_path / "empty"
    (bench / "runs" / "legal" / "seed0").mkdir(parents=True)
    (report / "runs" / "H1").mkdir(parents=True)
    (empty / "runs").mkdir(parents=True)
    check_out(bench)
    check_report_out(report)
    with pytest.raises(ConfigError, match="holds a `sparse-adapt report` output, not a benchmark"):
        check_out(report)
    with pytest.raises(ConfigError, match="holds a `sparse-adapt benchmark` output, not a report"):
        check_report_out(bench)
    (report / "runs" / "H1").rmdir()
    (report / "report.json").write_text("{}")
    with pytest.raises(ConfigError, match="report"):
        check_out(report)
    check_out(empty)  # nothing but an empty directory: either may start there
    check_report_out(empty)
    # adapt writes pretrained/ and tune prefix/, as benchmark does: their own files say whose they are.
    adapt, tune = tmp_path / "adapt", tmp_path / "tune"
    (adapt / "pretrained" / "x").mkdir(parents=True)
    (adapt / "adapt.json").write_text("{}")
    (tune / "prefix" / "x").mkdir(parents=True)
    (tune / "best.toml").write_text("")
    for directory, kind in ((adapt, "adapt"), (tune, "tune")):
        for check, what in ((check_out, "benchmark"), (check_report_out, "report")):
            with pytest.raises(ConfigError, match=f"holds a `sparse-adapt {kind}` output, not a {what}"):
                check(directory)


def test_a_domain_directory_s_group_naming_a_missing_query_stops_before_any_run(tmp_path, capsys):
    """Dropped silently, the group's numbers would stand on fewer queries than its file lists."""
    domain = write_domain(tmp_path / "dom")
    groups = json.loads((domain / "query_groups.json").read_text())
    first = next(iter(groups))
    groups[first] = [*groups[first], "h99"]
    (domain / "query_groups.json").write_text(json.dumps(groups))
    assert main(["benchmark", "--out", str(tmp_path / "b"), "--domains", str(domain), "--seeds", "0"]) == 2
    err = capsys.readouterr().err
    assert "query_groups.json" in err and first in err and "h99" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "b").exists()


def test_a_domains_qrels_are_checked_against_its_documents_and_queries(tmp_path):
    """benchmark never called check_qrels: judgements of missing documents counted as misses unsaid."""
    import shutil

    from sparse_adapt.report.domains import EvalSet

    domain = tmp_path / "dom"
    shutil.copytree(resolve_domain("gatrocraptic").files.docs.parent, domain)
    with (domain / "heldout_qrels.tsv").open("a") as f:
        f.write("h1 0 d921 1\nh1 0 d922 1\n")
    said: list[str] = []
    EvalSet.load(resolve_domain(str(domain)).files, said)
    [line] = said
    assert "2 of" in line and "d921" in line and str(domain / "docs.jsonl") in line
    (domain / "qrels.tsv").write_text("q1 0 d921 1\n")
    with pytest.raises(SparseAdaptError, match="none of the 1 relevant documents is in"):
        EvalSet.load(resolve_domain(str(domain)).files)


@pytest.mark.parametrize("text", ["[" * 100000 + "]" * 100000, '{"schema": 1' + "0" * 5000 + "}",
                                  '{"schema": NaN}'])
def test_a_benchmark_file_json_cannot_read_is_one_error(tmp_path, text):
    """10^5-deep nesting and a 5000-digit number raised RecursionError / ValueError tracebacks;
    NaN is no figure `benchmark` writes."""
    (tmp_path / "benchmark.json").write_text(text)
    with pytest.raises(ConfigError, match="not a benchmark.json"):
        load_benchmark(tmp_path)


def test_each_qrels_file_judges_its_own_queries_and_a_query_id_in_both_files_is_refused(tmp_path):
    """A held-out qrels line for a main query replaced that query's judgements (q1 scored 0.36
    instead of 0.90 in the group tables); a held-out query reusing a main id was scored with the
    held-out text in both groups."""
    from sparse_adapt.report.domains import EvalSet

    domain = write_domain(tmp_path / "dom")
    with (domain / "heldout_qrels.tsv").open("a") as f:
        f.write("q1 0 d2 2\n")
    said: list[str] = []
    evalset = EvalSet.load(resolve_domain(str(domain)).files, said)
    assert evalset.qrels["q1"] == {"d1": 2, "d3": 2}
    assert any("q1" in line for line in said)  # named, as before, as not evaluated from that file
    heldout = [json.loads(l) for l in (domain / "heldout_queries.jsonl").read_text().splitlines()]
    _jsonl(domain / "heldout_queries.jsonl", [*heldout, {"qid": "q1", "text": "another text"}])
    with pytest.raises(ConfigError, match="heldout_queries.jsonl: query ids also in .*queries.jsonl: q1"):
        EvalSet.load(resolve_domain(str(domain)).files)


def test_group_scores_of_a_run_cover_the_judged_queries_it_holds(tmp_path):
    # A run from another retriever (a Lucene search) may hold no line for a query: that query
    # is left out of its group's count and per-query values rather than failing the scoring.
    # q1's relevant documents are d1 and d3, both grade 2 (write_domain); the run ranks d1 alone:
    # nDCG@10 = (2/log2(2)) / (2/log2(2) + 2/log2(3)) = 1 / (1 + 0.6309) = 0.6131.
    evalset = EvalSet.load(resolve_domain(str(write_domain(tmp_path / "dom"))).files)
    scores = evalset.run_scores({"q1": {"d1": 2.0}})
    assert scores["control"] == {"queries": 0, "ndcg@10": None, "per_query": {}}  # q2: judged, not in the run
    assert scores["domain-semantic"]["queries"] == 1
    assert scores["domain-semantic"]["per_query"] == {"q1": pytest.approx(0.6131, abs=1e-4)}


def test_a_p_value_is_never_shown_on_the_other_side_of_005():
    from sparse_adapt.report.pooled import _p

    assert [_p(p) for p in (0.0004, 0.0496, 0.04996, 0.05, 0.0504, 0.1234)] == \
        ["<0.001", "0.0496", "0.04996", "0.050", "0.050", "0.123"]
    assert _p(0.001) == "0.001"  # "<0.001" is for what is below it


def test_the_pooled_section_names_the_domains_it_leaves_out():
    from sparse_adapt.report.benchmark_md import _fewer_seeds

    results = [_pq("a", "test", None, "base", {"q1": 0.5}), _pq("a", "test", 0, "full", {"q1": 1.0}),
               _pq("a", "test", 1, "full", {"q1": 1.0}),
               _pq("c", "test", None, "base", {"y": 0.1}), _pq("c", "test", 0, "full", {"y": 0.9})]
    assert _fewer_seeds(results, [0, 1]) == ["Left out (measured on fewer seeds): c."]
    assert _fewer_seeds(results, [0]) == []


def test_a_groups_score_is_the_mean_over_its_judged_queries_the_run_holds():
    # q1 judged and searched (nDCG@10 0.6131, as above); q2 judged but not in the run; q4 in the run
    # but judged nowhere (a query file line without qrels): neither enters the group's mean or count
    evalset = EvalSet([], [], {"q1": {"d1": 2, "d3": 2}, "q2": {"d2": 2}},
                      {"mixed": ["q1", "q2", "q4"], "unjudged": ["q4"]})
    scores = evalset.run_scores({"q1": {"d1": 2.0}, "q4": {"d1": 1.0}})
    assert scores["mixed"]["queries"] == 1 and scores["mixed"]["per_query"] == {"q1": pytest.approx(0.6131, abs=1e-4)}
    assert scores["mixed"]["ndcg@10"] == pytest.approx(0.6131, abs=1e-4)  # not halved by q2 counted 0
    assert scores["unjudged"] == {"queries": 0, "ndcg@10": None, "per_query": {}}


def test_bench_domain_s_split_comment_names_every_split_resolve_domain_gives(tmp_path, monkeypatch):
    # it listed dev, test, bundled and outside: a registered name in no split is "registered"
    import inspect
    import shutil

    from sparse_adapt.report.domains import FILES, BenchDomain

    line = next(s for s in inspect.getsource(BenchDomain).splitlines() if s.strip().startswith("split:"))
    comment = line.split("#", 1)[1]
    g = corpora.GATROCRAPTIC
    monkeypatch.setitem(corpora._REGISTRY, "zz-split-probe", g._replace(name="zz-split-probe"))
    outside = tmp_path / "mine"
    outside.mkdir()
    for key in FILES:
        shutil.copy(getattr(g, key), outside / FILES[key])
    specs = [corpora.SPLITS["dev"][0], corpora.SPLITS["test"][0], g.name, "zz-split-probe", str(outside)]
    splits = {resolve_domain(s).split for s in specs}
    assert len(splits) == len(specs)  # one of each kind
    assert [s for s in sorted(splits) if s not in comment] == []
