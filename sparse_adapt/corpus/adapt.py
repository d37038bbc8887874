"""``sparse-adapt adapt``: a corpus in, an adapted model out.

mine terms -> harvest a dictionary -> general-English pretraining (a base that is no trained
SPLADE) -> pseudo-labelled training data -> the staged pipeline
(``training.pipeline.run_pipeline``, stages H4) -> ``DIR/final``. A file the user gives
(``terms``, ``dictionary``, ``train``) is used as it is, never copied or written; every
generated file goes into ``DIR`` for inspection and editing:

| file | what |
|---|---|
| ``DIR/adapt.json`` | what this run is (corpus and given files' sha256, base, teacher, options) |
| ``DIR/domain_terms.json``, ``DIR/mining.json`` | mined terms (the spec's format); every candidate's score and its parts, ``kept`` marking the mined ones |
| ``DIR/dictionary.jsonl`` | harvested entries (``"harvested"`` marks the fields and their documents) |
| ``DIR/train.jsonl`` | pseudo-queries with hard negatives and teacher scores |
| ``DIR/heldout_queries.jsonl``, ``heldout_qrels.tsv``, ``query_groups.json`` | every ``HOLDOUT_EVERY``-th pseudo-query, never trained on, for the evaluation summary |
| ``DIR/generated.json`` | the terms file each generated input was made from (``provenance.py``) |
| ``DIR/pretrained/`` | the base after general-English pretraining (``pretrain``; bases that are no trained SPLADE) |
| ``DIR/training/`` | the pipeline's run directory (``run.json``, checkpoints, ``train_log.jsonl``) |
| ``DIR/final/`` | the adapted model: 0.5 x ``training/distill`` + 0.5 x ``training/extend`` (``ADAPT_SETTINGS``) |

A rerun resumes: a generated file already in ``DIR`` is reused (so an edited one is what
trains; the rerun then refuses to mix it into an older run and says so; an unedited
dictionary or training data made from an edited terms file is made again), the pipeline
resumes after its last finished stage, and ``DIR/final`` is copied again only when
``training/final`` was rewritten (its ``made_from.json`` differs), so an edited card stays (and when
it is replaced, an edited card is first copied to ``DIR/final-card.edited.md``). A rerun with another corpus, base, teacher, options,
seed, config or given files is refused, as is a ``DIR`` holding anything but an adapt run (``adapt_folder.py``).
"""

from __future__ import annotations

import functools
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sparse_adapt.atomic import atomic_directory, write_atomic, write_json_atomic
from sparse_adapt.corpus.adapt_folder import (
    FINAL, GENERATED, HELDOUT, MANIFEST, PRETRAINED, RUN_OUTPUTS, TRAINING, AdaptMismatchError, card_sha256, check_out,
    discard_run, keep_edited_card, not_a_run, pseudo_data_done,
)
from sparse_adapt.corpus.glosses import select_glosses
from sparse_adapt.corpus.harvest import build_dictionary
from sparse_adapt.corpus.mining import (
    DEFAULT_MIN_COUNT, DEFAULT_TOP, NEXT_SHOWN, known_words_note, mine_with_rest, terms_json,
)
from sparse_adapt.corpus.provenance import MADE_FROM_TERMS, record, record_unrecorded, recorded_notes, refresh
from sparse_adapt.corpus.pseudo import DEFAULT_MAX_QUERIES, DEFAULT_NEGATIVES, DEFAULT_SIBLINGS, make_train
from sparse_adapt.corpus.teacher import DEFAULT_TEACHER, Teacher, load_teacher
from sparse_adapt.corpus.text import locate_terms
from sparse_adapt.data import file_sha256, load_dictionary, load_documents, load_domain_terms, load_train, read_record
from sparse_adapt.errors import ConfigError, SparseAdaptError
from sparse_adapt.lock import locked
from sparse_adapt.modeling.card import CARD_FILE
from sparse_adapt.progress import Hooks, SILENT, counted
from sparse_adapt.training.general import pretrained_base
from sparse_adapt.training.validation import teacher_grade

