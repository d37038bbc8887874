"""Section 1, vocabulary check: is the term one token of this model, and how did the base split it?"""

from __future__ import annotations

from dataclasses import dataclass

from diagnostics.tokens import base_pieces, term_ids
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.modeling.tokenization import normalize_term, single_token_id

@dataclass
class VocabularyCheck:
    term: str
    normalized: str  # after the tokenizer's normaliser (lowercasing for uncased models)
    token_ids: list[int]
    pieces: list[str]  # token strings of token_ids
    decoded: list[str]  # tokenizer.decode of each id
    single_token: bool
    in_vocabulary: bool  # the normalised term is a vocabulary entry, added tokens included (BPE: with its space mark)
    base_pieces: list[str] | None  # the subword model's split, ignoring added tokens
    added_token: bool  # the single token was added to the base vocabulary (extend-vocab)
    domain_token: bool  # the single token is one of the model's registered domain tokens
    terms_file: str | None
    in_terms_file: bool
    categories: list[str]  # categories of the terms file listing it (normalised match)
    model_category: str | None  # category recorded in the model's sparse_adapt.json


def vocabulary_check(
    splade: SpladeEncoder, term: str, terms: dict[str, list[str]] | None, terms_file: str | None
) -> VocabularyCheck:
    tok = splade.tokenizer
    ids = term_ids(splade, term)
    norm = normalize_term(tok, term)
    single = single_token_id(tok, term) is not None
    added = single and ids[0] in tok.added_tokens_decoder and ids[0] not in tok.all_special_ids
    categories = []
    for category, items in (terms or {}).items():
        if any(normalize_term(tok, t) == norm for t in items):
            categories.append(category)
    return VocabularyCheck(
        term=term,
        normalized=norm,
        token_ids=ids,
        pieces=tok.convert_ids_to_tokens(ids),
        decoded=[tok.decode([i]) for i in ids],
        single_token=single,
        # byte-level BPE keeps a word as "Ġword": one base token in running text is an entry too
        in_vocabulary=norm in tok.get_vocab() or (single and not added),
        base_pieces=base_pieces(splade, term),
        added_token=added,
        domain_token=single and ids[0] in set(splade.settings.domain_token_ids),
        terms_file=terms_file,
        in_terms_file=bool(categories),
        categories=categories,
        model_category=splade.settings.domain_terms.get(norm),
    )
