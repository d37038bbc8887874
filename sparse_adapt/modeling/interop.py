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

from sparse_adapt.errors import ModelLoadError
from sparse_adapt.modeling.settings import SETTINGS_FILE

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


def transformer_module(directory: str | Path) -> Path | None:
    """The folder of a sentence-transformers model's Transformer module that holds a Hugging
    Face model (``0_Transformer/`` of a dense model), or None: the directory has no
    ``modules.json``, or none of its modules is one."""
    root = Path(directory)
    try:
        modules = json.loads((root / MODULES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    for module in modules if isinstance(modules, list) else []:
        if (isinstance(module, dict) and str(module.get("type", "")).endswith(".Transformer")
                and (root / str(module.get("path", "")) / "config.json").is_file()):
            return root / str(module["path"])
    return None


# Module classes sentence-transformers saves as a SPLADE model's masked-LM (6.x; 5.x's name).
_MLM_MODULES = ("Transformer", "MLMTransformer")
# SPLADE pooling as sparse-adapt computes it: max over positions of log(1 + relu(logit)).
_OUR_POOLING = {"pooling_strategy": "max", "activation_function": "relu"}


def sentence_transformers_mismatch(directory: str | Path, name: str | None = None) -> str | None:
    """Why a sentence-transformers model directory would encode differently here, or None.

    sparse-adapt reads the masked-LM from the directory's root and pools it its own way, so
    a ``modules.json`` with other modules (a ``Router`` for inference-free queries, a
    ``SparseStaticEmbedding``, a CSR autoencoder), ``SpladePooling`` with sum pooling or the
    ``log1p_relu`` activation, or query/document prompts would give other vectors than the
    model's own library gives, silently. Directories without ``modules.json`` (plain
    transformers models) are not sentence-transformers models: None. ``name``: the model as
    the user named it (a Hub id, not its cache folder), for the command suggested.
    """
    root = Path(directory)
    modules_path = root / MODULES_FILE
    if not modules_path.is_file():
        return None
    try:
        modules = json.loads(modules_path.read_text(encoding="utf-8"))
        kinds = [(str(m["type"]).rsplit(".", 1)[-1], str(m.get("path", ""))) for m in modules]
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return f"its {MODULES_FILE} is not a sentence-transformers module list"
    names = [k for k, _ in kinds]
    if len(kinds) != 2 or kinds[0][0] not in _MLM_MODULES or kinds[0][1] != "" or kinds[1][0] != "SpladePooling":
        # A dense model (all-MiniLM-L6-v2's Transformer, Pooling, Normalize) has no head to pool:
        # `base --from-encoder` gives its encoder one, the way offline-minilm is made.
        dense = "Pooling" in names and "SpladePooling" not in names
        return (f"its {MODULES_FILE} lists {', '.join(names) or 'no modules'}; sparse-adapt encodes a masked-LM "
                "saved in the directory's root followed by SpladePooling, nothing else"
                + (f". A dense encoder: `sparse-adapt base --from-encoder {name or directory} --out DIR` builds a "
                   "SPLADE base from it" if dense else ""))
    pooling_path = root / kinds[1][1] / "config.json"
    try:
        pooling = json.loads(pooling_path.read_text(encoding="utf-8")) if pooling_path.is_file() else {}
    except (ValueError, RecursionError):
        return f"its {kinds[1][1]}/config.json is not JSON"
    if not isinstance(pooling, dict):
        return f"its {kinds[1][1]}/config.json is not a JSON object"
    differs = {k: pooling.get(k, v) for k, v in _OUR_POOLING.items() if pooling.get(k, v) != v}
    if differs:
        settings = ", ".join(f"{k}={v!r}" for k, v in differs.items())
        return (f"its SpladePooling sets {settings}; sparse-adapt pools max over positions of log(1 + relu(logit)) "
                "(pooling_strategy='max', activation_function='relu') only")
    config_path = root / MODEL_CONFIG
    try:
        config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    except (ValueError, RecursionError):
        return f"its {MODEL_CONFIG} is not JSON"
    if not isinstance(config, dict):
        return f"its {MODEL_CONFIG} is not a JSON object"
    given = config.get("prompts") or {}
    if not isinstance(given, dict):
        return f"its {MODEL_CONFIG} has prompts that are no JSON object of prompt names and texts"
    prompts = {k: v for k, v in given.items() if v}
    if prompts:
        return (f"its {MODEL_CONFIG} prepends prompts {prompts}; sparse-adapt encodes texts as they are, so the "
                "model would not see the input it was trained on")
    similarity = config.get("similarity_fn_name")
    if similarity not in (None, "dot"):
        return (f"its {MODEL_CONFIG} scores with similarity_fn_name={similarity!r}; sparse-adapt scores by dot "
                "product (evaluate, search, the Lucene impact index), so it would rank otherwise")
    if config.get("max_active_dims") is not None:
        return (f"its {MODEL_CONFIG} keeps max_active_dims={config['max_active_dims']!r} terms a vector; sparse-adapt "
                "keeps every active term unless asked where it encodes (export --max-active-dims N, "
                "encode(..., max_active_dims=N)): remove the key and ask there")
    return _lengths_mismatch(root)


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _lengths_mismatch(root: Path) -> str | None:
    """Why the lengths sentence-transformers truncates at differ from ``sparse_adapt.json``'s
    (one library re-saved the directory after the other), or None."""
    try:
        ours = json.loads((root / SETTINGS_FILE).read_text(encoding="utf-8"))
        theirs = json.loads((root / TRANSFORMER_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # either file missing: nothing to compare (a broken one is said on loading)
        return None
    if not (isinstance(ours, dict) and isinstance(theirs, dict)):
        return None
    pairs = (("query_length", "query_max_length"), ("document_length", "doc_max_length"))
    # A broken value is the settings loader's to name.
    differ = [(t, theirs[t], o, ours[o]) for t, o in pairs
              if _positive_int(theirs.get(t)) and _positive_int(ours.get(o)) and theirs[t] != ours[o]]
    if not differ:
        return None
    said = "; ".join(f"{TRANSFORMER_CONFIG} {t}={a!r}, {SETTINGS_FILE} {o}={b!r}" for t, a, o, b in differ)
    return f"its two length settings disagree ({said}): set both to the length the model is to encode at"


# A tokenizer without a real limit reports 1e30 (transformers' VERY_LARGE_INTEGER) as its
# model_max_length; such a value is no length to adopt.
_NO_LIMIT = 1_000_000


def sentence_transformers_lengths(directory: str | Path, tokenizer) -> tuple[int, int] | None:
    """(query, document) maximum lengths sentence-transformers encodes a model directory with,
    for a directory it saved (``modules.json``; the loader asks only when our ``sparse_adapt.json``
    is absent); else None.

    Its ``Transformer`` truncates a query to ``query_length``, a document to
    ``document_length``, either falling back to ``max_seq_length`` and then to the
    tokenizer's ``model_max_length``; sparse-adapt's own defaults (64/256) would give other
    vectors for longer texts.
    """
    root = Path(directory)
    if not (root / MODULES_FILE).is_file():
        return None
    path = root / TRANSFORMER_CONFIG
    config: object = {}
    if path.exists():  # absent: the tokenizer's limit, as sentence-transformers takes it
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as e:  # sentence-transformers fails on it too
            raise ModelLoadError(f"cannot load {str(directory)!r}: {path} is damaged ({str(e)[:200]}); "
                                 "it says at what lengths texts are cut") from None
    if not isinstance(config, dict):
        raise ModelLoadError(f"cannot load {str(directory)!r}: {path} holds no JSON object")

    def length(value: object) -> int | None:
        return value if _positive_int(value) and value < _NO_LIMIT else None

    fallback = length(config.get("max_seq_length")) or length(getattr(tokenizer, "model_max_length", None))
    query, document = length(config.get("query_length")) or fallback, length(config.get("document_length")) or fallback
    return (query, document) if query and document else None
