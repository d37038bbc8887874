"""model_sha256: what an index records of the model that encoded it."""

from __future__ import annotations

import json

import pytest
import torch

from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.modeling.fingerprint import model_sha256
from sparse_adapt.modeling.settings import SETTINGS_FILE
from tests.conftest import make_tiny_bert


def test_the_hash_follows_weights_and_the_document_window_not_the_query_window(tmp_path):
    splade = make_tiny_bert()
    splade.save_pretrained(tmp_path / "m")
    saved = model_sha256(splade)
    assert model_sha256(SpladeEncoder.from_pretrained(tmp_path / "m")) == saved  # reloading changes nothing

    def set_lengths(**lengths: int) -> None:  # both files, as a user must (they are checked to agree)
        for name, keys in ((SETTINGS_FILE, ("query_max_length", "doc_max_length")),
                           ("sentence_bert_config.json", ("query_length", "document_length"))):
            path = tmp_path / "m" / name
            edited = json.loads(path.read_text())
            for ours, key in zip(("query", "doc"), keys):
                if ours in lengths:
                    edited[key] = lengths[ours]
            path.write_text(json.dumps(edited))

    set_lengths(query=8)  # only queries change: the index's vectors are the same
    assert model_sha256(SpladeEncoder.from_pretrained(tmp_path / "m")) == saved

    set_lengths(doc=8)  # documents cut at 8 pieces: other vectors from the same weights
    short = SpladeEncoder.from_pretrained(tmp_path / "m")
    assert short.settings.doc_max_length == 8
    assert model_sha256(short) != saved

    with torch.no_grad():
        splade.mlm.get_output_embeddings().bias[5] += 1e-3
    assert model_sha256(splade) != saved


def test_model_hashes_are_the_full_and_the_weights_only_hash_in_one_pass():
    from sparse_adapt.modeling.fingerprint import model_hashes

    splade = make_tiny_bert()
    assert model_hashes(splade) == (model_sha256(splade), model_sha256(splade, False))
    assert model_sha256(splade) != model_sha256(splade, False)


# (recorded by the index, recorded by the query side, same model?): F/W = full / weights-only hash
# of model A, f/w = of model B (B: A's weights with another document window), "" = not recorded.
@pytest.mark.parametrize("index, query, same", [
    (("FA", "WA"), ("FA", "WA"), True),    # both written since the window counted
    (("FB", "WA"), ("FA", "WA"), False),   # same weights, another document window: other vectors
    (("WA", ""), ("FA", "WA"), True),      # an index from before the window counted (its one hash: weights)
    (("FA", "WA"), ("WA", ""), True),      # an ONNX export from before it
    (("WA", ""), ("WA", ""), True),        # both from before
    (("FA", ""), ("FA", "WA"), True),      # written on the day the full hash came, before the weights one
    (("FA", ""), ("WA", ""), False),       # nothing shared to compare: said, as before
    (("WB", ""), ("FA", "WA"), False),     # other weights
])
def test_recorded_hash_pairs_match_across_the_versions_that_wrote_them(index, query, same):
    from sparse_adapt.modeling.fingerprint import same_model

    hashes = {"FA": "a" * 64, "WA": "b" * 64, "FB": "c" * 64, "WB": "d" * 64, "": ""}
    assert same_model(tuple(hashes[h] for h in index), tuple(hashes[h] for h in query)) is same


def test_the_hash_follows_the_vocabulary_even_where_the_weights_are_the_same():
    """A token added to the tokenizer alone (no row for it yet) changes which ids texts become:
    an index encoded through one vocabulary is no index of the other."""
    splade = make_tiny_bert()
    before = model_sha256(splade), model_sha256(splade, False)
    splade.tokenizer.add_tokens(["zorblatt"])
    after = model_sha256(splade), model_sha256(splade, False)
    assert after[0] != before[0] and after[1] != before[1]


def test_the_hash_follows_the_vocabulary_s_words_not_only_its_ids():
    """Two extensions of one base by different terms give their new tokens the same id: an index
    encoded through one vocabulary is no index of the other."""
    from sparse_adapt.modeling.fingerprint import model_hashes

    first, second = make_tiny_bert(), make_tiny_bert()
    first.tokenizer.add_tokens(["zorblatt"])
    second.tokenizer.add_tokens(["quaxolin"])
    assert first.tokenizer.get_vocab()["zorblatt"] == second.tokenizer.get_vocab()["quaxolin"]
    assert all(a != b for a, b in zip(model_hashes(first), model_hashes(second)))


def test_a_hash_recorded_by_an_earlier_version_is_computed_again_unchanged():
    """Indexes and exports keep the hash they were written with and a search recomputes the
    model's: any change to what is hashed, or how, would refuse every index written before it.
    A fixed model (tied rows, as an MLM head's; a non-ASCII entry) and its hashes as recorded."""
    from types import SimpleNamespace

    from sparse_adapt.modeling.fingerprint import model_hashes

    emb, head = torch.nn.Embedding(3, 2), torch.nn.Linear(2, 3)
    with torch.no_grad():
        emb.weight.copy_(torch.arange(6.0).reshape(3, 2) / 4)
        head.bias.copy_(torch.tensor([-1.0, 0.0, 0.5]))
    head.weight = emb.weight  # tied: the state dict holds it under both names
    splade = SimpleNamespace(mlm=torch.nn.Sequential(emb, head), settings=SimpleNamespace(doc_max_length=64),
                             tokenizer=SimpleNamespace(get_vocab=lambda: {"[PAD]": 0, "zürich": 1, "api": 2}))
    assert model_hashes(splade) == ("b26f1be1c133f05b44c8542f4573a23ced29e53ba96f54576ca7f48219c9d45e",
                                    "f1af81e1d802acdce07fcab27a843f95993c03bb68ee926b58707da59b72b708")
