"""Candidate domain terms mined from a corpus (``sparse-adapt mine-terms``).

The spec's recipe: scan the corpus for tokens with unusual patterns (multiple capitals,
embedded numbers, hyphenation) and for terms the tokenizer fragments into many subwords.
Every word of the corpus (``text.WORD``) is a candidate of one category by its shape:

- ``codes``: letters and digits with a joiner or several digits (``XR-7200``, ``HV-31a``);
- ``acronyms``: two or more capitals (``PRVT``, ``cQTx``, ``OAuth2``);
- ``jargon``: anything else, kept only when it is rare in general English and the base
  tokenizer splits it into at least ``MIN_PIECES`` pieces (``gatrocraptic``), or into two
  when general English never uses it at all (``vardle`` -> ``var ##dle``, Zipf 0).

Kept candidates are used in at least ``min_count`` documents and are not common in the
corpus's language (wordfreq's Zipf frequency below ``COMMON_ZIPF``, except a code wordfreq
splits into words, whose value is its parts': ``IL-6`` 4.3; English unless told or
detected otherwise, ``language.py``). Not candidates: words of URLs and e-mail addresses;
quantities (``100ms``, ``24h``, ``23rd``, ``60Hz``, ``10GB``: digits then at most three letters,
but for an acronym such as ``2FA``: :func:`quantity`) and
measures (``24-hour``, ``10-20mg``, ``15-Mar-2024``: a number joined to those, to common words,
to months or numbers, :func:`measure`); encoded
data (hex digests, UUIDs, base64: :func:`encoded`); a
word of five or more capitals that general English uses (``CAUTION``, a heading: held to the
jargon bound like the word; ``API`` stays an acronym); and,
in a corpus of at least ``BOILERPLATE_MIN_DOCS`` documents, a word used in more than
``BOILERPLATE_SHARE`` of them (a footer, a company name): it tells no documents apart, and as
a term it would make every document relevant to every query using it (the words left out so
are named, as the corpus's subject can be among them). Their score is a sum of four parts, each
on a log scale so that none dominates by units alone (``--explain`` prints them):

    score = frequency + rarity + fragmentation + pattern
    frequency     = log2(documents using it)           used across the corpus, not once
    rarity        = COMMON_ZIPF - zipf(word)             orders of magnitude rarer than a common word of the language
    fragmentation = log2(pieces in the base tokenizer)   the model cannot represent it whole
    pattern       = 1 if capitals/digits/joiners else 0  the shapes the spec names
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import asdict, dataclass, field
from typing import Sequence

from sparse_adapt.corpus.text import key, term_pattern, words
from sparse_adapt.data import Document
from sparse_adapt.errors import SparseAdaptError
from sparse_adapt.modeling.tokenization import running_text_ids
from sparse_adapt.progress import Hooks, SILENT, counted

CATEGORIES = ("jargon", "acronyms", "codes")
# A word the tokenizer keeps in one or two pieces is represented well enough already.
MIN_PIECES = 3
# Zipf 4 = 10 per million words ("package", "protocol"); above it a word is common English
# and no domain term. Jargon must be rarer still: below 3, once per million words.
COMMON_ZIPF = 4.0
RARE_JARGON_ZIPF = 3.0
# Shorter plain words are mostly abbreviations of common words ("mg", "ml").
MIN_JARGON_LENGTH = 4
DEFAULT_TOP = 20
DEFAULT_MIN_COUNT = 2
# How many words below the cut the commands name ("the next: ...").
NEXT_SHOWN = 5
# Capitals alone make an acronym of a word this short; from this length on, one that general
# English uses (Zipf >= RARE_JARGON_ZIPF) is that word in capitals.
CAPITALISED_WORD_LENGTH = 5
# A word in more than 4 of 5 documents is the corpus's boilerplate or its whole subject.
BOILERPLATE_SHARE = 0.8
BOILERPLATE_MIN_DOCS = 5
# Links and addresses are not prose: their parts ("acmeflow-industries", "newsletter_2024") are no terms.
# A host name without scheme ("docs.acme-cloud.io/setup") counts when it ends in a common
# top-level domain: "Node.js" and "Synkro.js" are names, not hosts.
# Not "in", "info", "int", "app", "dev": System.in, logger.info, MANIFEST.in are names in code.
_TLD = "com|org|net|io|ai|co|edu|gov|biz|cloud|de|uk|fr|eu|ch|nl|us|ca|au|jp|cn"
_LINK = re.compile(rf"\b(?:https?://|www\.)\S+|\S+@\S+\.\w+|\b(?:[\w-]+\.)+(?:{_TLD})\b(?![\w-])(?:/\S*)?")
_QUANTITY = re.compile(r"\d+(?:[.,]\d+)?[^\W\d_]{1,3}")
# A number then two or three capitals is an acronym ("2FA", "4WD", "3DS") unless the capitals
# are a unit or an ordinal ("10GB", "5PM", "2ND" in a shouted heading); one capital ("5G", "4K",
# "9V") is a unit as often as a name and stays a quantity. Not units here, being names as often:
# PC ("2PC", two-phase commit; pieces are PCS), MA.
_UNIT_CAPITALS = frozenset(
    # data, power, frequency, metric, time, ordinals and clock
    "GB MB KB TB PB GW MW KW KWH WH AH MAH HP DB VA KVA KV VAC VDC RMS AM PM ST ND RD TH MG ML KG CM MM KM NM UM "
    "HZ MHZ GHZ KHZ RPM PSI MPH KPH BPM FPS PPM PPB HR HRS MIN SEC MS YR YRS WK MO MOS YO "
    # imperial and retail units, counts, resolutions, time zones
    "LB LBS OZ FT YD MI SQ GAL QT PT MPG BTU CFM AWG TPI GSM MIL CC PCS PK EA MP MPX DPI PPI HD FHD UHD "
    "EST EDT CST CDT MST MDT PST PDT GMT UTC BST CET CEST IST AEST".split()
)


def quantity(word: str) -> bool:
    """A number with at most three letters of unit ("100ms", "24h", "23rd", "60Hz", "10GB"),
    not a digit-led acronym ("2FA")."""
    if not _QUANTITY.fullmatch(word):
        return False
    letters = word.lstrip("0123456789.,")
    return not (len(letters) >= 2 and letters.isupper() and letters not in _UNIT_CAPITALS)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_ORDINAL = re.compile(r"\d+(?:st|nd|rd|th)", re.IGNORECASE)
_MONTHS = frozenset("jan feb mar apr may jun jul aug sep sept oct nov dec".split())
# Encoded data is no vocabulary: a base64 image repeated in every page's markup, hex digests,
# UUIDs. Measured on 2,900 pieces of random base64 of 20+ characters: their letter/digit
# segments ("i", "VBO", "Rw", "0") average 1.9 characters (99% under 2.9); CamelCase names and
# codes average 3 or more ("SuperDuperTurboMax3000": 4.4; "PowerEdgeR740xd": 3.0).
ENCODED_LENGTH = 20  # a word's characters besides joiners; hex needs only HEX_LENGTH
HEX_LENGTH = 16  # a 64-bit id; "XR-7200" and "HV-31a" are codes
ENCODED_SEGMENT = 3.0
# A base64 run this long is removed from the text before words are taken: split at "+" and "/",
# its pieces would each need to look encoded.
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/=]{64,}")
_DATA_URI = re.compile(r"\bdata:[\w.+/-]*(?:;[\w.+-]+(?:=[\w.+-]*)?)*;base64,[A-Za-z0-9+/=]*")  # no two ways to split a run
_SEGMENT = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_HEX = frozenset("0123456789abcdefABCDEF")


class MiningError(SparseAdaptError):
    """The corpus yields no candidate term."""


@dataclass
class Candidate:
    term: str  # the form the corpus uses most
    category: str
    score: float
    parts: dict[str, float]  # frequency, rarity, fragmentation, pattern (they sum to score)
    documents: int
    occurrences: int
    zipf: float  # wordfreq's Zipf frequency of the lowercased term in the corpus's language
    pieces: list[str]  # how the base tokenizer splits it
    forms: list[str] = field(default_factory=list)  # every surface form in the corpus, most used first

    def to_dict(self) -> dict:
        return asdict(self)


def shape(word: str) -> tuple[str, bool]:
    """(category, has an unusual pattern) of one word by its characters alone."""
    digits = sum(c.isdigit() for c in word)
    letters = sum(c.isalpha() for c in word)
    capitals = sum(c.isupper() for c in word)
    joined = "-" in word or "_" in word
    if digits and letters and (joined or digits >= 2):
        return "codes", True
    if capitals >= 2:
        return "acronyms", True
    return "jargon", joined or bool(digits)


def _segment_length(text: str) -> float:
    """Mean length of ``text``'s letter and digit segments ("PowerEdgeR740xd": Power Edge R 740 xd)."""
    return len(text) / max(1, len(_SEGMENT.findall(text)))


