"""Vocabulary + MLM-head extension: every domain term becomes one token.

For a term split by the base tokenizer into pieces p_1..p_k (as in running text, after a
space: byte-level BPE splits a text's first word otherwise), the new row is

    E[new]      = mean_j E[p_j]          (input embedding; MOSAIC's initialisation)
    W_dec[new]  = mean_j W_dec[p_j]      (decoder row, only when not tied to E)
    b_dec[new]  = mean_j b_dec[p_j]      (decoder bias)

The bias is set explicitly rather than left to transformers, whose resize fills new
bias rows with the mean over the *whole* vocabulary: for SPLADE that bias decides how
readily the new term fires, and the term's own pieces are the best prior we have. Pieces
that say nothing of the term ([UNK], a bare word-start marker) are left out of the means; a
term made of such pieces alone gets its embedding from them all and its bias from the mean
over the tokens the model may activate (its output mask).
Terms that are already one token (e.g. ``api``) are not added again; their existing id
is recorded as a domain token so the FLOPS exclusion and the domain hinge cover them.

On a tokenizer that keeps case (RoBERTa, XLM-R, cased BERT), an added term matches in any
case: its normaliser gains a rule that rewrites ``brindlewick`` or ``BRINDLEWICK`` to the
term's own spelling, so the query a user types in lower case meets the term's token (an
uncased model's normaliser already does this for every word). The rule is saved in
``tokenizer.json``, so sentence-transformers and every other reader of the tokenizer
apply it too. Only added terms get it: the base vocabulary lacks them as words. A rule
leaves alone the term's spellings that are everyday words (one token of the base, or common
English; :func:`~sparse_adapt.modeling.tokenization.everyday_spellings`): a term ``ACE``
leaves every ``ace`` as it is, unless the terms file lists ``ace`` too.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from tokenizers import AddedToken

from sparse_adapt.data import DataError
from sparse_adapt.data.inputs import check_domain_terms, flat_terms
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.modeling.tokenization import (
    fold_case, keeps_case, marks_word_starts, normalize_term, prepend_once, running_text_ids, single_token_id,
)


@dataclass
class TermReport:
    term: str  # as written in domain_terms.json
    normalized: str  # as the tokenizer sees it (e.g. lowercased)
    category: str
    token_id: int
    pieces: list[str]  # how the base tokenizer split it (in running text)
    added: bool  # False: it already was a single token
    # A vocabulary entry running text never reaches as a word ("XR" beside "ĠX", "R"): no new
    # row, the tokenizer is told to use the entry for the whole word too. On byte-level BPE and
    # SentencePiece such an entry is a piece inside other words as well ("each" in "beach"),
    # which keep it: see ExtensionReport.shared.
    bound: bool = False


@dataclass
class ExtensionReport:
    terms: list[TermReport] = field(default_factory=list)
    old_vocab_size: int = 0
    new_vocab_size: int = 0
    # (term, category recorded by an earlier extension, category now): the later one wins
    recategorised: list[tuple[str, str, str]] = field(default_factory=list)
    # (term, its first category, another category the same file lists it under): the first wins
    two_categories: list[tuple[str, str, str]] = field(default_factory=list)

    # Bound terms whose id the tokenizer also gives a piece inside other words: tokenizers cannot
    # give text already in the vocabulary a new id, so those words activate the term too.
    shared: list[TermReport] = field(default_factory=list)

    @property
    def added(self) -> list[TermReport]:
        return [t for t in self.terms if t.added]

    def warnings(self, source: str) -> list[str]:
        """One line per term whose id other words share (``source``: the terms file)."""
        return [f"{source}: {t.term!r} is bound to the existing entry {t.normalized!r} (id {t.token_id}), which this "
                f"tokenizer also uses inside other words: documents with those words activate the term too"
                for t in self.shared]


def single_token_ids(tokenizer, terms: dict[str, list[str]] | None) -> dict[int, str]:
    """Token id -> term, for every term of a terms file that is already one token."""
    out: dict[int, str] = {}
    special = set(tokenizer.all_special_ids)
    for items in (terms or {}).values():
        for term in items:
            token_id = single_token_id(tokenizer, term)
            if token_id is not None and token_id not in special:
                out.setdefault(token_id, term)
    return out


def domain_token_ids(splade: SpladeEncoder, terms: dict[str, list[str]] | None) -> list[int]:
    """``D``, the domain token ids of the domain losses, domain-focused masking and reports.

    The model's recorded domain ids when it has any (after ``extend``). Otherwise (e.g. H1,
    ``--stages distill`` on a plain base) the terms that already are single tokens of the
    base vocabulary (``api``, ``ssl``...): the same ids ``extend`` would record for them,
    without changing the model. Multi-piece terms (``gatrocraptic``) then have no token
    and no domain loss can target them; that is the point of the H1 baseline.
    """
    if splade.settings.domain_token_ids:
        return list(splade.settings.domain_token_ids)
    return sorted(single_token_ids(splade.tokenizer, terms))


def _added_tokens(tokenizer, terms: list[TermReport]) -> list[AddedToken]:
    # single_word: "oauth" must not match inside "oauth2"; normalized: match after lowercasing;
    # lstrip: the token takes the space before it, which would otherwise be a lone "Ġ" or "▁".
    lstrip = marks_word_starts(tokenizer)
    return [AddedToken(t.normalized, single_word=True, normalized=True, lstrip=lstrip) for t in terms]


def check_not_special(tokenizer, terms: dict[str, list[str]], source: str = "<terms>") -> None:
    """A special token ([CLS], [SEP]...) as a term would make every text "contain" the domain."""
    special = dict(zip(tokenizer.all_special_tokens, tokenizer.all_special_ids))
    for category, items in terms.items():
        for i, term in enumerate(items):
            ids = tokenizer(term, add_special_tokens=False)["input_ids"]
            if term in special or (len(ids) == 1 and ids[0] in special.values() and ids[0] != tokenizer.unk_token_id):
                raise DataError(source, None, f"{category}[{i}]", f"{term!r} is a special token of the tokenizer, not a domain term")


def plan_extension(tokenizer, terms: dict[str, list[str]], source: str = "<terms>") -> list[TermReport]:
    """Check every term against ``tokenizer`` and plan its token; the tokenizer is not changed.

    A term that is a special token (``[CLS]``), that tokenizes to nothing, or that the
    tokenizer would still split after being added (its normaliser separates CJK
    characters, for one) raises a :class:`DataError` naming ``source`` and the term.
    """
    terms = check_domain_terms(terms, source)
    check_not_special(tokenizer, terms, source)
    unk = tokenizer.unk_token_id
    cased = keeps_case(tokenizer)
    planned: dict[str, TermReport] = {}
    where: dict[str, str] = {}
    folded: set[str] = set()  # casefolded spellings of added or bound terms on a cased tokenizer
    for category, items in terms.items():
        for i, term in enumerate(items):
            field_name = f"{category}[{i}]"
            ids = tokenizer(term, add_special_tokens=False)["input_ids"]
            if not ids:
                raise DataError(source, None, field_name, f"{term!r} tokenizes to nothing (the tokenizer drops every character)")
            norm = normalize_term(tokenizer, term)
            if norm in planned or norm.casefold() in folded:  # "Gatrocraptic" and "gatrocraptic" are one token
                continue
            where[norm] = field_name
            existing = tokenizer.convert_tokens_to_ids(norm)
            # A vocabulary entry that text never reaches is bound to the term (made reachable as
            # an added token, no new row): a BPE text-initial form ("XR"), or a WordPiece entry
            # the pre-tokenizer always splits ("..." is one entry, but punctuation splits apart).
            in_vocab = existing is not None and existing != unk and norm in tokenizer.get_vocab()
            single = single_token_id(tokenizer, term)
            pieces = tokenizer.convert_ids_to_tokens(running_text_ids(tokenizer, term))
            if single is not None:
                planned[norm] = TermReport(term, norm, category, single, pieces, False)
            elif in_vocab:
                planned[norm] = TermReport(term, norm, category, existing, pieces, False, bound=True)
            else:
                planned[norm] = TermReport(term, norm, category, -1, pieces, True)
            if cased and (planned[norm].added or planned[norm].bound):
                folded.add(norm.casefold())
    new = [t for t in planned.values() if t.added or t.bound]
    if new:
        trial = copy.deepcopy(tokenizer)  # add to a copy: a refused term must leave the model as it was
        if cased:
            trial = fold_case(trial, [t.normalized for t in new], flat_terms(terms))
        trial = prepend_once(trial)
        trial.add_tokens(_added_tokens(tokenizer, new))
        for t in planned.values():
            pieces = running_text_ids(trial, t.term)
            if (t.added or t.bound) and len(pieces) == 1:
                pieces = trial(t.term, add_special_tokens=False)["input_ids"]  # and at a text's start
            if len(pieces) != 1 or (not t.added and pieces != [t.token_id]):
                raise DataError(
                    source, None, where[t.normalized],
                    f"{t.term!r} cannot be one token: even added to the vocabulary, this tokenizer splits it into "
                    f"{trial.convert_ids_to_tokens(pieces)} ({_why_split(trial, t.term)})",
                )
    return list(planned.values())


def _untie_head_bias(mlm, decoder: torch.nn.Linear) -> None:
    """BERT's and RoBERTa's heads keep a ``bias`` beside their decoder's, one tensor when the
    embeddings are tied. Untied, a resize leaves it one tensor with the decoder's (BERT: saved
    once, so the decoder's bias reloads as zeros) or at the old size (RoBERTa: the saved model
    no longer loads). It becomes its own copy of the decoder's bias, as a loaded untied head has."""
    for module in mlm.modules():
        if getattr(module, "decoder", None) is decoder and isinstance(getattr(module, "bias", None), torch.nn.Parameter):
            module.bias = torch.nn.Parameter(decoder.bias.detach().clone())


