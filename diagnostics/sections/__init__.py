"""The sections of ``sparse-adapt diagnose``, one module each, in report order:

1. ``vocabulary.py``: the term's token id(s), whether it is one token, the base split;
   (``document.py`` picks the document sections 2-4 analyse)
2. ``logits.py``: the MLM logit of the term's token at every position of the document;
3. ``weight.py``: ``log(1 + relu(max_i logit_i))`` by hand, checked against ``encode``;
4. ``ranking.py``: the term's rank among the document's non-zero tokens;
5. ``checks.py``: pass/warn/fail checks from 1-4 (plus ``expansion.py``: do queries that
   do not contain the term expand to it); ``diagnostics/recommend.py`` turns failed
   checks into recommendations.

``target.py``: sections 2-4 gathered for one token id (the term's own token, or one of its pieces).
"""