def encoded(word: str) -> bool:
    """Whether ``word`` is encoded data (a hex digest or UUID, base64) rather than a term."""
    bare = word.replace("-", "").replace("_", "")
    if len(bare) >= HEX_LENGTH and set(bare) <= _HEX and any(c.isdigit() for c in bare) and any(c.isalpha() for c in bare):
        return True
    return len(bare) >= ENCODED_LENGTH and _segment_length(bare) < ENCODED_SEGMENT


def without_encoded(text: str) -> str:
    """``text`` without its data URIs and long base64 runs (embedded files)."""
    text = _DATA_URI.sub(" ", text)
    return _BASE64_RUN.sub(lambda m: " " if _segment_length(m.group().replace("+", "").replace("/", "").replace("=", "")) < 2 * ENCODED_SEGMENT
                           else m.group(), text)


def _split_code(term: str, category: str, lang: str) -> bool:
    """A code wordfreq reads as several words ("IL-6" -> "il", "6"): its Zipf value is that of
    the parts together (4.3 for IL-6, common words both), not of the code, so it is no reason
    to call the code common English."""
    from wordfreq import tokenize

    return category == "codes" and len(tokenize(term.casefold(), lang)) > 1


def measure(word: str, lang: str = "en") -> bool:
    """A number joined to units, common words or other numbers: a duration, range or date
    ("24-hour", "3-year-old", "10-20mg", "15-Mar-2024"), or an ordinal's ("3rd-party",
    "1st-line"), no term. Its shape made it a code,
    and wordfreq splitting it exempted it from the common-English test (:func:`_split_code`)."""
    first, *rest = re.split(r"[-_]", word)
    # A common word counts only in lower case: "24-hour" is a measure, "1-Wire", "5-Axis" and
    # "6-MP" are names.
    return bool(rest) and bool(_NUMBER.fullmatch(first) or _ORDINAL.fullmatch(first)) and all(
        _NUMBER.fullmatch(p) or quantity(p) or p.casefold() in _MONTHS
        or (p.islower() and general_zipf(p, lang) >= COMMON_ZIPF)
        for p in rest
    )


