"""The case-study report: the spec's four experiments on the user's data, side by side.

``build_report(ReportInputs(...))`` trains (or reuses) one run per experiment under
``OUT/runs/<H>`` with :func:`sparse_adapt.training.pipeline.run_pipeline` (H1 = distill
only, H2 = + extend, H3 = + warmup, H4 = + dictionary), evaluates the base and every run,
and writes ``OUT/report.md`` with PNG plots beside it and ``OUT/report.json`` with the
same numbers. Every number comes from the functions the CLI uses, so the report agrees
with ``sparse-adapt evaluate``, ``diagnose`` and ``inspect`` run on the same checkpoint;
the full diagnose/inspect JSON of every stage is kept under ``OUT/diagnostics/<stage>/``.

The spec judges each experiment by a table of criteria for one query (q11, which
describes the domain without naming its term) and one term ("Gatrocraptic"). Here the
query is every main (not held-out) query of a ``*semantic*`` group and the term is the
*primary term*: the domain term found in most relevant documents of the ``*semantic*``
groups' queries, held-out ones included (``--term`` overrides).

Modules: ``inputs.py`` (files, groups, terms), ``criteria.py``, ``results.py`` (data
types), ``experiments.py`` (train + evaluate + assemble), ``markdown.py``, ``figures.py``,
``files.py``; ``adapt.py`` (``adapt``'s summary); the benchmark: ``domains.py``,
``benchmark.py``, ``benchmark_md.py``, ``pooled.py`` and ``paired.py`` (its significance
tests). Like the CLI, this package composes the core and ``diagnostics``; neither
imports it. The steps are public so the case-study notebook can tell the story one
experiment at a time with the same code.
"""

from sparse_adapt.report.criteria import FAIL, NA, PASS, TermSummary, criteria
from sparse_adapt.report.experiments import (
    assemble, build_report, evaluate_stage, run_experiment, train_experiment,
)
from sparse_adapt.report.files import write_report
from sparse_adapt.report.inputs import (
    ReportData, ReportInputs, choose_primary_term, derive_groups, domain_terms, load_report_data,
)
from sparse_adapt.report.markdown import criteria_markdown, render_markdown, reproduce_commands, summary_markdown
from sparse_adapt.report.results import REFERENCE, Report, StageResult

__all__ = [
    "FAIL", "NA", "PASS", "REFERENCE", "Report", "ReportData", "ReportInputs", "StageResult", "TermSummary",
    "assemble", "build_report", "choose_primary_term", "criteria", "criteria_markdown", "derive_groups",
    "domain_terms", "evaluate_stage", "load_report_data", "render_markdown", "reproduce_commands", "run_experiment",
    "summary_markdown", "train_experiment", "write_report",
]
