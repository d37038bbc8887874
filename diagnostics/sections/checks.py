"""Section 5, checks: pass / warn / fail verdicts derived from sections 1-4."""

from __future__ import annotations

from dataclasses import dataclass

from diagnostics.sections.document import DocumentChoice
from diagnostics.sections.target import TargetDiagnosis
from diagnostics.sections.vocabulary import VocabularyCheck
from sparse_adapt.progress import counted

# The spec's H4 success criterion "High SPLADE weight: > 2.0".
HIGH_WEIGHT = 2.0
# The spec's H3 criterion "High relative ranking: Top 10"; rank 1 is the H4 target.
TOP_RANK = 10

PASS, WARN, FAIL, NA = "pass", "warn", "fail", "n/a"

@dataclass
class Check:
    name: str
    status: str  # pass | warn | fail | n/a
    expected: str
    actual: str
    target: str | None = None  # the piece a per-token check is about
    # Why it failed, where the remedy depends on it (recommend.py reads this, not the text
    # of ``actual``, which holds the term's own pieces): "special_token" | "beyond_window".
    reason: str | None = None


def checks(vocab: VocabularyCheck, doc: DocumentChoice, targets: list[TargetDiagnosis], terms_given: bool) -> list[Check]:
    """``terms_given``: whether domain terms were passed (a file, or from Python a dict)."""
    special = [t.token for t in targets if t.weight.special_token]
    split = f"{counted(len(vocab.token_ids), 'piece')}: {' '.join(vocab.pieces)}"
    if special:  # [UNK]: characters the base tokenizer does not know; no head training can reach them
        split += f"; {', '.join(special)} {'is' if len(special) == 1 else 'are'} never in a vector"
    out = [
        Check("single_token", PASS if vocab.single_token else FAIL, "one token",
              f"id {vocab.token_ids[0]}" if vocab.single_token else split, reason="special_token" if special else None),
        Check("in_terms_file", NA if not terms_given else PASS if vocab.in_terms_file else FAIL,
              "listed", ", ".join(vocab.categories) or ("no terms file" if not terms_given else "absent")),
    ]
    if vocab.single_token:
        not_domain = ("no: a special token, never in a vector (extend-vocab refuses it)" if special
                      else "no (model not extended with this term)")
        out.append(Check("domain_token", PASS if vocab.domain_token else FAIL, "registered domain token",
                            "yes" if vocab.domain_token else not_domain, reason="special_token" if special else None))
    past = f" ({len(doc.docs_beyond_window)} more only past the document window)" if doc.docs_beyond_window else ""
    out.append(Check("in_documents", PASS if doc.docs_containing else WARN, ">= 1 document",
                        f"{len(doc.docs_containing)} of {doc.docs_searched}{past}",
                        reason="beyond_window" if doc.docs_beyond_window else None))
    many = len(targets) > 1
    for t in targets:
        name = t.token if many else None
        lg, w, r, qe = t.logits, t.weight, t.ranking, t.query_expansion
        if w.special_token:  # its logit is the -10000 exclusion bias: a verdict on it would advise warmup
            out.append(Check("positive_logits", NA, "> 0 where it occurs", "special token: never in a vector", name))
            out.append(Check("weight_matches_encoding", PASS if w.matches else FAIL,
                                f"manual = encode() ± {w.tolerance:g}", f"{w.expected:.4f} vs {w.actual:.4f}", name))
            continue
        if lg.verdict == "absent":
            out.append(Check("positive_logits", NA, "> 0 where it occurs", "term not in this text", name))
        else:
            out.append(Check("positive_logits", PASS if lg.verdict == "positive" else FAIL, "> 0 where it occurs",
                                ", ".join(f"{p.logit:.2f}" for p in lg.positions if p.occurrence), name))
        out.append(Check("weight_matches_encoding", PASS if w.matches else FAIL,
                            f"manual = encode() ± {w.tolerance:g}", f"{w.expected:.4f} vs {w.actual:.4f}", name))
        if lg.verdict == "absent":  # --doc without the term: a weight there is expansion, not a verdict
            out.append(Check("nonzero_weight", NA, "> 0 where it occurs",
                             f"{r.weight:.4f} (term not in this text{': expansion' if r.weight > 0 else ''})", name))
        else:
            out.append(Check("nonzero_weight", PASS if r.weight > 0 else FAIL, "> 0", f"{r.weight:.4f}", name))
        if r.weight > 0 and lg.verdict != "absent":
            out.append(Check("high_weight", PASS if r.weight > HIGH_WEIGHT else WARN, f"> {HIGH_WEIGHT:g}",
                                f"{r.weight:.4f}", name))
            status = PASS if r.rank == 1 else WARN if r.rank <= TOP_RANK else FAIL
            out.append(Check("top_rank", status, f"1 (<= {TOP_RANK}: warn)", f"{r.rank} of {r.nonzero}", name))
        if qe is None:  # said, so that a clean table is not read as "expansion checked"
            out.append(Check("query_expansion", NA, ">= 1 query w/o term", "not checked: no queries given", name))
        else:
            if qe.without_term == 0:
                out.append(Check("query_expansion", NA, ">= 1 query w/o term", "every query has it", name))
            else:
                actual = f"{len(qe.expanding)} of {qe.without_term} queries"
                status = PASS if qe.expanding else FAIL
                if qe.feedback is not None:
                    actual += f" ({len(qe.feedback.expanding)} with feedback)"
                    # feedback reaching the term is a workaround at search time, not a model that expands
                    status = WARN if status == FAIL and qe.feedback.expanding else status
                out.append(Check("query_expansion", status, ">= 1 query w/o term", actual, name))
    return out
