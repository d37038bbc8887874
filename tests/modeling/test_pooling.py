"""The chunked SPLADE head (sparse_adapt.modeling.pooling) against the straightforward computation.

The reference is written out here from the definition: full MLM logits, log(1 + relu),
padding masked, max over positions, special tokens zeroed.
"""

import warnings

import numpy as np
import pytest
import torch
from transformers import ElectraConfig, ElectraForMaskedLM

from sparse_adapt.modeling import pooling as encoding
from sparse_adapt.modeling.heads import head_support
from sparse_adapt.modeling.encoder import SpladeEncoder, SpladeSettings
from tests.conftest import _tokenizer, make_tiny_bert

TEXTS = [
    "Database timeout happens when the connection pool is exhausted or the query takes too long to execute.",
    "Reset your password",
    "Gatrocraptic analysis tools help identify spending patterns. Configure Gatrocraptic settings.",
    "ssl",
    "Memory leaks can be diagnosed using profiling tools like valgrind or heaptrack.",
]


def reference(splade: SpladeEncoder, input_ids, attention_mask) -> torch.Tensor:
    logits = splade.mlm(input_ids=input_ids, attention_mask=attention_mask).logits[..., : splade.vocab_size]
    act = torch.log1p(torch.relu(logits)) * attention_mask.unsqueeze(-1)  # (B, L, V)
    weights = act.amax(dim=1)  # (B, V)
    special = torch.tensor(splade.tokenizer.all_special_ids)
    return weights.index_fill(1, special, 0.0)


@pytest.fixture
def small_chunks(monkeypatch, tiny_mlm):
    """7-row chunks of this family's vocabulary (the tiny BPE families have 800 entries, not
    BERT's 30,522), so texts straddle chunk boundaries and one text spans several chunks."""
    vocab = tiny_mlm.vocab_size
    monkeypatch.setattr(encoding, "CHUNK_BYTES", 7 * 4 * vocab)
    assert encoding.rows_per_chunk(vocab) == 7
    rows = int(tiny_mlm.tokenize(TEXTS, "document")["attention_mask"].sum())
    assert rows > 3 * 7  # several chunks, whatever the tokenizer


def test_chunked_forward_equals_full_logits_with_padding(tiny_mlm, small_chunks):
    batch = tiny_mlm.tokenize(TEXTS, "document")
    assert (batch["attention_mask"] == 0).any()  # the batch really is padded
    with torch.no_grad():
        got = tiny_mlm(batch["input_ids"], batch["attention_mask"])
        want = reference(tiny_mlm, batch["input_ids"], batch["attention_mask"])
    assert (want > 0).sum() > 50  # a non-trivial comparison: many active terms
    torch.testing.assert_close(got, want)


# float64: in float32 the two passes sum thousands of terms in different orders, and that noise
# moved with the library (ModernBERT's attention: 4e-5 of the scale when this test was written,
# 1.3e-4 on transformers 5.24); in float64 it is ~1e-12, so a tight tolerance tells a reordered
# sum from a wrong gradient (off by ~1x). float32, the dtype training runs in, is checked with a
# tolerance far above that noise and far below such an error. (Chunks of 7 float32 rows hold 3
# float64 ones: boundaries are crossed in both.)
# The floor: a key bias's gradient is 0 in exact arithmetic (softmax ignores a constant per
# query), so it holds rounding noise alone.
@pytest.mark.parametrize("dtype, tolerance, floor", [(torch.float64, 1e-9, 1e-12), (torch.float32, 1e-3, 1e-6)])
def test_chunked_gradients_equal_full_logits_in_training_mode(tiny_mlm, small_chunks, dtype, tolerance, floor):
    tiny_mlm.to(dtype).train()  # dropout on: both passes draw the same masks from the same seed
    batch = tiny_mlm.tokenize(TEXTS, "document")
    coeff = torch.randn(len(TEXTS), tiny_mlm.vocab_size, generator=torch.Generator().manual_seed(3), dtype=dtype)

    def grads(fn):
        tiny_mlm.zero_grad()
        torch.manual_seed(11)
        w = fn(tiny_mlm, batch["input_ids"], batch["attention_mask"])
        ((w * coeff).sum() + w.sum()).backward()  # FLOPS-like + arbitrary per-term weighting
        return w.detach(), {n: p.grad.clone() for n, p in tiny_mlm.named_parameters() if p.grad is not None}

    w_got, g_got = grads(lambda m, i, a: m(i, a))
    w_want, g_want = grads(reference)
    torch.testing.assert_close(w_got, w_want)
    assert g_got.keys() == g_want.keys()
    # The embeddings, tied with the decoder, get both gradients; named after either module.
    tied = tiny_mlm.mlm.get_input_embeddings().weight
    decoder = [n for n, p in tiny_mlm.named_parameters() if p is tied]
    assert decoder and g_want[decoder[0]].abs().sum() > 0
    for name, want in g_want.items():
        scale = float(want.abs().max())
        torch.testing.assert_close(g_got[name], want, rtol=tolerance, atol=tolerance * scale + floor, msg=name)


