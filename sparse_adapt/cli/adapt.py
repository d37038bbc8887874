"""Bring-your-own-corpus commands: ``mine-terms``, ``build-dictionary``, ``make-train``, ``adapt``.

Each writes its output atomically and refuses to overwrite a file it was given as input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sparse_adapt.cli.output import BASE_HELP, FILE_PATH, console, seed_option, warn, wrote
from sparse_adapt.corpus.language import check_language
from sparse_adapt.modeling.hub import user_path
from sparse_adapt.progress import signed

TEACHER_HELP = (
    "offline-minilm (default: the dense all-MiniLM-L6-v2 bi-encoder, cosine) or a Hugging Face cross-encoder "
    "(hub id or directory)."
)


FILE_OVERWRITE_HELP = "Replace --out if it exists (never one of the inputs). --force is the same flag's older name."
GLOSSES_HELP = (
    "Lay-word glosses (Open English WordNet) of the corpus's rare nouns, kept where the teacher's best document "
    "for them names a domain term: appended to harvested definitions and asked as extra domain-semantic queries."
)


def _check_out(out: Path, overwrite: bool, *inputs: Optional[Path]) -> None:
    """Never write over an input, nor over an existing file unless asked: it may be hand-edited.
    A directory, or a path under a file, is refused before any work (``check_output``)."""
    from sparse_adapt.destination import check_output

    check_output(out, overwrite, kind="file", inputs=inputs)


# The generation options of mine-terms and make-train, shared with adapt so that the two
# spell them alike. The defaults are the library's (corpus.mining.DEFAULT_TOP ...; a test
# checks): importing those here would load torch for every command's --help.
TOP_OPTION = typer.Option(20, "--top", min=1, help="How many terms to keep, best first.")
MIN_COUNT_OPTION = typer.Option(2, "--min-count", min=1, help="Documents a term must appear in.")
MAX_QUERIES_OPTION = typer.Option(60, "--max-queries", min=2,
                                  help="At most this many pseudo-queries (2 or more: one to train on, one to hold out).")
NEGATIVES_OPTION = typer.Option(7, "--negatives", min=1, help="Hard negatives per query.")
SIBLINGS_OPTION = typer.Option(3, "--siblings", min=0,
                               help="Documents sharing the source's domain term added to each list (0: none).")
TERM_LABELS_OPTION = typer.Option(True, "--term-labels/--teacher-labels",
                                  help="Floor a term's other documents at +2 and cap the other side of the domain "
                                       "line at 0 (default), or keep the teacher's scores as they are.")

LANG_HELP = ("Language of the corpus for general-language word frequencies (wordfreq code: en, de, fr...); "
             "auto: English unless the corpus's words are clearly more common in another language.")


def _language(lang: str, documents) -> str:
    """The language code to mine with; a detected one is said, with the evidence (and the
    corpus's markup, repeated documents and decomposed accents, which every generator would
    otherwise take in silently)."""
    from sparse_adapt.corpus.language import ENGLISH, resolve_language
    from sparse_adapt.corpus.text import corpus_warnings

    for note in corpus_warnings(documents):
        warn(note)
    code, guess = resolve_language(lang, (d.text for d in documents))
    if guess is not None and code != ENGLISH:
        console.print(f"language: {code!r} ({guess.describe()}); --lang en to treat the corpus as English")
    if guess is not None and guess.warning():
        warn(guess.warning())
    return code


def mine_terms(
    corpus: Path = typer.Option(..., "--corpus", help="docs.jsonl of your corpus."),
    out: Path = typer.Option(..., "--out", **FILE_PATH, help="domain_terms.json to write (category -> terms)."),
    base: str = typer.Option("offline-minilm", "--base", help=BASE_HELP + " Its tokenizer counts pieces."),
    top: int = TOP_OPTION,
    min_count: int = MIN_COUNT_OPTION,
    explain: bool = typer.Option(False, "--explain", help="Print each score's parts."),
    lang: str = typer.Option("auto", "--lang", help=LANG_HELP),
    overwrite: bool = typer.Option(False, "--overwrite", "--force", help=FILE_OVERWRITE_HELP),
) -> None:
    """Mine candidate domain terms: rare in the language, fragmented by the tokenizer, acronyms and codes."""
    from sparse_adapt.atomic import write_json_atomic
    from sparse_adapt.cli.output import rich_hooks
    from sparse_adapt.corpus.mining import NEXT_SHOWN, known_words_note, mine_with_rest, terms_json
    from sparse_adapt.data import load_documents
    from sparse_adapt.modeling.builtin import load_tokenizer

    _check_out(out, overwrite, corpus, user_path(base))
    check_language(lang)
    documents = load_documents(corpus)
    lang = _language(lang, documents)
    with rich_hooks() as hooks:
        candidates, scored = mine_with_rest(documents, load_tokenizer(base), top=top, min_count=min_count, hooks=hooks,
                                            lang=lang)
    write_json_atomic(out, terms_json(candidates))
    table = Table(title=f"{len(candidates)} of {len(scored)} candidate terms" if len(scored) > top
                  else f"{len(candidates)} candidate terms")
    columns = ["#", "term", "category", "score", "docs"]
    if explain:
        columns += ["frequency", "rarity", "fragmentation", "pattern", "zipf", "pieces"]
    for c in columns:
        table.add_column(c, justify="left" if c in ("term", "category", "pieces") else "right")
    for i, c in enumerate(candidates, 1):
        row = [str(i), Text(c.term), Text(c.category), f"{c.score:.2f}", str(c.documents)]
        if explain:
            row += [f"{c.parts[k]:.2f}" for k in ("frequency", "rarity", "fragmentation", "pattern")]
            row += [f"{c.zipf:.2f}", Text(" ".join(c.pieces))]
        table.add_row(*row)
    console.print(table)
    if len(scored) > top:
        console.print(f"{len(scored) - top} more scored below the cut (the next: "
                      f"{escape(', '.join(c.term for c in scored[top:top + NEXT_SHOWN]))}); --top {len(scored)} keeps them all")
    if explain:
        console.print(f"score = frequency log2(docs) + rarity (4 - Zipf in general {lang!r}) "
                      "+ fragmentation log2(pieces) + pattern (1 for capitals, digits, joiners)")
    if note := known_words_note(candidates, out):
        warn(note)
    wrote(out)


def build_dictionary(
    corpus: Path = typer.Option(..., "--corpus", help="docs.jsonl of your corpus."),
    terms: Path = typer.Option(..., "--terms", help="domain_terms.json."),
    out: Path = typer.Option(..., "--out", **FILE_PATH, help="dictionary.jsonl to write."),
    dictionary: Optional[Path] = typer.Option(
        None, "--dictionary", help="Your own entries: kept unchanged, and they win over harvested ones."
    ),
    glosses: bool = typer.Option(False, "--glosses", help=GLOSSES_HELP + " Here: definitions only."),
    teacher: str = typer.Option("offline-minilm", "--teacher", help="With --glosses, picks and checks them: " + TEACHER_HELP),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Run code shipped with the teacher."),
    overwrite: bool = typer.Option(False, "--overwrite", "--force", help=FILE_OVERWRITE_HELP),
) -> None:
    """Harvest a definition and usage examples per term from the corpus."""
    from sparse_adapt.cli.output import rich_hooks
    from sparse_adapt.corpus.adapt import write_jsonl
    from sparse_adapt.corpus.glosses import select_glosses
    from sparse_adapt.corpus.harvest import build_dictionary as harvest
    from sparse_adapt.corpus.teacher import load_teacher
    from sparse_adapt.corpus.text import corpus_warnings, locate_terms
    from sparse_adapt.data import flat_terms, load_dictionary, load_documents, load_domain_terms, mentions_term

    _check_out(out, overwrite, corpus, terms, dictionary, *(user_path(teacher),) * glosses)
    documents = load_documents(corpus)
    for note in corpus_warnings(documents):  # markup and repeats end up in harvested definitions and examples
        warn(note)
    existing = load_dictionary(dictionary) if dictionary is not None else []
    domain_terms = load_domain_terms(terms)
    groups = locate_terms(documents, domain_terms, terms)
    stray = [e.term for e in existing if not mentions_term(e.term, flat_terms(domain_terms))]
    if stray:  # as `train` says of such entries
        warn(f"{dictionary}: {len(stray)} of {len(existing)} entries define a term that is not in {terms} "
             f"(e.g. {stray[0]!r}); no domain token learns from them")
    scorer = load_teacher(teacher, trust_remote_code=trust_remote_code) if glosses else None
    with rich_hooks() as hooks:
        selected = select_glosses(documents, groups, scorer, hooks=hooks) if scorer is not None else None
        records = harvest(documents, groups, existing, hooks=hooks, glosses=selected)
    write_jsonl(out, records)
    table = Table(title=f"{len(records)} entries")
    for c in ("term", "definition from", "definition"):
        table.add_column(c)
    for r in records:
        source = r["harvested"]["definition"] if "harvested" in r else "yours"
        table.add_row(Text(r["term"]), source, Text(r["definition"] if len(r["definition"]) <= 90 else r["definition"][:89] + "…"))
    console.print(table)
    wrote(out)


def make_train(
    corpus: Path = typer.Option(..., "--corpus", help="docs.jsonl of your corpus."),
    terms: Path = typer.Option(..., "--terms", help="domain_terms.json."),
    out: Path = typer.Option(..., "--out", **FILE_PATH, help="train.jsonl to write."),
    teacher: str = typer.Option("offline-minilm", "--teacher", help=TEACHER_HELP),
    base: str = typer.Option("offline-minilm", "--base", help=BASE_HELP + " It mines the hard negatives."),
    seed: int = seed_option("Seeds the crops."),
    max_queries: int = MAX_QUERIES_OPTION,
    negatives: int = NEGATIVES_OPTION,
    siblings: int = SIBLINGS_OPTION,
    term_labels: bool = TERM_LABELS_OPTION,
    glosses: bool = typer.Option(False, "--glosses", help=GLOSSES_HELP + " Here: the queries only."),
    lang: str = typer.Option("auto", "--lang", help=LANG_HELP + " Here: the function words trimmed off crops."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Run code shipped with the teacher."),
    overwrite: bool = typer.Option(False, "--overwrite", "--force", help=FILE_OVERWRITE_HELP),
) -> None:
    """Pseudo-queries from the documents, hard negatives from the base, scores from a teacher."""
    from sparse_adapt.cli.output import rich_hooks
    from sparse_adapt.corpus.adapt import write_jsonl
    from sparse_adapt.corpus.pseudo import make_train as build
    from sparse_adapt.corpus.glosses import select_glosses
    from sparse_adapt.corpus.language import ENGLISH
    from sparse_adapt.corpus.teacher import DEFAULT_TEACHER, load_teacher
    from sparse_adapt.corpus.text import locate_terms
    from sparse_adapt.data import load_documents, load_domain_terms
    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.modeling.truncation import longer_than, truncated

    _check_out(out, overwrite, corpus, terms, user_path(base), user_path(teacher))
    check_language(lang)
    documents = load_documents(corpus)
    lang = _language(lang, documents)
    if lang != ENGLISH and teacher == DEFAULT_TEACHER:  # as `adapt` says it
        warn(f"the corpus is {lang!r} and the default teacher reads English only: --teacher a cross-encoder for the "
             "language")
    groups = locate_terms(documents, load_domain_terms(terms), terms)
    scorer = load_teacher(teacher, trust_remote_code=trust_remote_code)
    splade = SpladeEncoder.from_pretrained(base)
    cut = truncated(splade, [d.text for d in documents], "document")
    if cut:  # said here as `adapt`'s summary says it: make-train alone never reaches that summary
        warn(f"{longer_than(len(cut), len(documents), splade.max_length('document'))}: queries, negatives and "
             "labels come from their start only; split long documents into passages (e.g. by paragraph)")
    with rich_hooks() as hooks:
        selected = select_glosses(documents, groups, scorer, hooks=hooks) if glosses else None
        records, stats = build(documents, groups, splade, scorer, seed=seed, max_queries=max_queries,
                               negatives=negatives, siblings=siblings, term_labels=term_labels, glosses=selected,
                               hooks=hooks, lang=lang)
    write_jsonl(out, records)
    table = Table(title=f"{len(records)} training queries (teacher {scorer.name})")
    for c in ("kind", "generated", "kept"):
        table.add_column(c)
    for kind, n in stats.generated.items():
        table.add_row(kind, str(n), str(stats.kept.get(kind, 0)))
    console.print(table)
    console.print(f"dropped: {stats.dropped_unseparated} the teacher could not separate, "
                  f"{stats.dropped_source_negative} whose source document it scored <= 0; "
                  f"{stats.term_adjusted} candidate scores made term-consistent")
    wrote(out)


def adapt(
    ctx: typer.Context,
    corpus: Path = typer.Option(..., "--corpus", help="docs.jsonl of your corpus: the only input needed."),
    out: Path = typer.Option(..., "--out", help="Run directory: generated inputs, training/, final/, summary.json."),
    base: str = typer.Option("offline-minilm", "--base", help=BASE_HELP),
    terms: Optional[Path] = typer.Option(None, "--terms", help="Your domain_terms.json instead of mined terms."),
    dictionary: Optional[Path] = typer.Option(None, "--dictionary", help="Your dictionary.jsonl instead of a harvested one."),
    train: Optional[Path] = typer.Option(None, "--train", help="Your train.jsonl instead of pseudo-labelled data."),
    config: Optional[Path] = typer.Option(None, "--config", help="Training config overrides (JSON or TOML), as for train; over adapt's own distill.interpolate = 0.5."),
    teacher: str = typer.Option("offline-minilm", "--teacher", help=TEACHER_HELP),
    queries: Optional[Path] = typer.Option(None, "--queries", help="Your queries.jsonl, evaluated in the summary."),
    qrels: Optional[Path] = typer.Option(None, "--qrels", help="qrels of --queries."),
    groups: Optional[Path] = typer.Option(
        None, "--groups", help="query_groups.json ({group: \\[qid, ...]}) of --queries: the summary scores each group too.",
    ),
    seed: int = seed_option("Seeds crops and training; a rerun reproduces the run."),
    top: int = TOP_OPTION,
    min_count: int = MIN_COUNT_OPTION,
    max_queries: int = MAX_QUERIES_OPTION,
    negatives: int = NEGATIVES_OPTION,
    siblings: int = SIBLINGS_OPTION,
    term_labels: bool = TERM_LABELS_OPTION,
    glosses: bool = typer.Option(False, "--glosses/--no-glosses", help=GLOSSES_HELP),
    pretrain: Optional[bool] = typer.Option(
        None, "--pretrain/--no-pretrain",
        help="General-English pretraining of the base, after mining and before the training data (as "
             "`sparse-adapt pretrain`, into DIR/pretrained). Default: for a built-in base that is no trained SPLADE "
             "(offline-minilm).",
    ),
    lang: str = typer.Option("auto", "--lang", help=LANG_HELP),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Discard a different adapt run found in --out instead of refusing "
        "(its generated files, training/ and final/; files you give this command and pretrained/ stay).",
    ),
) -> None:
    """Mine terms, harvest a dictionary, pseudo-label training data, train, and summarise; rerun resumes."""
    from sparse_adapt.cli.output import rich_hooks
    from sparse_adapt.corpus.adapt import run_adapt
    from sparse_adapt.report.adapt import SUMMARY, QuerySet, adapt_summary

    # usage errors, so the line names the command and its --help as click's own do
    if (queries is None) != (qrels is None):
        ctx.fail("--queries and --qrels go together")
    if groups is not None and queries is None:
        ctx.fail("--groups splits --queries into groups: give --queries and --qrels too")
    # Read now, not at the summary: a malformed file found after training would cost the whole run.
    yours = QuerySet.load("your queries", queries, qrels, groups) if queries is not None else None
    for line in yours.warnings if yours is not None else ():
        warn(line)
    if yours is not None and yours.skipped:
        warn(f"{groups}: groups naming none of {queries}'s queries are not scored: {', '.join(yours.skipped)}")
    with rich_hooks() as hooks:
        result = run_adapt(corpus, out, base, terms=terms, dictionary=dictionary, train=train, config=config,
                           teacher=teacher, seed=seed, top=top, min_count=min_count, max_queries=max_queries,
                           negatives=negatives, siblings=siblings, term_labels=term_labels,
                           glosses=glosses, pretrain=pretrain, overwrite=overwrite,
                           keep=tuple(p for p in (queries, qrels, groups) if p is not None), lang=lang, hooks=hooks)
        summary = adapt_summary(result, corpus, base, yours, hooks)
    table = Table(title="nDCG@10, base vs adapted")
    for c in ("queries", "group", "n", "base", "adapted", "change", "base + --feedback", "adapted + --feedback"):
        label = c in ("queries", "group")
        # labels fold, not "…": in a narrow terminal three groups were cut to the same "heldout-…"
        table.add_column(c, justify="left" if label else "right", overflow="fold" if label else "ellipsis")
    for r in summary["evaluation"]:
        table.add_row(r["set"], Text(r["group"]), str(r["queries"]), f"{r['base']:.3f}", f"{r['adapted']:.3f}",
                      signed(r['adapted'] - r['base']), f"{r['base_feedback']:.3f}", f"{r['feedback']:.3f}")
    if summary["evaluation"]:
        console.print(table)
        if summary["pretrained"] is not None:  # where the domain stages started: the table's gain is partly its
            for name in dict.fromkeys(r["set"] for r in summary["evaluation"]):
                scores = ", ".join(f"{r['group']} {r['pretrained']:.3f}" for r in summary["evaluation"]
                                   if r["set"] == name)
                console.print(f"{name}, nDCG@10 of {summary['pretrained']} (the general-English pretraining the "
                              f"domain stages started from): {scores}", highlight=False, markup=False)
    else:  # an empty table said nothing of why
        console.print("nDCG@10: no queries to compare the base and the adapted model on (a given --train makes no "
                      "held-out pseudo-queries): pass --queries and --qrels you wrote to measure them")
    domain = summary["inspect"]["domain"]
    terms_table = Table(title="domain tokens: mean weight in documents using / not using them")
    for c in ("token", "docs using", "weight using", "weight not using"):
        terms_table.add_column(c, justify="left" if c == "token" else "right")
    for t in domain["tokens"]:
        fmt = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
        terms_table.add_row(Text(t["token"]), str(t["docs_occurring"]), fmt(t.get("mean_weight_occurring")),
                            fmt(t.get("mean_weight_not_occurring")))
    console.print(terms_table)
    for line in summary["warnings"]:
        warn(line)
    console.print(f"[green]adapted model[/green] {escape(str(result.final))}; generated: {', '.join(result.files.generated) or 'nothing'}; "
                  f"summary: {escape(str(out / SUMMARY))}")


def register(app: typer.Typer) -> None:
    app.command("mine-terms")(mine_terms)
    app.command("build-dictionary")(build_dictionary)
    app.command("make-train")(make_train)
    app.command("adapt")(adapt)