# run_adapt's keywords that shape the generated inputs (mining and make-train), which a
# benchmark passes through, so they can be measured (README "A larger corpus").
GENERATION = ("top", "min_count", "max_queries", "negatives", "siblings", "term_labels")
# Every 5th pseudo-query is held out: 20% for evaluation, 80% to train on.
HOLDOUT_EVERY = 5
# adapt's own defaults, under the base's recommended settings and --config. The final model
# is 0.5 x the distilled model + 0.5 x the `extend` checkpoint (WiSE-FT, training/interpolation.py):
# distillation on pseudo-queries cropped from ~40 documents overshoots, and averaging back
# towards the starting point recovered held-out paraphrases on the dev domains
# (offline-minilm from the corpus alone +0.021 nDCG@10 on 74 queries, p = 0.070 per query, above the
# adopting rule's 0.05; hand-written inputs +0.029, p = 0.013, on which, and on no dev configuration
# harmed, it was kept (thirty-seventh session); offline-splade-tiny -0.004 / +0.004, p > 0.4; explicit
# queries up, controls unchanged everywhere; 0.3 and 0.7 not better than 0.5; bench/RESULTS.md, rules L-N).
# `train` keeps 0: on the bundled case study 0.5 lowers gatrocraptic's weight in d21 below the spec's
# 2.0 and lets d26 into q11's top 5 (6 of 8 criteria).
ADAPT_SETTINGS = {"distill": {"interpolate": 0.5}}


@dataclass
class AdaptFiles:
    terms: Path
    dictionary: Path
    train: Path
    generated: list[str] = field(default_factory=list)  # which of the three are generated (now or by an earlier run)
    heldout_queries: Path | None = None
    heldout_qrels: Path | None = None
    query_groups: Path | None = None


@dataclass
class AdaptResult:
    files: AdaptFiles
    final: Path
    training: Path
    notes: dict = field(default_factory=dict)  # counts of what was mined, harvested, kept
    pretrained: Path | None = None  # DIR/pretrained, when the run trained from its general-English pretraining


def write_jsonl(path: Path, records: list[dict]) -> None:
    write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def _split_heldout(records: list[dict]) -> tuple[list[dict], list[dict]]:
    """(train, held out): every HOLDOUT_EVERY-th record, at least one, never all: of 2 or more
    records, which ``make_train`` guarantees (it refuses fewer, naming the cause)."""
    if len(records) < 2:
        raise ValueError(f"{len(records)} pseudo-labelled records cannot be split into train and held out")
    held_at = {i for i in range(len(records)) if i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1} or {len(records) - 1}
    return [r for i, r in enumerate(records) if i not in held_at], [records[i] for i in sorted(held_at)]


def _heldout_paths(out: Path, files: AdaptFiles) -> None:
    """Point ``files`` at the held-out queries, qrels and groups ``make-train`` writes into ``out``."""
    files.heldout_queries, files.heldout_qrels = out / HELDOUT["queries"], out / HELDOUT["qrels"]
    files.query_groups = out / HELDOUT["groups"]


def _write_heldout(out: Path, held: list[dict], files: AdaptFiles) -> None:
    _heldout_paths(out, files)
    groups: dict[str, list[str]] = {}
    for r in held:
        groups.setdefault(f"heldout-pseudo-{r['kind']}", []).append(r["qid"])
    qrels = "".join(
        f"{r['qid']} 0 {d} {teacher_grade(s)}\n" for r in held for d, s in zip(r["doc_ids"], r["teacher_scores"])
    )
    write_atomic(files.heldout_qrels, qrels)
    write_json_atomic(files.query_groups, groups)
    write_jsonl(files.heldout_queries, [{"qid": r["qid"], "text": r["query"]} for r in held])


def _to_generate(out: Path, dictionary: Path | None, train: Path | None) -> tuple[bool, bool]:
    """Whether the dictionary and the pseudo-labelled data are still to be made in ``out``
    (neither given nor left by an earlier run): what needs the teacher, and what gets made."""
    return dictionary is None and not (out / "dictionary.jsonl").is_file(), train is None and not pseudo_data_done(out)