def test_max_dot_matches_dense_max_and_handles_a_text_without_rows():
    torch.manual_seed(0)
    rows, weight = torch.randn(9, 4), torch.randn(6, 4)
    offsets = [0, 4, 4, 9]  # text 1 has no rows
    best, where = encoding.max_dot(rows, weight, offsets, chunk=3, with_argmax=True)
    dense = rows @ weight.T  # (9, 6)
    torch.testing.assert_close(best[0], dense[:4].amax(0))
    torch.testing.assert_close(best[2], dense[4:].amax(0))
    assert torch.isinf(best[1]).all() and (where[1] == -1).all()
    assert torch.equal(where[2], dense[4:].argmax(0) + 4)


def test_encode_sorts_by_length_and_returns_input_order(tiny_bert, monkeypatch):
    widths = []
    forward = SpladeEncoder.forward

    def spy(self, input_ids, attention_mask):
        widths.append(input_ids.shape[1])
        return forward(self, input_ids, attention_mask)

    monkeypatch.setattr(SpladeEncoder, "forward", spy)
    got = tiny_bert.encode(TEXTS, batch_size=2).toarray()
    lengths = sorted((len(tiny_bert.tokenizer(t)["input_ids"]) for t in TEXTS), reverse=True)
    assert widths == [lengths[0], lengths[2], lengths[4]]  # each batch pads to its own longest text
    for i, text in enumerate(TEXTS):
        batch = tiny_bert.tokenize([text], "document")
        with torch.no_grad():
            want = reference(tiny_bert, batch["input_ids"], batch["attention_mask"])[0].numpy()
        np.testing.assert_allclose(got[i], want, atol=1e-6)
    assert tiny_bert.encode([]).shape == (0, tiny_bert.vocab_size)


def test_encode_sorts_within_windows(tiny_bert, monkeypatch):
    from sparse_adapt.modeling import batching

    monkeypatch.setattr(batching, "SORT_WINDOW_BATCHES", 1)  # windows of 2 texts
    got = tiny_bert.encode(TEXTS, batch_size=2).toarray()
    want = np.vstack([tiny_bert.encode([t]).toarray() for t in TEXTS])
    np.testing.assert_allclose(got, want, atol=1e-6)


def _tiny_electra(settings: SpladeSettings) -> SpladeEncoder:
    """A family without a registered head (80 positions): pooled from full logits, with a warning."""
    tok = _tokenizer()
    cfg = ElectraConfig(vocab_size=len(tok), embedding_size=32, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=80,
                        pad_token_id=tok.pad_token_id)
    return SpladeEncoder(ElectraForMaskedLM(cfg).eval(), tok, settings)


