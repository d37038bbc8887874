"""Retrieval: ranx evaluation and run files (``evaluation.py``) with the ranking they score
(``ranking.py``), pseudo-relevance feedback (``feedback.py``), external data sets
(``datasets.py``), Pyserini export (``export.py``), Lucene indexing (``lucene.py``,
``java.py``) and searching (``searcher.py``)."""
