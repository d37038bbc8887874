"""``train_rows = "domain"``: only the domain tokens' rows of the vocabulary tensors learn."""

from __future__ import annotations

import copy

import pytest
import torch

from sparse_adapt.errors import ConfigError
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.training.config import config_from_dict
from sparse_adapt.training.freezing import domain_rows_only
from sparse_adapt.training.loop import make_optimizer
from tests.training.test_stages import SMALL, _params, _run, inputs, tiny_dir  # noqa: F401 (fixtures)


def _step(model: SpladeEncoder, weight_decay: float = 0.0) -> None:
    opt = make_optimizer(model.mlm, 1e-2, weight_decay)
    enc = model.tokenize(["zorblatt metrics track spending", "install the agent"], "document")
    model(enc["input_ids"], enc["attention_mask"]).sum().backward()  # (2, V) -> a loss every row feels
    opt.step()


def test_only_the_domain_rows_change_and_everything_is_restored(tiny_bert):
    ids = [5, 7]
    before = copy.deepcopy(tiny_bert.mlm.state_dict())
    flags = {n: p.requires_grad for n, p in tiny_bert.mlm.named_parameters()}
    with domain_rows_only(tiny_bert.mlm, ids):
        _step(tiny_bert)
    after = tiny_bert.mlm.state_dict()
    emb = tiny_bert.mlm.get_input_embeddings().weight
    vocab = emb.shape[0]
    changed_rows = set()
    for name, old in before.items():
        new = after[name]
        if old.ndim and old.shape[0] == vocab and "position" not in name:
            diff = (new != old).reshape(vocab, -1).any(1).nonzero().flatten().tolist()
            changed_rows.update(diff)
            assert set(diff) <= set(ids), name
        else:
            assert torch.equal(new, old), f"{name} changed although only domain rows may"
    assert changed_rows == set(ids)  # the domain rows did learn
    assert {n: p.requires_grad for n, p in tiny_bert.mlm.named_parameters()} == flags


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
    moved = False
    for name, old in extended.items():
        new = trained[name]
        if old.ndim and old.shape[0] == len(model.tokenizer) and "position" not in name:
            others = torch.ones(old.shape[0], dtype=torch.bool)
            others[domain] = False
            assert torch.equal(new[others], old[others]), name
            moved |= not torch.equal(new[domain], old[domain])
        else:
            assert torch.equal(new, old), f"{name} changed in a train_rows = domain run"
    assert moved
