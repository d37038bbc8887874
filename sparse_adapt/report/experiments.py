"""Running the experiments: train (or reuse) each, evaluate it like the CLI does, assemble."""

from __future__ import annotations

import dataclasses
import datetime as _dt
from pathlib import Path
from typing import Sequence

from sparse_adapt.errors import ConfigError
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.progress import SILENT, Hooks
from sparse_adapt.report.benchmark_md import benchmark_differences, benchmark_file, config_overrides, load_benchmark
from sparse_adapt.report.criteria import criteria, relevant_docs, summarise_term
from sparse_adapt.report.files import holds_files, output_kind, slug, to_json, write_report
from sparse_adapt.report.inputs import ReportData, ReportInputs, choose_primary_term, domain_terms, load_report_data
from sparse_adapt.report.results import (
    DIAGNOSTICS_DIR, EXPLAIN_K, GROUP_METRIC, REFERENCE, RUNS_DIR, SCHEMA, SHARED_SHOWN, TOP_K, Explained, Report,
    StageResult,
)
from sparse_adapt.atomic import atomic_directory, write_atomic
from sparse_adapt.destination import check_not_an_input, check_writable
from sparse_adapt.lock import locked
from sparse_adapt.training.stages import EXPERIMENTS

def train_experiment(
    inputs: ReportInputs, experiment: str, hooks: Hooks = SILENT
) -> Path:
    """Train (or resume/reuse) ``OUT/runs/<experiment>``; returns its ``final`` checkpoint."""
    from sparse_adapt.training.pipeline import run_pipeline

    i = inputs.resolved()
    return run_pipeline(
        base=i.base, corpus=i.corpus, terms=i.terms, dictionary=i.dictionary, train=i.train,
        out=i.out / RUNS_DIR / experiment, stages=EXPERIMENTS[experiment], config=i.train_config(),
        seed=i.seed, hooks=hooks, overwrite=i.overwrite, config_source=i.config_file,
    )


