"""Records and validated loaders for the files a user hands to sparse-adapt.

Every loader reads the whole file and raises :class:`DataError` naming the file, the
1-based line (where there is one: not for a field of a whole-file JSON) and the field at
the first problem, so a user never sees a traceback from deep inside torch because of a
typo in their JSONL.

Every file is UTF-8; a leading byte-order mark is accepted (and dropped) by every loader
alike, as are CRLF line ends. Numbers must be finite: ``NaN`` and ``Infinity`` (which
Python's JSON parser accepts) are errors, since one NaN teacher score turns every weight
of a model into NaN.

Where things are: the records and :class:`DataError` in ``records.py``; lines, JSON and
typed fields in ``reading.py``; document and query formats in ``documents.py``; the
training inputs (train, dictionary, domain terms) in ``inputs.py``; qrels and query groups
in ``qrels.py``; run files (``evaluate --compare``) in ``runs.py``. This module only gathers
their public names.
"""

from sparse_adapt.data.documents import (
    DOCUMENT_FORMATS,
    check_documents,
    collapse_whitespace,
    find_documents,
    iter_documents,
    load_documents,
    load_queries,
    parse_document,
)
from sparse_adapt.data.inputs import flat_terms, load_dictionary, load_domain_terms, load_train, mentions_term
from sparse_adapt.data.qrels import BEIR_QRELS_HEADER, check_query_groups, load_qrels, load_query_groups
from sparse_adapt.data.reading import GZIP_MAGIC, file_sha256, iter_jsonl, iter_lines, read_record, read_text, require_file
from sparse_adapt.data.records import DataError, DictionaryEntry, Document, Qrels, Query, TrainExample
from sparse_adapt.data.runs import load_run

__all__ = [
    "BEIR_QRELS_HEADER", "DOCUMENT_FORMATS", "GZIP_MAGIC", "DataError", "DictionaryEntry", "Document", "Qrels",
    "Query", "TrainExample", "check_documents", "check_query_groups", "collapse_whitespace", "file_sha256", "read_record",
    "find_documents", "flat_terms", "mentions_term",
    "iter_documents",
    "iter_jsonl", "iter_lines", "load_dictionary", "load_documents", "load_domain_terms", "load_qrels",
    "load_queries", "load_query_groups", "load_run", "load_train", "parse_document", "read_text", "require_file",
]