def test_unknown_family_uses_full_logits_with_a_warning():
    torch.manual_seed(0)
    splade = _tiny_electra(SpladeSettings(doc_max_length=48))
    support = head_support(splade.mlm)
    assert support.parts is None and "ElectraForMaskedLM" in support.reason
    batch = splade.tokenize(TEXTS, "document")
    with pytest.warns(encoding.FullLogitsWarning, match="full"), torch.no_grad():
        got = splade(batch["input_ids"], batch["attention_mask"])
    with torch.no_grad():
        want = reference(splade, batch["input_ids"], batch["attention_mask"])
    torch.testing.assert_close(got, want)


def test_an_unregistered_family_is_cut_to_its_position_embeddings():
    """Electra with 80 positions kept the default 256-piece document length: a long text raised
    "expanded size of the tensor (256) must match the existing size (80)" from the model."""
    from transformers import (
        CamembertConfig, CamembertForMaskedLM, DebertaV2Config, DebertaV2ForMaskedLM, IBertConfig, IBertForMaskedLM,
    )

    from sparse_adapt.modeling.heads import max_pieces

    tok = _tokenizer()
    splade = _tiny_electra(SpladeSettings())
    assert max_pieces(splade.mlm) == 80 and splade.max_length("document") == 80
    with pytest.warns(encoding.FullLogitsWarning):
        vec = splade.encode([" ".join(["budget tools"] * 200)], "document")  # ~400 pieces, cut to 80
    assert vec.nnz > 0
    # RoBERTa-style positions (from padding_idx + 1): 82 rows hold 80 pieces
    camembert = CamembertForMaskedLM(CamembertConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=82, pad_token_id=1))
    assert max_pieces(camembert) == 80
    small = dict(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    # I-BERT's quantised table (no nn.Embedding) numbers positions as RoBERTa does
    assert max_pieces(IBertForMaskedLM(IBertConfig(**small, max_position_embeddings=82, pad_token_id=1))) == 80
    # DeBERTa-v3 has relative positions only: no bound, though its config names 512
    assert max_pieces(DebertaV2ForMaskedLM(DebertaV2Config(**small, position_biased_input=False))) is None


def test_roberta_style_positions_count_from_whatever_padding_index_the_model_has():
    """Positions start at padding_idx + 1, so a pad id of 0 leaves one row more than the usual 1:
    34 rows hold 33 pieces, not 32 (a limit off by one either way cuts or overruns the table)."""
    from transformers import (
        CamembertConfig, CamembertForMaskedLM, RobertaConfig, RobertaForMaskedLM, XLMRobertaConfig,
        XLMRobertaForMaskedLM,
    )

    from sparse_adapt.modeling.heads import max_pieces

    small = dict(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                 max_position_embeddings=34)
    for pad, pieces in ((0, 33), (1, 32), (3, 30)):
        roberta = RobertaForMaskedLM(RobertaConfig(**small, pad_token_id=pad))  # registered family
        camembert = CamembertForMaskedLM(CamembertConfig(**small, pad_token_id=pad))  # read from its table
        xlmr = XLMRobertaForMaskedLM(XLMRobertaConfig(**small, pad_token_id=pad))
        assert (max_pieces(roberta), max_pieces(camembert), max_pieces(xlmr)) == (pieces,) * 3, pad
        # the longest input allowed runs; one piece more indexes past the table
        ids = torch.full((1, pieces), 5)
        roberta.eval()(input_ids=ids)
        with pytest.raises((IndexError, RuntimeError)):
            roberta(input_ids=torch.full((1, pieces + 1), 5))


def test_supported_families_do_not_warn(tiny_mlm):
    batch = tiny_mlm.tokenize(TEXTS[:2], "query")
    with warnings.catch_warnings():
        warnings.simplefilter("error", encoding.FullLogitsWarning)
        tiny_mlm(batch["input_ids"], batch["attention_mask"])


@pytest.mark.slow
def test_offline_base_chunked_equals_full_logits(offline_base, monkeypatch):
    # 7-row chunks: the default (~549 rows of MiniLM's vocabulary) would hold the whole batch
    monkeypatch.setattr(encoding, "CHUNK_BYTES", 7 * 4 * offline_base.vocab_size)
    batch = offline_base.tokenize(TEXTS, "document")
    assert int(batch["attention_mask"].sum()) > 3 * 7
    with torch.inference_mode():
        got = offline_base(batch["input_ids"], batch["attention_mask"])
        want = reference(offline_base, batch["input_ids"], batch["attention_mask"])
    torch.testing.assert_close(got, want)
    assert torch.equal(got.topk(10).indices, want.topk(10).indices)


def test_a_head_padded_past_its_tokenizer_pools_the_tokenizers_rows():
    """ModernBERT rounds its rows up to a multiple of 64: the extra rows (random here, with a
    random bias) are no token and must not be pooled in place of the first ``vocab``."""
    splade = make_tiny_bert()
    vocab = splade.vocab_size
    splade.mlm.resize_token_embeddings(vocab + 16, mean_resizing=False)
    with torch.no_grad():
        splade.mlm.get_output_embeddings().bias.normal_()
    splade = SpladeEncoder(splade.mlm, splade.tokenizer, splade.settings)
    assert splade.vocab_size == vocab and head_support(splade.mlm).parts is not None
    batch = splade.tokenize(TEXTS, "document")
    with torch.no_grad():
        got = splade(batch["input_ids"], batch["attention_mask"])
        want = reference(splade, batch["input_ids"], batch["attention_mask"])
    assert got.shape == (len(TEXTS), vocab)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("frozen", ["weight", "rows"])
def test_pooled_max_logits_has_gradients_when_only_one_input_needs_them(frozen):
    """A frozen decoder (or frozen rows) still leaves the other input trainable: the sparse
    backward must run whenever either needs a gradient."""
    torch.manual_seed(0)
    rows, weight = torch.randn(9, 4), torch.randn(6, 4)
    trained = weight if frozen == "rows" else rows
    trained.requires_grad_(True)
    offsets = [0, 4, 9]
    encoding.pooled_max_logits(rows, weight, offsets, chunk=3).sum().backward()
    got = trained.grad.clone()
    trained.grad = None
    dense = rows @ weight.T  # (9, 6)
    torch.stack([dense[:4].amax(0), dense[4:].amax(0)]).sum().backward()
    assert got.abs().sum() > 0
    torch.testing.assert_close(got, trained.grad)


def test_the_cli_shows_the_full_logits_warning_as_one_line(monkeypatch, capsys):
    """The warning is one of ours: the CLI prints it as one ``warning:`` line, not in Python's
    format (a source path, then the line that warned)."""
    import sparse_adapt.cli as cli

    splade = _tiny_electra(SpladeSettings(doc_max_length=48))
    batch = splade.tokenize(TEXTS[:1], "document")

    def app(**kwargs):
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("always")
            splade(batch["input_ids"], batch["attention_mask"])

    monkeypatch.setattr(cli, "app", app)
    assert cli.main(["encode", "x"]) == 0
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("warning: ") and "ElectraForMaskedLM" in line


def test_the_chunk_comment_s_rows_and_full_logits_size_follow_from_chunk_bytes():
    # The comment above CHUNK_BYTES sizes the block for the offline base's vocabulary; recomputed
    # from the constant and the base's tokenizer, so either changed alone fails here.
    import inspect
    import re

    text = " ".join(inspect.getsource(encoding).replace("#", " ").split())
    vocab = len(_tokenizer())
    said = re.search(r"(\d+) MiB is (\d+) rows at V = ([\d,]+)", text)
    assert said, "the CHUNK_BYTES comment no longer says how many rows it is"
    assert int(said.group(1)) * 2**20 == encoding.CHUNK_BYTES
    assert (int(said.group(2)), int(said.group(3).replace(",", ""))) == (encoding.rows_per_chunk(vocab), vocab)
    full = re.search(r"batch (\d+) x (\d+) tokens \(the full logits would be ([\d.]+) GiB\)", text)
    texts, tokens, gib = int(full.group(1)), int(full.group(2)), full.group(3)
    assert f"{texts * tokens * vocab * 4 / 2**30:.{len(gib.split('.')[1])}f}" == gib  # fp32 logits
