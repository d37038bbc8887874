"""Which language a corpus is written in, for the general-language word frequencies of mining.

Mining keeps words that are frequent in the corpus but rare in the general language
(wordfreq). Measured against English, every common word of a German corpus ("Wartung",
"Techniker") is "rare", and the mined terms are everyday words. The language is told apart
by coverage: the share of the corpus's words that are common (Zipf >= 3, once per million
words or more) in a language's wordfreq list.

- The bundled English corpora have English coverage 0.92-0.97 (codes, words holding a digit,
  not counted); a German test corpus 0.375 (German 0.90, next Danish 0.46), so English is
  kept at :data:`ENGLISH_COVERAGE` and up, without loading the other 41 lists (~3 s).
- Below it, the language with the highest coverage wins if it beats English by
  :data:`MARGIN`: wordfreq's lists share loanwords and names, so a near tie says nothing; and
  if its own coverage is :data:`LOW_COVERAGE` or more: a list that describes less says nothing
  either (the corpus is then mined as English, with the low-coverage warning).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from sparse_adapt.errors import ConfigError

ENGLISH = "en"
AUTO = "auto"
COMMON_ZIPF = 3.0
ENGLISH_COVERAGE = 0.75
MARGIN = 0.10
# Below this share of common words in the best language, no list describes the corpus (a CJK
# text without its segmenter reads as whole sentences; logs of codes): rarity means little.
LOW_COVERAGE = 0.5
SAMPLE_WORDS = 5000  # words read from the start of the corpus; coverage settles long before
# Words as mining reads them ("XR-7200", "well-known"); one holding a digit is a code, not a
# word of any language: its letters ("xr", "il", "co") made a log of codes read as Slovak.
_TOKEN = re.compile(r"[^\W_]+(?:[-_][^\W_]+)*")
_LETTERS = re.compile(r"[^\W\d_]+")


@dataclass(frozen=True)
class LanguageGuess:
    lang: str
    coverage: float  # share of the sampled words common in ``lang``
    english: float  # the same for English
    words: int  # how many words were sampled

    @property
    def trusted(self) -> bool:
        return self.coverage >= LOW_COVERAGE

    def warning(self) -> str | None:
        """A line for the user when no word list describes the corpus, else None."""
        if self.trusted:
            return None
        if not self.words:
            return ("the corpus holds no word without digits (codes alone), so no wordfreq list describes it: which "
                    "words are rare means little here; check the mined terms, or give your own with --terms")
        return (f"only {self.coverage:.0%} of the corpus's {self.words} sampled words are common in any wordfreq "
                "list this machine reads (zh, ja and ko need their segmenters): which words are rare means little "
                "here; check the mined terms, or give your own with --terms")

    def describe(self) -> str:
        share = f"{self.coverage:.0%} of {self.words} words common in wordfreq's {self.lang!r} list"
        return share if self.lang == ENGLISH else f"{share}; English {self.english:.0%}"


def available() -> list[str]:
    from wordfreq import available_languages

    return sorted(available_languages())


def check_language(lang: str) -> str:
    """``lang`` itself when wordfreq has a list for it (or it is ``auto``); else a ConfigError."""
    if lang != AUTO and lang not in available():
        raise ConfigError(f"--lang {lang!r}: wordfreq has no word list for it; one of auto, {', '.join(available())}")
    return lang


def coverage(words: list[str], lang: str) -> float:
    from wordfreq import zipf_frequency

    return sum(zipf_frequency(w, lang) >= COMMON_ZIPF for w in words) / max(1, len(words))


def sample_words(texts: Iterable[str], limit: int = SAMPLE_WORDS) -> list[str]:
    out: list[str] = []
    for text in texts:
        out.extend(w.casefold() for token in _TOKEN.findall(text) if not any(c.isdigit() for c in token)
                   for w in _LETTERS.findall(token))
        if len(out) >= limit:
            break
    return out[:limit]


def detect_language(texts: Iterable[str]) -> LanguageGuess:
    """English unless the corpus's words are clearly more common in another language."""
    words = sample_words(texts)
    english = coverage(words, ENGLISH)
    best = LanguageGuess(ENGLISH, english, english, len(words))
    if english >= ENGLISH_COVERAGE or not words:
        return best
    for lang in available():
        if lang == ENGLISH:
            continue
        try:
            share = coverage(words, lang)
        except ImportError:  # zh, ja, ko need a segmenter (jieba, mecab) that is not installed
            continue
        if share > best.coverage:
            best = LanguageGuess(lang, share, english, len(words))
    # A list that describes too little of the corpus to be trusted is no evidence for it either:
    # 2 of 7 words of a Chinese text with a product code read as Slovak.
    switch = best.coverage >= english + MARGIN and best.trusted
    return best if switch else LanguageGuess(ENGLISH, english, english, len(words))


def resolve_language(lang: str, texts: Iterable[str]) -> tuple[str, LanguageGuess | None]:
    """``(language code, the guess when it was detected)`` for a ``--lang`` value."""
    check_language(lang)
    if lang != AUTO:
        return lang, None
    guess = detect_language(texts)
    return guess.lang, guess