def general_zipf(word: str, lang: str = "en") -> float:
    """Zipf frequency of ``word`` in the general language ``lang`` (wordfreq; 0 for unseen words)."""
    from wordfreq import zipf_frequency

    return float(zipf_frequency(word.casefold(), lang))


def mine_terms(
    documents: Sequence[Document],
    tokenizer,
    top: int = DEFAULT_TOP,
    min_count: int = DEFAULT_MIN_COUNT,
    hooks: Hooks = SILENT,
    lang: str = "en",
) -> list[Candidate]:
    """The ``top`` best candidates, best first; :class:`MiningError` when there is none."""
    return mine_with_rest(documents, tokenizer, top, min_count, hooks, lang)[0]


def mine_with_rest(
    documents: Sequence[Document], tokenizer, top: int = DEFAULT_TOP, min_count: int = DEFAULT_MIN_COUNT,
    hooks: Hooks = SILENT, lang: str = "en",
) -> tuple[list[Candidate], list[Candidate]]:
    """``(the top best candidates, every candidate a higher top would keep)``, both best first:
    what the cut kept, and what a user should see fell below it."""
    if top < 1:
        raise MiningError(f"--top must be >= 1 (got {top})")
    scored = score_candidates(documents, tokenizer, min_count, hooks, lang)
    # Every candidate is checked, below the cut too: the commands name the next ones and say
    # how high a --top keeps them all. Cheap: the search stops at a word's first document
    # (172 candidates of 4,320 documents: 0.27 s, against 0.74 s to score them).
    findable, unfound = [], []
    for c in scored:
        if _findable(c, documents):
            findable.append(c)
        elif len(findable) < top:  # it would have taken a place in the cut: say why it did not
            unfound.append(c)
    kept = findable[:top]
    if unfound:
        hooks.message(f"left out {counted(len(unfound), 'mined word')} the later steps cannot find as a whole word "
                      f"(next to a joiner or inside unspaced script): {', '.join(c.term for c in unfound[:5])}")
        if not kept:
            raise MiningError(f"no candidate term of the corpus can be found as a whole word (e.g. "
                              f"{unfound[0].term!r}); write a terms file (--terms)")
    return kept, findable


