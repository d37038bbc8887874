"""The sentence-transformers module files of a saved model, so that

    sentence_transformers.SparseEncoder(DIR).encode_query(...) / .encode_document(...)

gives the vectors of ``SpladeEncoder.encode_query`` / ``encode_document``: the same
masked-LM (loaded from the directory's root), SPLADE max pooling of ``log(1 + relu(.))``
(``SpladePooling``), the query and document maximum lengths of ``sparse_adapt.json``
(``query_length``/``document_length``), and the special tokens excluded by the weights
themselves (``encoder.EXCLUDED_BIAS``). The format is the one sentence-transformers 6.2
writes for ``SparseEncoder(modules=[Transformer(dir, transformer_task="fill-mask"),
SpladePooling("max")])``; per-task lengths need sentence-transformers >= 6.2.
"""

from __future__ import annotations

import json
from pathlib import Path

MODULES_FILE = "modules.json"
TRANSFORMER_CONFIG = "sentence_bert_config.json"
MODEL_CONFIG = "config_sentence_transformers.json"
POOLING_DIR = "1_SpladePooling"


def sentence_transformers_files(query_max_length: int, doc_max_length: int, rows: int) -> dict[str, dict | list]:
    """Relative path -> JSON content of every sentence-transformers file; ``rows``: decoder rows."""
    return {
        MODULES_FILE: [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"},
            {
                "idx": 1, "name": "1", "path": POOLING_DIR,
                "type": "sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling",
            },
        ],
        TRANSFORMER_CONFIG: {
            "transformer_task": "fill-mask",
            "modality_config": {"text": {"method": "forward", "method_output_name": "logits"}},
            "module_output_name": "token_embeddings",
            "query_length": query_max_length,
            "document_length": doc_max_length,
            # encode() without a task reads documents, like SpladeEncoder.encode's default.
            "max_seq_length": doc_max_length,
        },
        f"{POOLING_DIR}/config.json": {"pooling_strategy": "max", "activation_function": "relu", "embedding_dimension": rows},
        MODEL_CONFIG: {
            "model_type": "SparseEncoder",
            # Empty prompts: sparse-adapt encodes queries and documents without a prefix.
            "prompts": {"query": "", "document": ""},
            "default_prompt_name": None,
            "similarity_fn_name": "dot",
        },
    }


def write_sentence_transformers_files(directory: str | Path, query_max_length: int, doc_max_length: int, rows: int) -> None:
    """Write the files into ``directory`` (a model directory being saved)."""
    for name, content in sentence_transformers_files(query_max_length, doc_max_length, rows).items():
        path = Path(directory) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
