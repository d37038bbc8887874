"""Bring your own corpus: the inputs of the staged pipeline, made from a corpus alone.

- ``text.py``: words, sentences and term occurrences; ``language.py``: the corpus-language check.
- ``mining.py``: candidate domain terms (``mine-terms``).
- ``harvest.py``: dictionary entries from the corpus (``build-dictionary``); ``glosses.py``:
  lay-word glosses of its technical words from the Open English WordNet (``--glosses``);
  ``lexicon.py``: general-English (description, word) pairs for ``pretrain``.
- ``pseudo.py``: pseudo-queries with mined candidates (``make-train``); ``teacher.py`` scores them.
- ``adapt.py``: everything above, then training (``adapt``); ``adapt_folder.py``: its ``--out``
  folder (what a rerun resumes, refuses or discards); ``provenance.py``: what each generated
  input was made from.
"""