def _findable(candidate: Candidate, documents: Sequence[Document]) -> bool:
    """Whether the whole-word search every later step uses (``text.TermGroup.pattern``) finds
    the term: mining splits words otherwise ("--quuxify", unspaced script), and a term the
    dictionary, the queries and the training cannot find fails them all."""
    pattern = term_pattern(key(candidate.term), *candidate.forms)  # forms: every spelling, the term's included
    return any(pattern.search(d.text) for d in documents)


def score_candidates(
    documents: Sequence[Document], tokenizer, min_count: int = DEFAULT_MIN_COUNT, hooks: Hooks = SILENT,
    lang: str = "en",
) -> list[Candidate]:
    """Every candidate, best first (``mine_terms`` keeps the first ``top``): a corpus of many
    topics can hold more real terms than the default cut, and the user sees what fell below it."""
    if min_count < 1:
        raise MiningError(f"--min-count must be >= 1 (got {min_count})")
    docs_of: dict[str, set[str]] = {}
    forms_of: dict[str, dict[str, int]] = {}
    task = hooks.task("mining terms", len(documents))
    for d in documents:
        for w in words(without_encoded(_LINK.sub(" ", d.text))):
            if not any(c.isalpha() for c in w) or len(w) < 2 or quantity(w):
                continue
            k = key(w)
            docs_of.setdefault(k, set()).add(d.doc_id)
            forms = forms_of.setdefault(k, {})
            w = unicodedata.normalize("NFC", w)  # one spelling, however the text composed its accents
            forms[w] = forms.get(w, 0) + 1
        task.advance()
    out: list[Candidate] = []
    everywhere: list[str] = []  # would be candidates but for BOILERPLATE_SHARE
    most = len(documents) * BOILERPLATE_SHARE if len(documents) >= BOILERPLATE_MIN_DOCS else len(documents)
    for k, doc_set in docs_of.items():
        if len(doc_set) < min_count:
            continue
        # The most used spelling; a tie goes to one not in capitals (those are headings), then the
        # first in code-point order: the first one seen made the term, its category and score
        # depend on the order of the documents.
        forms = sorted(forms_of[k].items(), key=lambda kv: (-kv[1], kv[0].isupper(), kv[0]))
        term = forms[0][0]
        if encoded(term):  # judged once per word, not per occurrence
            continue
        category, unusual = shape(term)
        if category == "jargon" and len(term) < MIN_JARGON_LENGTH:
            continue
        if category == "codes" and measure(term, lang):
            continue
        zipf = general_zipf(term, lang)
        # A heading in capitals ("CAUTION") is the word; an acronym is short ("API" stays one).
        as_word = category == "jargon" or (term.isalpha() and term.isupper() and len(term) >= CAPITALISED_WORD_LENGTH)
        if zipf >= (RARE_JARGON_ZIPF if as_word else COMMON_ZIPF) and not _split_code(term, category, lang):
            continue
        pieces = tokenizer.convert_ids_to_tokens(running_text_ids(tokenizer, term))
        if category == "jargon" and len(pieces) < (MIN_PIECES if zipf > 0 else 2):
            continue
        if len(doc_set) > most:
            everywhere.append(term)
            continue
        parts = {
            "frequency": math.log2(len(doc_set)),
            "rarity": COMMON_ZIPF - zipf,
            "fragmentation": math.log2(max(1, len(pieces))),
            "pattern": 1.0 if unusual else 0.0,
        }
        out.append(Candidate(
            term=term, category=category, score=sum(parts.values()), parts=parts, documents=len(doc_set),
            occurrences=sum(c for _, c in forms), zipf=zipf, pieces=pieces, forms=[f for f, _ in forms],
        ))
    if everywhere:  # often the corpus's own subject (its product): the user should hear of it
        hooks.message(f"left out {counted(len(everywhere), 'word')} used in more than {BOILERPLATE_SHARE:.0%} of the "
                      f"documents (boilerplate, or the corpus's whole subject): {', '.join(sorted(everywhere)[:5])}; "
                      "a term among them tells no documents apart, but add it to a terms file (--terms) to train it")
    if not out:
        raise MiningError(
            f"no candidate domain terms in {counted(len(documents), 'document')}: no word used in >= {counted(min_count, 'document')} "
            f"is rare in general {'English' if lang == 'en' else repr(lang)} and either fragments into >= {MIN_PIECES} pieces (2 for a word "
            "the language never uses) or looks like an "
            "acronym or code; lower --min-count, or write the terms file yourself (--terms)"
        )
    out.sort(key=lambda c: (-c.score, -c.documents, key(c.term)))
    return out


