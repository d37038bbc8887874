"""The benchmark workload: a synthetic corpus of realistic lengths and the model directories.

Documents are 1-10 sentences drawn (seeded) from the Gatrocraptic corpus, so their token
lengths spread over ~10-210 (median ~80) like real passages. Models are written once as plain Hugging
Face MLM directories, so every system under test loads exactly the same weights.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

from corpora import GATROCRAPTIC

# minilm: the offline base; bert-base: BERT-base-sized random weights; tiny: for smoke tests.
MODELS = ("minilm", "bert-base", "tiny")


def peak_rss_mb() -> float:
    """This process's peak resident memory in MiB.

    ``VmHWM`` from /proc, not ``ru_maxrss``: Linux carries ``ru_maxrss`` over ``exec`` from
    the process that spawned us (measured: every worker inherited the parent's 1.9 GB peak),
    while ``VmHWM`` belongs to the current address space alone.
    """
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB -> MiB
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux units (KiB); elsewhere approximate


def spec_sentences() -> list[str]:
    texts = [json.loads(line)["text"] for line in GATROCRAPTIC.docs.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [s for t in texts for s in re.split(r"(?<=[.!?])\s+", t.strip()) if s]


def synthetic_corpus(n_docs: int, seed: int = 0, min_sentences: int = 1, max_sentences: int = 10) -> list[str]:
    sentences = spec_sentences()
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(sentences) for _ in range(rng.randint(min_sentences, max_sentences)))
        for _ in range(n_docs)
    ]


def model_dir(name: str, root: Path) -> Path:
    """A saved SPLADE/HF MLM directory for ``name`` under ``root`` (built on first use)."""
    if name not in MODELS:
        raise ValueError(f"unknown benchmark model {name!r}; choose from {', '.join(MODELS)}")
    target = Path(root) / name
    if (target / "config.json").is_file():
        return target
    from sparse_adapt.modeling.encoder import SpladeEncoder

    if name == "minilm":
        splade = SpladeEncoder.from_pretrained("offline-minilm")
    else:
        splade = _random_bert(name)
    splade.save_pretrained(target)
    return target


def _random_bert(name: str):
    """BERT-base (or a tiny BERT) with random weights and a bias giving realistic sparsity.

    Speed does not depend on the weights' values, but sparsity does (CSR building, agreement
    checks), so the shared decoder bias is calibrated to the offline base's ~20 active terms.
    """
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from sparse_adapt.modeling.base import DEFAULT_TARGET_ACTIVE, set_bias
    from sparse_adapt.modeling.builtin import offline_splade_tiny_dir
    from sparse_adapt.modeling.calibration import calibrate_bias
    from sparse_adapt.modeling.encoder import SpladeEncoder, SpladeSettings

    torch.manual_seed(0)
    # The bert-base-uncased vocabulary, from the smaller of the two offline packages (17 MB
    # against MiniLM's 83 MB), so a random model can be built where only that one travels.
    tokenizer = AutoTokenizer.from_pretrained(offline_splade_tiny_dir())
    if name == "bert-base":
        config = BertConfig(vocab_size=len(tokenizer))  # defaults are BERT-base: 768 wide, 12 layers, 12 heads
    else:
        config = BertConfig(
            vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
        )
    splade = SpladeEncoder(BertForMaskedLM(config).eval(), tokenizer, SpladeSettings(base=f"random {name}"))
    splade.eval()
    set_bias(splade.mlm, calibrate_bias(splade, synthetic_corpus(32, seed=1), DEFAULT_TARGET_ACTIVE))
    return splade