def prepare_inputs(
    corpus: Path, out: Path, base: str, *, terms: Path | None, dictionary: Path | None, train: Path | None,
    teacher: Teacher | None, seed: int, top: int, min_count: int, max_queries: int, negatives: int, siblings: int,
    term_labels: bool, glosses: bool, hooks: Hooks, lang: str = "en", encoder: Callable[[], str] | None = None,
) -> tuple[AdaptFiles, dict]:
    """The three training inputs: the user's, reused from ``out``, or generated into ``out``.

    ``base`` gives the tokenizer terms are mined with; ``encoder``, called only when the
    pseudo-labels are made, the model that mines their hard negatives (``adapt``: the base
    after pretraining, which keeps the tokenizer); None: ``base``."""
    documents = load_documents(corpus)
    notes: dict = {}
    files = AdaptFiles(terms or out / GENERATED["terms"], dictionary or out / GENERATED["dictionary"],
                       train or out / GENERATED["train"])
    files.generated = [name for name, given in (("terms", terms), ("dictionary", dictionary), ("train", train)) if given is None]
    if terms is None and not files.terms.is_file():
        from sparse_adapt.modeling.builtin import load_tokenizer

        candidates, scored = mine_with_rest(documents, load_tokenizer(base), top=top, min_count=min_count, hooks=hooks,
                                            lang=lang)
        write_json_atomic(out / "mining.json", [{**c.to_dict(), "kept": i < top} for i, c in enumerate(scored)])
        write_json_atomic(files.terms, terms_json(candidates))
        hooks.message(f"mined {counted(len(candidates), 'term')}: {', '.join(c.term for c in candidates)} -> {files.terms}")
        if note := known_words_note(candidates, files.terms, " and rerun: this run trains them as jargon"):
            hooks.message(f"note: {note}")
        if len(scored) > top:
            hooks.message(f"{len(scored) - top} more candidate terms scored below the cut (--top {top}; the next: "
                          f"{', '.join(c.term for c in scored[top:top + NEXT_SHOWN])}); {out / 'mining.json'} lists all "
                          f"{len(scored)}; an edited {files.terms.name} keeps a term you need (keeping them all with a higher "
                          "--top scored lower on a larger corpus: README, 'A larger corpus')")
    groups = locate_terms(documents, load_domain_terms(files.terms), files.terms)
    make_dictionary, make_pseudo = _to_generate(out, dictionary, train)
    for name, made_now, given in (("dictionary", make_dictionary, dictionary), ("train", make_pseudo, train)):
        if given is None and not made_now:
            record_unrecorded(out, name, files.terms)
    # One selection serves both the dictionary and the queries (it scores every gloss on the corpus).
    selected = select_glosses(documents, groups, teacher, hooks=hooks) if glosses and (make_dictionary or make_pseudo) else None
    if make_dictionary:
        write_jsonl(files.dictionary, build_dictionary(documents, groups, hooks=hooks, glosses=selected))
        record(out, "dictionary", files.terms)
        hooks.message(f"harvested {counted(len(groups), 'dictionary entry', 'dictionary entries')} -> {files.dictionary}")
    if train is None:
        if not make_pseudo:
            _heldout_paths(out, files)
            if (made := recorded_notes(out, "train")) is not None:  # a resumed run's summary keeps the counts
                notes["make_train"] = made
        else:
            from sparse_adapt.modeling.encoder import SpladeEncoder

            records, stats = make_train(
                documents, groups, SpladeEncoder.from_pretrained(encoder() if encoder else base), teacher,
                seed=seed, max_queries=max_queries, negatives=negatives, siblings=siblings, term_labels=term_labels,
                glosses=selected, hooks=hooks, lang=lang,
            )
            fit, held_out = _split_heldout(records)
            write_jsonl(files.train, fit)
            _write_heldout(out, held_out, files)
            notes["make_train"] = {**stats.__dict__, "train": len(fit), "heldout": len(held_out)}
            record(out, "train", files.terms, notes["make_train"])
            hooks.message(f"pseudo-labelled {counted(len(records), 'query', 'queries')} ({len(fit)} train, {len(held_out)} held out) -> {files.train}")
    return files, notes


def adapt_run_of(model: str | Path) -> Path | None:
    """The adapt run ``DIR`` when ``model`` is its ``DIR/final`` (or ``DIR/training/final``)."""
    path = Path(model)
    if path.name != FINAL:
        return None
    return next((run for run in (path.parent, path.parent.parent) if (run / MANIFEST).is_file()), None)


def generated_inputs(model: str | Path) -> dict[str, Path]:
    """The inputs ``adapt`` generated for ``model`` when it is an adapt run's ``DIR/final`` (or
    ``DIR/training/final``): ``{"terms" | "dictionary" | "train": path}`` for those ``DIR``
    holds; files the run took from the user are not in ``DIR`` and not returned."""
    run = adapt_run_of(model)
    if run is None:
        return {}
    manifest = read_record(run / MANIFEST)
    given = manifest.get("given") or {}
    if not manifest or not isinstance(given, dict):  # a damaged manifest: nothing known to be generated
        return {}
    return {k: run / name for k, name in GENERATED.items() if given.get(k) is None and (run / name).is_file()}


