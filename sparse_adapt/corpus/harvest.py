"""Dictionary entries harvested from the corpus (``sparse-adapt build-dictionary``).

Per term (case variants are one term), in the spec's entry format
``{"term", "definition", "examples"}``:

- **definition**: the first definitional sentence about the term, by the patterns of
  :data:`DEFINITION_PATTERNS` in order ("X is defined as ...", "X refers to ...",
  "X means ...", "X, or Y, is ...", "X is a ...", "X (...)", "X, a ...,", "... called X", "X is ..." opening a
  sentence); the matched
  description becomes the definition.
  Without any, the *context* fallback: the sentence using the term that shares the most
  words with the term's other sentences (its most typical use), whole; one with fewer than
  two words besides terms is none, and a term with no other sentence gets no entry.
  Among the matches of one pattern, and among the fallback's candidates, a sentence naming
  fewer *other* domain terms wins: a definition of X written about Y teaches the dictionary
  stage that X means Y (on the suite's corpora the most typical sentence was often the one
  linking two terms, being long and sharing words with both).
- **examples**: up to ``MAX_EXAMPLES`` usage contexts, a window of ``EXAMPLE_WORDS`` words
  around an occurrence, each from a different document where possible.

Harvested entries carry ``"harvested": {"definition": "<doc_id>: <pattern>", "examples":
[doc_ids]}`` (with ``--glosses``, also ``"glosses": [lemmas]`` when the definition has some):
which fields were harvested and from where (the loaders ignore the key).
Entries a user wrote (``--dictionary``) are kept unchanged, first, and win: a term they cover
(its key equals, or is a word of, the user entry's term) gets no harvested entry.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Sequence

from sparse_adapt.corpus.glosses import Gloss
from sparse_adapt.corpus.text import TermGroup, bounded, dotted_terms, key, sentences, spellings, window, words
from sparse_adapt.data import DictionaryEntry, Document
from sparse_adapt.errors import SparseAdaptError
from sparse_adapt.progress import SILENT, Hooks, counted

MAX_EXAMPLES = 3
# The spec's examples are short phrases ("Velotraxin 20 mg once daily after joint replacement").
EXAMPLE_WORDS = 10
# A description longer than this is cut at a word boundary: MLM sees the term's context, not an essay.
MAX_DEFINITION_WORDS = 40
# Lay-word glosses appended to a harvested definition (--glosses): the term's two most
# widespread technical words, explained.
MAX_GLOSSES = 2

# (name, regex with {t} for the term and a group "d" for the description), in order of trust.
DEFINITION_PATTERNS: tuple[tuple[str, str], ...] = (
    ("is defined as", r"{t}\s+(?:is|are)\s+defined\s+as\s+(?P<d>[^;]+)"),
    ("refers to", r"{t}\s+(?:refers|refer)\s+to\s+(?P<d>[^;]+)"),
    ("means", r"{t}\s+(?:means|mean|denotes|stands\s+for)\s+(?P<d>[^;]+)"),
    # An acronym's expansion set off before its verb: "The SBCR, or steady-batch cycle rate, is ...";
    # only where its initials spell the acronym (_expands): "the MTBF, or the uptime, is" is no definition.
    ("or", r"{t},\s+or\s+(?P<d>[^,;]+),\s+(?:is|are|was|were)\b"),
    ("is a", r"{t}\s+(?:is|are|was|were)\s+(?P<d>(?:a|an|the|one)\s+[^;]+)"),
    ("parenthesis", r"{t}\s+\((?P<d>[^)]{3,})\)"),
    ("appositive", r"{t},\s+(?P<d>(?:a|an|the)\s+[^,;]+),"),
    ("called", r"(?P<d>\b(?:a|an|the)\s+[^,;.]+?),?\s+(?:called|known\s+as|named)\s+{t}"),
    # Weakest: the term as the subject of any "is/are" clause ("Kelquidone is reserved for ...").
    ("is", r"^{t}\s+(?:is|are)\s+(?P<d>[^;]+)"),
)


@dataclass
class HarvestedDefinition:
    text: str
    doc_id: str
    source: str  # a pattern name, or "context"
    sentence: str  # the sentence it came from (examples prefer other sentences)


def _trim(text: str, term: re.Pattern | None = None) -> str:
    """``text``'s first MAX_DEFINITION_WORDS words; with ``term``, a window of that many that
    holds its first use (a context sentence naming the term at word 47 lost it)."""
    w = text.strip().rstrip(".").split()
    found = term.search(text) if term is not None else None
    start = 0
    if found is not None and len(w) > MAX_DEFINITION_WORDS:
        at = len(text[: found.start()].split())  # the term's word index
        start = max(0, min(at - MAX_DEFINITION_WORDS // 2, len(w) - MAX_DEFINITION_WORDS))
    return " ".join(w[start : start + MAX_DEFINITION_WORDS])


def _uses(group: TermGroup, documents: Sequence[Document]) -> list[tuple[str, str]]:
    """(doc_id, sentence) for every sentence using the term, in corpus order."""
    wanted = set(group.doc_ids)
    pattern = group.pattern
    dotted = dotted_terms([group])
    return [(d.doc_id, s) for d in documents if d.doc_id in wanted for s in sentences(d.text, dotted) if pattern.search(s)]


def _other_terms(sentence: str, others: Sequence[TermGroup]) -> int:
    return sum(1 for g in others if g.pattern.search(sentence))


# Words an expansion may hold that its acronym skips ("MoA, or mechanism of action").
_UNSPELT = frozenset({"of", "and", "for", "the", "to", "in", "on", "a", "an", "&"})


def _expands(acronym: str, expansion: str) -> bool:
    """Whether ``expansion`` spells ``acronym``: every word (parts of a hyphenated word count as
    words) gives the next letter by its initial and maybe more, in order, from within it, and
    small words may give none: "steady-batch cycle rate" for SBCR, "mechanism of action" for
    MoA, "open authorization 2" for OAuth2, "deoxyribonucleic acid" for DNA."""
    letters = [c for c in acronym.casefold() if c.isalnum()]
    parts = [w.strip("\"'“”‘’()[]") for w in re.split(r"[\s\-/–—]+", expansion.casefold())]
    parts = [w for w in parts if w]

    def spells(i: int, j: int) -> bool:  # letters[i:] from parts[j:]
        if i == len(letters) or j == len(parts):
            return i == len(letters) and all(w in _UNSPELT for w in parts[j:])
        word = parts[j]
        if word in _UNSPELT and spells(i, j + 1):
            return True
        if word[0] != letters[i]:
            return False
        k, at = i + 1, 1
        while True:  # this word gives letters[i:k]; the next word goes on from k
            if spells(k, j + 1):
                return True
            if k == len(letters) or (at := word.find(letters[k], at)) < 0:
                return False
            k, at = k + 1, at + 1

    return len(letters) >= 2 and spells(0, 0)


def find_definition(
    group: TermGroup, uses: Sequence[tuple[str, str]], others: Sequence[TermGroup] = ()
) -> HarvestedDefinition | None:
    """The best definition among ``uses``; ``others`` are the run's other terms. None when no
    sentence says more than terms ("XR-7200." alone): such a definition teaches nothing."""
    term = spellings((group.key, *group.forms))
    mentions = [_other_terms(s, others) for _, s in uses]
    for name, template in DEFINITION_PATTERNS:
        rx = re.compile(template.replace("{t}", bounded(term)), re.IGNORECASE)
        found = [
            (n, i, m) for i, ((_, s), n) in enumerate(zip(uses, mentions))
            if (m := rx.search(s)) and len(m.group("d").split()) >= 2
            and (name != "or" or any(_expands(f, m.group("d")) for f in (group.key, *group.forms)))
        ]
        if found:
            _, i, m = min(found, key=lambda f: f[:2])
            return HarvestedDefinition(_trim(m.group("d")), uses[i][0], name, uses[i][1])
    # Context fallback: the most typical sentence, by word overlap with the term's other uses.
    bags = [{key(w) for w in words(s)} - {group.key} for _, s in uses]
    patterns = [g.pattern for g in (group, *others)]  # compiled once, not per word
    saying = [i for i, (_, s) in enumerate(uses)
              if sum(not any(p.fullmatch(w) for p in patterns) for w in words(s)) >= 2]
    if not saying:
        return None
    fewest = min(mentions[i] for i in saying)
    best = max(
        (i for i in saying if mentions[i] == fewest),
        key=lambda i: (sum(len(bags[i] & b) for j, b in enumerate(bags) if j != i), -i),
    )
    doc_id, sentence = uses[best]
    return HarvestedDefinition(_trim(sentence, group.pattern), doc_id, "context", sentence)


def find_examples(group: TermGroup, uses: Sequence[tuple[str, str]], skip: str | None) -> list[tuple[str, str]]:
    """(doc_id, window) contexts, one per document first, the definition's sentence last."""
    ordered = [u for u in uses if u[1] != skip] + [u for u in uses if u[1] == skip]
    picked: list[tuple[str, str]] = []
    seen_docs: set[str] = set()
    for pass_ in (0, 1):  # first one per document, then any
        for doc_id, sentence in ordered:
            if len(picked) == MAX_EXAMPLES:
                return picked
            if pass_ == 0 and doc_id in seen_docs:
                continue
            spans = list(re.finditer(r"\S+", sentence))  # the words of sentence.split(), with where each begins
            toks = [m.group() for m in spans]
            # The sentence is searched whole, not word by word: a term of two words is in no one word.
            hit = group.pattern.search(sentence)
            at = bisect_right([m.start() for m in spans], hit.start()) - 1 if hit else 0
            text = " ".join(window(toks, at, EXAMPLE_WORDS, EXAMPLE_WORDS // 3)).strip(" ,;:")
            if any(text == p for _, p in picked):
                continue
            picked.append((doc_id, text))
            seen_docs.add(doc_id)
    return picked


def _covered(group: TermGroup, user: Sequence[DictionaryEntry]) -> bool:
    return any(group.key == key(e.term) or group.key in {key(w) for w in words(e.term)} for e in user)


def find_glosses(group: TermGroup, selected: dict[str, list[Gloss]]) -> list[Gloss]:
    """Up to MAX_GLOSSES lay-word glosses for the term from ``selected`` (``doc_id -> [Gloss]``,
    ``glosses.select_glosses``): the words glossed in most of its documents first, then by
    their rank in the first document that has them."""
    count: dict[str, int] = {}
    first: dict[str, tuple[int, int, Gloss]] = {}
    for i, d in enumerate(group.doc_ids):
        for j, g in enumerate(selected.get(d, [])):
            count[g.lemma] = count.get(g.lemma, 0) + 1
            first.setdefault(g.lemma, (i, j, g))
    ranked = sorted(first, key=lambda lemma: (-count[lemma], first[lemma][:2]))
    return [first[lemma][2] for lemma in ranked[:MAX_GLOSSES]]


def build_dictionary(
    documents: Sequence[Document], groups: Sequence[TermGroup], existing: Sequence[DictionaryEntry] = (),
    hooks: Hooks = SILENT, glosses: dict[str, list[Gloss]] | None = None,
) -> list[dict]:
    """Dictionary records: the user's entries unchanged, then one harvested entry per other term;
    with ``glosses`` (``glosses.select_glosses``), its definition is followed by lay-word
    glosses (:func:`find_glosses`)."""
    records: list[dict] = [{"term": e.term, "definition": e.definition, "examples": list(e.examples)} for e in existing]
    task = hooks.task("harvesting definitions", len(groups))
    for g in groups:
        task.advance()
        if _covered(g, existing):
            continue
        uses = _uses(g, documents)
        if not uses:  # locate_terms found it in a document but no sentence split kept it whole
            continue
        definition = find_definition(g, uses, [o for o in groups if o is not g])
        if definition is None:
            hooks.message(f"no dictionary entry for {g.display}: no sentence of the corpus says more about it than "
                          "terms (write one with --dictionary)")
            continue
        examples = find_examples(g, uses, skip=definition.sentence)
        lay = find_glosses(g, glosses) if glosses else []
        harvested = {"definition": f"{definition.doc_id}: {definition.source}", "examples": [doc_id for doc_id, _ in examples]}
        if lay:
            harvested["glosses"] = [x.lemma for x in lay]
        records.append({
            "term": g.display,
            "definition": "; ".join([definition.text, *(f"{x.word}: {x.text}" for x in lay)]),
            "examples": [text for _, text in examples],
            "harvested": harvested,
        })
    if not records:
        raise SparseAdaptError(
            f"no dictionary entry can be harvested for the {counted(len(groups), 'term')}: no sentence of the corpus "
            "says more about one than terms do; write the entries yourself (--dictionary)"
        )
    return records
