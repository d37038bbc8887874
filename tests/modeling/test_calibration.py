"""calibrate_bias (sparse_adapt/modeling/calibration.py) on tiny random models: its closed form
checked against the model's own logits, not only the median it reaches."""

from __future__ import annotations

import pytest
import torch

from corpora import GATROCRAPTIC
from sparse_adapt.data import load_documents
from sparse_adapt.modeling.base import set_bias
from sparse_adapt.modeling.calibration import calibrate_bias


def _texts() -> list[str]:
    return [d.text for d in load_documents(GATROCRAPTIC.docs)]


def _bias_free_max_logits(splade, text: str, bias: float) -> torch.Tensor:
    """(V,) max over the text's pieces of the full MLM logits, the shared ``bias`` taken off;
    special rows -inf (no vector holds them). The unchunked path, so not calibrate_bias's own."""
    batch = splade.tokenize([text], "document")
    with torch.no_grad():
        logits = splade.mlm(**batch).logits[0, :, : splade.vocab_size]  # (L, V), one text: no padding
    best = logits.amax(0) - bias
    best[splade.excluded_ids()] = float("-inf")
    return best


def test_a_target_below_one_is_refused_in_our_words(tiny_bert):
    # With 0, topk(1) leaves no target-th value beside the next one: an IndexError naming nothing.
    with pytest.raises(ValueError, match="target_active must be >= 1"):
        calibrate_bias(tiny_bert, _texts()[:2], 0)


def test_the_bias_sits_midway_between_the_targets_and_the_next_logit(tiny_bert):
    # One text is its own median. The bias is set off 0 first: the logits calibrate_bias reads
    # hold it, and the answer must not (b = -(v_k + v_k+1) / 2 of the bias-free logits).
    # Midway, not at v_k+1 itself: there the (k+1)-th term sits exactly at 0, one rounding from active.
    text = "zorblatt metrics track spending across every cluster"
    set_bias(tiny_bert.mlm, -0.3)
    tiny_bert.exclude_special_tokens()
    values = _bias_free_max_logits(tiny_bert, text, -0.3).sort(descending=True).values
    for k in (1, 5):
        expected = -float(values[k - 1] + values[k]) / 2
        assert calibrate_bias(tiny_bert, [text], k) == pytest.approx(expected, abs=1e-5)


def test_of_an_even_count_of_texts_the_upper_middle_threshold_is_taken(tiny_bert):
    # Two texts: the bias is the larger of their thresholds (index n // 2 of the sorted ones). The
    # other middle one is as much a median, but a base recalibrated with it gets another bias.
    texts = ["zorblatt metrics track spending across every cluster", "install the agent on each host"]
    thresholds = []
    for text in texts:
        values = _bias_free_max_logits(tiny_bert, text, 0.0).sort(descending=True).values
        thresholds.append(float(values[4] + values[5]) / 2)
    assert abs(thresholds[0] - thresholds[1]) > 1e-3  # the rule has two values to choose from
    assert calibrate_bias(tiny_bert, texts, 5) == pytest.approx(-max(thresholds), abs=1e-5)


def test_a_base_built_from_an_encoder_names_it_and_holds_the_given_bias(tmp_path):
    # settings.base is what a reader of sparse_adapt.json learns of where the weights came from.
    from sparse_adapt.modeling.calibration import encoder_to_splade
    from tests.conftest import make_tiny_bert

    tiny = make_tiny_bert()
    tiny.mlm.bert.save_pretrained(tmp_path / "enc")
    tiny.tokenizer.save_pretrained(tmp_path / "enc")
    splade = encoder_to_splade(str(tmp_path / "enc"), bias=-0.5)
    assert splade.settings.base == str(tmp_path / "enc")
    bias = splade.mlm.get_output_embeddings().bias
    keep = splade.output_mask.bool()
    assert bool((bias[keep] == -0.5).all()) and bool((bias[~keep] < -1.0e3).all())


def test_the_bias_does_not_depend_on_the_batch_size(tiny_bert):
    # Every text counts once whatever the batching: 26 texts in batches of 4 end with a batch of 2.
    texts = _texts()
    assert len(texts) % 4 != 0
    whole = calibrate_bias(tiny_bert, texts, 10, batch_size=len(texts))
    assert calibrate_bias(tiny_bert, texts, 10, batch_size=4) == pytest.approx(whole, abs=1e-5)
    assert calibrate_bias(tiny_bert, texts, 10, batch_size=1) == pytest.approx(whole, abs=1e-5)