def evaluate_stage(
    name: str, model: str | Path, data: ReportData, primary: str | None = None, *,
    inputs: ReportInputs | None = None, stages: Sequence[str] = (), keep_diagnostics: Path | None = None,
    splade: SpladeEncoder | None = None,
) -> StageResult:
    """Evaluate one checkpoint the way the CLI does and derive the criteria.

    ``primary`` None: chosen by :func:`choose_primary_term`. ``keep_diagnostics``: a
    directory for the full ``diagnose``/``inspect`` JSON of this stage.
    """
    from diagnostics import Sources, diagnose_term, explain_query, inspect_corpus
    from sparse_adapt.retrieval.evaluation import evaluate_per_query, evaluate_run, score_in_memory, top_k

    splade = splade or SpladeEncoder.from_pretrained(model)
    heldout_queries = list(data.heldout_queries or [])
    # One call, so the documents are encoded once for the main and the held-out queries.
    full_run = score_in_memory(splade, data.documents, [*data.queries, *heldout_queries])
    run = {q.qid: full_run[q.qid] for q in data.queries}
    metrics = evaluate_run(data.qrels, run, qids=list(run))
    heldout_metrics = None
    if heldout_queries:
        held = {q.qid: full_run[q.qid] for q in heldout_queries}
        judged_held = any(q in data.heldout_qrels for q in held)
        heldout_metrics = evaluate_run(data.heldout_qrels, held, qids=list(held)) if judged_held else None
    all_qrels = data.all_qrels
    groups = {}
    for g, qids in data.groups.items():
        judged = [q for q in qids if q in all_qrels and q in full_run]
        value = evaluate_run(all_qrels, full_run, (GROUP_METRIC,), qids=judged)[GROUP_METRIC] if judged else None
        groups[g] = {"queries": len(judged), GROUP_METRIC: value}
    per_query = evaluate_per_query(all_qrels, full_run, GROUP_METRIC)
    # Every relevant document fits: "Correct retrieval" compares a query's top-n with its n
    # relevant documents, and a query with 12 could never pass in a top 10.
    most = max((sum(g > 0 for g in judged.values()) for judged in all_qrels.values()), default=0)
    top = top_k(full_run, max(TOP_K, most))

    i = inputs.resolved() if inputs is not None else None
    sources = Sources(
        model=str(model), docs=str(i.corpus) if i else None, terms=str(i.terms) if i else None,
        dictionary=str(i.dictionary) if i else None, train=str(i.train) if i else None,
        reference=str(i.base) if i else None,
    )
    term_names = domain_terms(splade, data)
    primary = primary or choose_primary_term(term_names, data)[0]
    if primary not in term_names:
        term_names = [primary, *term_names]
    summaries = {}
    for t in term_names:
        diagnosis = diagnose_term(splade, t, data.documents, terms=data.terms, queries=data.queries, sources=sources)
        summaries[t] = summarise_term(diagnosis)
        if keep_diagnostics is not None:
            write_atomic(keep_diagnostics / f"diagnose-{slug(t)}.json", to_json(diagnosis.to_dict()))
    stats = inspect_corpus(splade, data.documents, data.queries, data.terms, model=str(model))
    if keep_diagnostics is not None:
        write_atomic(keep_diagnostics / "inspect.json", to_json(stats.to_dict()))
    sparsity = {
        "doc_nonzero_mean": stats.documents.nonzero.mean, "doc_nonzero_median": stats.documents.nonzero.median,
        "query_nonzero_mean": stats.queries.nonzero.mean if stats.queries else None,
        "query_nonzero_median": stats.queries.nonzero.median if stats.queries else None,
        "flops": stats.flops.value if stats.flops else None,
    }
    texts = {q.qid: q.text for q in data.queries}
    explanations = {}
    for q in data.semantic_qids:
        e = explain_query(splade, texts[q], data.documents, EXPLAIN_K, model=str(model))
        explanations[q] = [
            Explained(r.rank, r.doc_id, r.score, [(s.token, s.contribution) for s in r.shared[:SHARED_SHOWN]])
            for r in e.results
        ]
    return StageResult(
        name=name, stages=list(stages), model=str(model), metrics=metrics, heldout_metrics=heldout_metrics,
        groups=groups, per_query=per_query, top=top, terms=summaries,
        criteria=criteria(summaries[primary], data, top), sparsity=sparsity, explanations=explanations,
        judged={"queries": sum(q in data.qrels for q in run),
                **({"held-out queries": sum(q in data.heldout_qrels for q in held)} if heldout_metrics else {})},
    )


def assemble(
    inputs: ReportInputs, data: ReportData, stages: list[StageResult], primary: str, reason: str,
    benchmark: dict | None = None,
) -> Report:
    i = inputs.resolved()
    cfg = i.train_config()
    return Report(
        schema=SCHEMA,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        inputs={
            "base": i.base, "seed": i.seed, "config": cfg.to_dict(), "experiments": list(i.experiments),
            "overrides": config_overrides(cfg.to_dict(), dataclasses.replace(i, config=None).train_config().to_dict()),
            "benchmark": str(benchmark_file(i.benchmark)) if i.benchmark is not None else None,
            **{k: (str(getattr(i, k)) if getattr(i, k) is not None else None) for k in (
                "corpus", "terms", "dictionary", "train", "queries", "qrels", "heldout_queries", "heldout_qrels", "groups")},
        },
        primary_term=primary, primary_term_reason=reason, groups=data.groups, groups_source=data.groups_source,
        notes=list(data.notes),
        relevant={q: relevant_docs(data.qrels, q) for q in data.semantic_qids},
        stages=stages, benchmark=benchmark,
    )


def _check_out(out: Path, overwrite: bool = False, inputs: Sequence[str | Path | None] = ()) -> None:
    """Refuse to write into a non-empty directory that is not a report of ours (unless ``overwrite``).
    An existing file given as ``out`` with ``overwrite`` passes; :func:`build_report` deletes it
    only once the base has loaded, so a base that fails leaves it as it was."""
    check_writable(out, into=True)
    if out.exists() and not out.is_dir():
        if not overwrite:
            raise ConfigError(f"--out {out} is an existing file; a report needs a directory (--overwrite replaces the file)")
        check_not_an_input(out, inputs)  # --overwrite had deleted an input given as --out
        if not out.is_file():
            raise ConfigError(f"--out {out} is not a regular file or directory (a device or a pipe); give a folder")
    kind = output_kind(out) if out.is_dir() else None
    if kind not in (None, "report") and not overwrite:
        raise ConfigError(f"--out {out} holds a `sparse-adapt {kind}` output, not a report: give another --out "
                          "(--overwrite writes the report beside it)")
    if out.is_dir() and holds_files(out) and kind != "report" and not overwrite:
        raise ConfigError(
            f"--out {out} is not empty and holds no report: refusing to write into it "
            f"(--overwrite writes the report beside its files)"
        )


