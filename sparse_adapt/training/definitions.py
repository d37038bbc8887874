"""Definition queries: the dictionary's definitions as extra distillation queries.

A dictionary entry says in plain words what a term means; a user who does not know the
term describes it in such words. So each entry becomes one training query: its definition
(which never needs to name the term), with the corpus documents that name the term as
positives and the other documents that the distill stage's starting model ranks highest for it as hard
negatives: look-alike distractors and documents about the domain's *other* terms (without
those, a definition query learns to fire every domain term, and a query naming one
product code starts retrieving the others). All seven distillation terms then act on it
like on a teacher-scored query: query expansion makes the definition fire its term,
ranking and contrast put the term's documents above the negatives.

The scores stand in for a teacher's on the scale of ``train.jsonl`` (positives up to 10,
hard negatives -8): :data:`POSITIVE` and :data:`NEGATIVE`.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from sparse_adapt.data import DictionaryEntry, Document, TrainExample, mentions_term

POSITIVE = 10.0
NEGATIVE = -8.0


def entry_words(entry: DictionaryEntry, terms: Sequence[str]) -> list[str]:
    """The words that mark a document as naming the entry: the domain terms its name
    contains ("Fenwarra" for "Fenwarra starter"), else its whole name."""
    inside = [t for t in terms if mentions_term(entry.term, [t])]
    return inside or [entry.term]


def definition_examples(
    dictionary: Sequence[DictionaryEntry], documents: Sequence[Document], terms: Sequence[str], splade, negatives: int,
    chosen_negatives: Mapping[str, Sequence[str]] | None = None,
) -> list[TrainExample]:
    """One example per entry whose term some document names; ``negatives`` hard negatives each.

    ``chosen_negatives``: query id -> the negatives' document ids (:func:`negative_ids`) chosen
    when the stage started; a stage resumed mid-way takes them instead of asking its
    half-trained model, so it trains on the lists an unbroken run trains on.
    """
    from sparse_adapt.retrieval.evaluation import score_in_memory
    from sparse_adapt.data import Query

    chosen = []
    for i, entry in enumerate(dictionary):
        positives = [d for d in documents if mentions_term(d.text, entry_words(entry, terms))]
        if positives:
            chosen.append((f"definition-{i + 1}", entry, positives))
    if not chosen:
        return []
    run = {} if chosen_negatives is not None else score_in_memory(
        splade, documents, [Query(qid, e.definition) for qid, e, _ in chosen])
    by_id = {d.doc_id: d for d in documents}
    out = []
    for qid, entry, positives in chosen:
        if chosen_negatives is not None:
            ranked = [by_id[i] for i in chosen_negatives.get(qid, ()) if i in by_id]
        else:
            scored = run.get(qid, {})
            named = {d.doc_id for d in positives}
            others = [d for d in documents if d.doc_id not in named]
            ranked = sorted(others, key=lambda d: (-scored.get(d.doc_id, 0.0), d.doc_id))[:negatives]
        docs = [*positives, *ranked]
        out.append(TrainExample(
            qid, entry.definition, tuple(d.doc_id for d in docs), tuple(d.text for d in docs),
            tuple([POSITIVE] * len(positives) + [NEGATIVE] * len(ranked)),
        ))
    return out


def negative_ids(examples: Sequence[TrainExample]) -> dict[str, list[str]]:
    """Query id -> the hard negatives' document ids of definition examples, for a checkpoint."""
    return {ex.qid: [d for d, score in zip(ex.doc_ids, ex.teacher_scores) if score == NEGATIVE] for ex in examples}