def run_adapt(
    corpus: str | Path, out: str | Path, base: str = "offline-minilm", *, terms: str | Path | None = None,
    dictionary: str | Path | None = None, train: str | Path | None = None, config: str | Path | None = None,
    teacher: str = DEFAULT_TEACHER, seed: int = 0, top: int = DEFAULT_TOP, min_count: int = DEFAULT_MIN_COUNT,
    max_queries: int = DEFAULT_MAX_QUERIES, negatives: int = DEFAULT_NEGATIVES, siblings: int = DEFAULT_SIBLINGS,
    term_labels: bool = True, glosses: bool = False, pretrain: bool | None = None, overwrite: bool = False,
    keep: tuple[Path, ...] = (), lang: str = "auto", hooks: Hooks = SILENT,
) -> AdaptResult:
    """Generate what is missing, train, and return where everything is (see the module docstring).

    ``pretrain``: give the base general-English pretraining (``DIR/pretrained``, after the
    dictionary and before the pseudo-labels, with ``GeneralConfig``'s defaults and seed 0
    whatever ``seed`` is: it does not depend on the corpus); None: when the base is a built-in
    that is no trained SPLADE (``offline-minilm``).
    ``overwrite``: discard a different run found in ``out`` instead of refusing, except the
    given inputs and ``keep`` (files the caller reads later). ``lang``: the corpus's language
    for mining (``language.py``); ``auto`` detects it.
    """
    from sparse_adapt.corpus.language import ENGLISH, resolve_language
    from sparse_adapt.corpus.text import corpus_warnings
    from sparse_adapt.modeling.builtin import check_base, needs_pretraining
    from sparse_adapt.training.config_files import load_config
    from sparse_adapt.training.pipeline import run_pipeline
    from sparse_adapt.training.rundir import (
        FINAL as RUN_FINAL, RunMismatchError, complete, final_record, part_holding, saved_checkpoints,
    )

    corpus, out = Path(corpus), Path(out)
    given = {k: (None if v is None else Path(v)) for k, v in (("terms", terms), ("dictionary", dictionary), ("train", train))}
    documents = load_documents(corpus)  # validates the corpus too
    lang, guess = resolve_language(lang, (d.text for d in documents))
    noted = corpus_warnings(documents)
    checks = {"terms": load_domain_terms, "dictionary": load_dictionary, "train": load_train}
    for name, path in given.items():
        if path is not None:
            checks[name](path)
    load_config(config, base, ADAPT_SETTINGS)
    check_base(str(base))  # a missing local base or a near miss of a built-in name fails before --out is made
    pretrain = needs_pretraining(base) if pretrain is None else pretrain
    manifest = {
        "corpus": file_sha256(corpus), "base": str(base), "teacher": str(teacher), "seed": int(seed),
        "options": {"top": top, "min_count": min_count, "max_queries": max_queries, "negatives": negatives,
                    "siblings": siblings, "term_labels": term_labels, "glosses": glosses,
                    "pretrain": pretrain, "lang": lang},
        "given": {k: (None if p is None else file_sha256(p)) for k, p in given.items()},
        "config": None if config is None else file_sha256(Path(config)),
    }
    part = part_holding(out, base, RUN_OUTPUTS)
    if part is not None:  # --overwrite would delete it before it loads
        raise ConfigError(f"--base {base} is {out / part}, part of the adapt run in {out}: copy it elsewhere first, "
                          "or give another --out")
    inputs = (corpus, *(p for p in given.values() if p is not None), *([Path(config)] if config else []), *keep)
    if out.exists() and not out.is_dir():  # before the lock, which makes the directory
        raise AdaptMismatchError(not_a_run(out))
    # --overwrite may discard the run it finds: a teacher it would need loads first, or a typo in
    # --teacher deleted a finished run and left DIR without its manifest.
    may_need = given["train"] is None or (glosses and given["dictionary"] is None)
    early = load_teacher(teacher) if overwrite and may_need and (out / MANIFEST).is_file() else None
    with locked(out):  # one writer: two runs into one --out mixed their manifests and inputs;
        # taken before the check, which --overwrite follows by discarding the run it finds
        check_out(out, manifest, overwrite, tuple(Path(p) for p in inputs), hooks)
        for note in (*noted, guess.warning() if guess is not None else None):
            if note:
                hooks.message(f"warning: {note}")
        if lang != ENGLISH:
            evidence = f" ({guess.describe()})" if guess else ""
            teacher_note = ("; the default teacher reads English only: --teacher a cross-encoder for the language"
                            if teacher == DEFAULT_TEACHER else "")
            hooks.message(f"language: {lang!r}{evidence}; terms are mined and crops trimmed against it{teacher_note}")
        # Generated inputs made from a terms file edited since are made again (provenance.py),
        # unless a model was trained on them: remade first and refused after, they no longer
        # matched DIR/training, DIR/final or the summary, and the error blamed "an edited file?".
        terms_file = given["terms"] or out / GENERATED["terms"]
        stale = refresh(out, terms_file, dry=True)
        if stale and saved_checkpoints(out / TRAINING) and not overwrite:
            made = " and ".join(MADE_FROM_TERMS[name][0] for name in stale)
            raise AdaptMismatchError(
                f"{terms_file} was edited since {out / TRAINING} was trained: pass --overwrite to make {made} again "
                f"from it and train again (only {out / TRAINING} goes), or delete {out / TRAINING}")
        refresh(out, terms_file, hooks)
        # The teacher loads before anything is written: one that fails leaves no half-made run.
        make_dictionary, make_pseudo = _to_generate(out, given["dictionary"], given["train"])
        needs_teacher = make_pseudo or (glosses and make_dictionary)
        scorer = (early or load_teacher(teacher)) if needs_teacher else None
        fresh = not (out / MANIFEST).is_file()
        if fresh:
            write_json_atomic(out / MANIFEST, manifest)
        # Terms and the dictionary come before the pretraining: they need the tokenizer alone, which
        # pretraining keeps, so the mined terms show in seconds rather than after half an hour, and a
        # user who stops there to edit them loses no training. The pseudo-labels wait for it.
        @functools.cache  # once: called for the pseudo-labels, if made, and for training
        def start() -> str:
            if not pretrain:
                return str(base)
            if given["terms"] is None and not complete(out / PRETRAINED):
                hooks.message(f"to change the mined terms, stop now (Ctrl-C), edit {terms_file} and rerun: the "
                              "pretraining resumes from its last checkpoint")
            return pretrained_base(base, out / PRETRAINED, hooks)

        try:
            files, notes = prepare_inputs(
                corpus, out, str(base), terms=given["terms"], dictionary=given["dictionary"], train=given["train"],
                teacher=scorer, seed=seed, top=top, min_count=min_count, max_queries=max_queries,
                negatives=negatives, siblings=siblings, term_labels=term_labels, glosses=glosses, hooks=hooks, lang=lang,
                encoder=start,
            )
        except SparseAdaptError:
            if fresh:  # what this run generated goes: a rerun with the options the error suggests is then no other run
                discard_run(out, (*inputs, out / MANIFEST))
            raise
        base = start()
        cards = {card_sha256(out / TRAINING / RUN_FINAL / CARD_FILE)}  # the card DIR/final was copied with, if unedited
        try:  # the same adapt run: what differs in training/ is a generated file edited since it trained
            trained = run_pipeline(
                base=base, corpus=corpus, terms=files.terms, dictionary=files.dictionary, train=files.train,
                out=out / TRAINING, config=load_config(config, base, ADAPT_SETTINGS), seed=seed, hooks=hooks,
                overwrite=overwrite, config_source=config,
            )
        except RunMismatchError as e:
            raise AdaptMismatchError(
                f"{out / TRAINING} was trained on other {', '.join(e.differences) or 'inputs'} than {out}'s files hold "
                f"now (an edited generated file?): pass --overwrite to train again on them (only {out / TRAINING} "
                f"goes), or delete {out / TRAINING}"
            ) from None
        made = final_record(trained)
        if made is None or made != final_record(out / FINAL):
            keep_edited_card(out, cards | {card_sha256(trained / CARD_FILE)}, hooks)
            with atomic_directory(out / FINAL) as tmp:
                shutil.copytree(trained, tmp, dirs_exist_ok=True)
        # else: the copy of this very training/final is kept, with any edit to its card
        hooks.message(f"adapted model: {out / FINAL}")
        return AdaptResult(files=files, final=out / FINAL, training=out / TRAINING, notes=notes,
                           pretrained=out / PRETRAINED if pretrain else None)
