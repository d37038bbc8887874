"""Bring your own corpus: the inputs of the staged pipeline, made from a corpus alone.

- ``text.py``: words, sentences and term occurrences.
- ``mining.py``: candidate domain terms (``mine-terms``).
- ``harvest.py``: dictionary entries from the corpus (``build-dictionary``).
- ``pseudo.py``: pseudo-queries with mined candidates (``make-train``); ``teacher.py`` scores them.
- ``adapt.py``: everything above, then training (``adapt``).
"""
