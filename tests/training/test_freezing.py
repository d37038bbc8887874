"""``train_rows = "domain"``: only the domain tokens' rows of the vocabulary tensors learn."""

from __future__ import annotations

import copy

import pytest
import torch

from sparse_adapt.errors import ConfigError
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.training.config_files import config_from_dict
from sparse_adapt.training.freezing import domain_rows_only
from sparse_adapt.training.loop import make_optimizer
from tests.training.test_stages import SMALL, _params, _run, inputs, tiny_dir  # noqa: F401 (fixtures)


def _step(model: SpladeEncoder) -> None:
    opt = make_optimizer(model.mlm, 1e-2, 0.0)
    enc = model.tokenize(["zorblatt metrics track spending", "install the agent"], "document")
    model(enc["input_ids"], enc["attention_mask"]).sum().backward()  # (2, V) -> a loss every row feels
    opt.step()


def _changed_rows(before: dict, after: dict, vocab: int) -> set[int]:
    """The vocabulary rows that differ in any tensor indexed by token id; any other tensor
    that changed fails the test."""
    rows: set[int] = set()
    for name, old in before.items():
        new = after[name]
        if old.ndim and old.shape[0] == vocab and "position" not in name:
            rows.update((new != old).reshape(vocab, -1).any(1).nonzero().flatten().tolist())
        else:
            assert torch.equal(new, old), f"{name} changed although only vocabulary rows may"
    return rows


def test_only_the_domain_rows_change_and_everything_is_restored(tiny_bert):
    ids = [5, 7]
    before = copy.deepcopy(tiny_bert.mlm.state_dict())
    flags = {n: p.requires_grad for n, p in tiny_bert.mlm.named_parameters()}
    with domain_rows_only(tiny_bert.mlm, ids):
        _step(tiny_bert)
    vocab = tiny_bert.mlm.get_input_embeddings().weight.shape[0]
    assert _changed_rows(before, tiny_bert.mlm.state_dict(), vocab) == set(ids)  # they, and only they, learned
    assert {n: p.requires_grad for n, p in tiny_bert.mlm.named_parameters()} == flags


def test_the_domain_rows_of_the_decoder_bias_learn_too(tiny_bert):
    # The bias alone decides how readily a token fires: a freeze that left the (V,) bias out would
    # train the domain rows' weights but never their threshold. _changed_rows above takes the
    # union over tensors, so the embedding rows alone would satisfy it.
    ids = [5, 7]
    bias = tiny_bert.mlm.get_output_embeddings().bias
    before = bias.detach().clone()
    with domain_rows_only(tiny_bert.mlm, ids):
        _step(tiny_bert)
    assert (bias.detach() != before).nonzero().flatten().tolist() == ids


def test_after_the_freeze_every_row_trains_again_and_what_was_frozen_stays_frozen(tiny_bert):
    # Every parameter of a fresh model has requires_grad True, so restoring "True" and restoring
    # the saved flag cannot be told apart there: one parameter is frozen by the caller first.
    frozen = next(p for n, p in tiny_bert.mlm.named_parameters() if "position_embeddings" in n)
    frozen.requires_grad_(False)
    with domain_rows_only(tiny_bert.mlm, [5, 7]):
        pass
    assert not frozen.requires_grad
    # The row hooks are removed on exit: a step after it moves rows other than 5 and 7 again.
    emb = tiny_bert.mlm.get_input_embeddings().weight
    before = emb.detach().clone()
    _step(tiny_bert)
    assert set((emb.detach() != before).any(1).nonzero().flatten().tolist()) - {5, 7}


def test_without_the_freeze_the_same_step_changes_other_rows(tiny_bert):
    # The negative control: the check above would catch a freeze that does nothing.
    before = tiny_bert.mlm.get_input_embeddings().weight.detach().clone()
    _step(tiny_bert)
    changed = (tiny_bert.mlm.get_input_embeddings().weight != before).any(1).nonzero().flatten().tolist()
    assert set(changed) - {5, 7}


def test_a_model_without_domain_tokens_is_refused(tiny_bert):
    with pytest.raises(ConfigError, match="train_rows"):
        with domain_rows_only(tiny_bert.mlm, []):
            pass


def test_config_accepts_all_or_domain_and_nothing_else():
    assert config_from_dict({"warmup": {"train_rows": "domain"}}).warmup.train_rows == "domain"
    assert config_from_dict({}).distill.train_rows == "all"
    with pytest.raises(ConfigError, match="distill.train_rows"):
        config_from_dict({"distill": {"train_rows": "new"}})


def test_a_domain_rows_pipeline_keeps_every_base_weight(tiny_dir, inputs, tmp_path):  # noqa: F811
    rows = {k: {**v, "train_rows": "domain", "weight_decay": 0.01} for k, v in SMALL.items()}
    final = _run(tiny_dir, inputs, tmp_path / "run", config=rows)
    extended, trained = _params(tmp_path / "run" / "extend"), _params(final)
    model = SpladeEncoder.from_pretrained(final)
    domain = model.settings.domain_token_ids
    assert domain
    changed = _changed_rows(extended, trained, len(model.tokenizer))
    assert changed and changed <= set(domain)  # the domain rows moved, no other weight did