def extend_vocabulary(splade: SpladeEncoder, terms: dict[str, list[str]], source: str = "<terms>") -> ExtensionReport:
    """Add every term as a single token, grow embeddings and MLM head, initialise new rows.

    Every term is checked first (:func:`plan_extension`); a refused term changes nothing.
    On a tokenizer that keeps case, ``splade.tokenizer`` is replaced by its generic-class copy
    with the case rules (:func:`fold_case`), and on a SentencePiece one that puts its word-start
    marker before every part of a text by one that puts it before the text only
    (:func:`prepend_once`, cased or not): take the tokenizer from ``splade`` afterwards.
    """
    tokenizer, mlm = splade.tokenizer, splade.mlm
    report = ExtensionReport(old_vocab_size=len(tokenizer))
    planned = {t.normalized: t for t in plan_extension(tokenizer, terms, source)}

    new = [t for t in planned.values() if t.added]
    bound = [t for t in planned.values() if t.bound]
    piece_ids = {t.normalized: running_text_ids(tokenizer, t.term) for t in new}
    if keeps_case(tokenizer):  # before adding: the added tokens are matched in normalised text
        fresh = [t.normalized for t in [*bound, *new] if t.normalized not in splade.settings.domain_terms]
        tokenizer = splade.tokenizer = fold_case(tokenizer, fresh, flat_terms(terms))
    if bound or new:
        tokenizer = splade.tokenizer = prepend_once(tokenizer)
    if bound:
        tokenizer.add_tokens(_added_tokens(tokenizer, bound))  # existing ids: no row to add
    if new:
        tokenizer.add_tokens(_added_tokens(tokenizer, new))
        old_rows = mlm.get_input_embeddings().weight.shape[0]
        # A head padded past its tokenizer (rows rounded up to a multiple of 64, as ModernBERT's)
        # has free rows for the first new ids; it grows only when they run out.
        if len(tokenizer) > old_rows:
            mlm.resize_token_embeddings(len(tokenizer), mean_resizing=False)
        emb = mlm.get_input_embeddings().weight
        out = mlm.get_output_embeddings()
        tied = out.weight.data_ptr() == emb.data_ptr()
        special = torch.tensor(splade.excluded_ids(), dtype=torch.long)
        vocab = tokenizer.get_vocab()
        markers = torch.tensor([vocab[m] for m in ("▁", "Ġ") if m in vocab and vocab[m] < old_rows], dtype=torch.long)
        allowed = splade.output_mask[:old_rows].nonzero()[:, 0].cpu()
        with torch.no_grad():
            for t in new:
                t.token_id = tokenizer.convert_tokens_to_ids(t.normalized)
                if t.token_id < report.old_vocab_size:
                    raise RuntimeError(f"token id {t.token_id} of {t.normalized!r} collides with an existing row")
                pieces = torch.tensor(piece_ids[t.normalized])
                # An [UNK] piece (which holds the special-token exclusion bias) and a bare
                # word-start marker ("▁" before a letter the vocabulary lacks) say nothing of
                # the term: the mean is over its other pieces; when none is left, the rows' over all
                # its pieces and the bias over every token the model may activate.
                real = pieces[~torch.isin(pieces, torch.cat([special, markers]))]
                rows = real if len(real) else pieces
                emb[t.token_id] = emb[rows].mean(0)
                if not tied:
                    out.weight[t.token_id] = out.weight[rows].mean(0)
                if out.bias is not None:
                    out.bias[t.token_id] = out.bias[real].mean() if len(real) else out.bias[allowed].mean()
        if not tied:
            _untie_head_bias(mlm, out)
        mlm.config.vocab_size = emb.shape[0]  # the rows, which a padded head keeps beyond the tokenizer

    for t in planned.values():
        check = running_text_ids(tokenizer, t.term)
        if (t.added or t.bound) and check == [t.token_id]:
            check = tokenizer(t.term, add_special_tokens=False)["input_ids"]
        if check != [t.token_id]:
            raise RuntimeError(f"term {t.term!r} still tokenizes to {check} after extension")

    report.terms = list(planned.values())
    report.new_vocab_size = len(tokenizer)
    # WordPiece marks the inside of a word (##each), so its bound entries stay whole words.
    report.shared = [t for t in bound if marks_word_starts(tokenizer)]
    # The extended tokenizer's normaliser folds a listed case variant to its term's spelling.
    report.two_categories = list(dict.fromkeys(
        (planned[k].term, planned[k].category, category)
        for category, items in terms.items() for term in items
        if (k := normalize_term(splade.tokenizer, term)) in planned and planned[k].category != category
    ))
    ids = sorted(set(splade.settings.domain_token_ids) | {t.token_id for t in planned.values()})
    if ids and not splade.settings.domain_token_ids and not splade.settings.extended_from:
        splade.settings.extended_from = splade.source or ""  # in memory: nothing to name
    splade.settings.domain_token_ids = ids
    before = splade.settings.domain_terms
    report.recategorised = [(t.normalized, before[t.normalized], t.category) for t in planned.values()
                            if before.get(t.normalized, t.category) != t.category]
    splade.settings.domain_terms = {**before, **{t.normalized: t.category for t in planned.values()}}
    splade.refresh_vocabulary()
    return report


def _why_split(tokenizer, term: str) -> str:
    """Why an added ``term`` still splits, as far as the tokenizer shows it: a special token
    inside it, its normaliser (BERT's puts a space around each CJK character), or its pre-tokenizer."""
    special = [t for t in tokenizer.all_special_tokens if t and t in term]
    if special:
        return f"it holds the special token {special[0]}"
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and backend.normalizer is not None and backend.normalizer.normalize_str(term) != term:
        return "its normaliser changes the term"
    if backend is not None and backend.pre_tokenizer is not None and len(backend.pre_tokenizer.pre_tokenize_str(term)) > 1:
        return "its pre-tokenizer splits the term"
    return "its normaliser or pre-tokenizer changes the term"