def known_words_note(candidates: Sequence[Candidate], terms_file: object, then: str = "") -> str | None:
    """A line naming the mined jargon that the language's word list knows (Zipf > 0: a rare
    word, not a coinage), or None. Kept as rare, such a word may still be used in its everyday
    sense in the corpus ("ferment", "caustic"), which the miner cannot tell: the user can."""
    # One word only: wordfreq scores a joined coinage ("krell-pump") by its parts, so it looks known.
    known = [c for c in candidates if c.category == "jargon" and c.term.isalpha() and c.zipf > 0]
    if not known:
        return None
    words_ = ", ".join(f"{c.term} (Zipf {c.zipf:.2f})" for c in known[:8]) + (", ..." if len(known) > 8 else "")
    return (f"{counted(len(known), 'mined term')} {'is a word' if len(known) == 1 else 'are words'} of general "
            f"language, rare but not coined: {words_}; remove any your corpus uses in its everyday sense from "
            f"{terms_file}{then}")


def terms_json(candidates: Sequence[Candidate]) -> dict[str, list[str]]:
    """The spec's ``domain_terms.json`` (category -> terms, every corpus spelling), best first."""
    out: dict[str, list[str]] = {c: [] for c in CATEGORIES}
    for cand in candidates:
        out[cand.category].extend(f for f in cand.forms if f not in out[cand.category])
    return {c: v for c, v in out.items() if v}