def run_experiment(
    inputs: ReportInputs, data: ReportData, name: str, primary: str, hooks: Hooks = SILENT,
    splade: SpladeEncoder | None = None, trained: Path | None = None,
) -> StageResult:
    """Train (or reuse) experiment ``name`` and evaluate it; ``REFERENCE`` evaluates ``--base``.
    ``trained``: its ``final``, when :func:`train_experiment` already ran.

    The full diagnose/inspect JSON goes to ``OUT/diagnostics/<name>/``, replaced as a whole (an
    earlier report's files of terms this one lacks had stayed beside the new ones).
    """
    i = inputs.resolved()
    model = str(i.base) if name == REFERENCE else str(trained or train_experiment(i, name, hooks))
    hooks.message(f"evaluating {name}: metrics, diagnostics of every domain term, sparsity")
    with atomic_directory(i.out / DIAGNOSTICS_DIR / name) as keep:
        result = evaluate_stage(
            name, model, data, primary, inputs=i, stages=EXPERIMENTS.get(name, ()),
            keep_diagnostics=keep, splade=splade,
        )
    if name != REFERENCE:
        refresh_card(Path(model), result)
    return result


def refresh_card(final: Path, result: StageResult) -> None:
    """Rewrite the model card of an experiment's ``final`` model with the metrics measured here."""
    import json

    from sparse_adapt.modeling.card import write_model_card
    from sparse_adapt.training.pipeline import LOG_FILE, RUN_FILE
    from sparse_adapt.training.rundir import stage_ends

    evaluation = {f"queries ({result.judged['queries']})": result.metrics}
    if result.heldout_metrics:
        evaluation[f"held-out queries ({result.judged['held-out queries']})"] = result.heldout_metrics
    manifest = json.loads((final.parent / RUN_FILE).read_text(encoding="utf-8"))
    records = stage_ends(final.parent / LOG_FILE)
    write_model_card(final, SpladeEncoder.from_pretrained(final), manifest, records, evaluation)


def build_report(inputs: ReportInputs, hooks: Hooks = SILENT) -> Report:
    """Train or reuse every experiment, evaluate base + each, write the report files."""
    i = inputs.resolved()
    data = load_report_data(i)  # every input validated before the first training step
    cfg = i.train_config()  # refuses a bad --config before any training
    benchmark = load_benchmark(i.benchmark) if i.benchmark is not None else None
    if benchmark is not None:
        differences = benchmark_differences(benchmark, i.base, cfg.to_dict())
        if differences:
            note = (f"the benchmark {benchmark_file(i.benchmark)} was run with another {' and '.join(differences)}: "
                    "its tables describe those models, not this report's")
            hooks.message(f"warning: {note}")
            data.notes.append(note)
    _check_out(i.out, i.overwrite, i.paths())
    base = SpladeEncoder.from_pretrained(i.base)
    primary, reason = choose_primary_term(domain_terms(base, data), data, i.term)
    hooks.message(f"primary term: {primary} ({reason})")
    if i.out.is_file():  # --overwrite replaces it (checked above); the report is a folder
        i.out.unlink()
    results = []
    with locked(i.out):
        # Every run first: a rerun refused for changed inputs stops before anything is evaluated,
        # not after the base's diagnostics were rewritten for inputs report.json does not describe.
        finals = {}
        for name in i.experiments:
            hooks.message(f"--- {name}: {' + '.join(EXPERIMENTS[name])}")
            finals[name] = train_experiment(i, name, hooks)
        for name in (REFERENCE, *i.experiments):
            results.append(run_experiment(i, data, name, primary, hooks, splade=base if name == REFERENCE else None,
                                          trained=finals.get(name)))
        report = assemble(i, data, results, primary, reason, benchmark)
        write_report(report, i.out)
    return report
