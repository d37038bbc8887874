"""Each loss on small hand-made tensors; expected values are the formulas worked by hand."""

from __future__ import annotations

import math

import pytest
import torch

from sparse_adapt.losses import (
    ContrastiveLoss, DistillationLoss, DomainHingeLoss, FlopsLoss, KDLoss, QueryExpansionLoss, RankingLoss,
    sparsity_ramp,
)


def neg_log_sigmoid(x: float) -> float:
    """-log sigmoid(x), the query-expansion loss of one target token."""
    return -math.log(1 / (1 + math.exp(-x)))


def test_kd_is_mean_squared_error():
    student = torch.tensor([[1.0, 2.0], [0.0, 4.0]])
    teacher = torch.tensor([[3.0, 2.0], [-1.0, 1.0]])
    # (2^2 + 0 + 1^2 + 3^2) / 4
    assert KDLoss()(student, teacher).item() == pytest.approx((4 + 0 + 1 + 9) / 4)


def test_kd_ignores_padded_candidates_and_rejects_shape_mismatch():
    student = torch.tensor([[1.0, 100.0]])
    teacher = torch.tensor([[3.0, 0.0]])
    mask = torch.tensor([[True, False]])
    assert KDLoss()(student, teacher, mask).item() == pytest.approx(4.0)
    with pytest.raises(ValueError, match="differ"):
        KDLoss()(torch.zeros(1, 3), torch.zeros(1, 2))
    # one query's teacher scores as a column: as many values, but it would broadcast to (3, 3)
    with pytest.raises(ValueError, match="differ"):
        KDLoss()(torch.zeros(1, 3), torch.zeros(3, 1))


def test_kd_with_every_candidate_padded_is_0_not_nan():
    # a batch whose lists are all padding has no pair: 0, as the ranking loss gives
    loss = KDLoss()(torch.tensor([[1.0, 100.0]]), torch.tensor([[3.0, 0.0]]), torch.zeros(1, 2, dtype=torch.bool))
    assert loss.item() == 0.0


def test_ranking_targets_teachers_top_document_with_temperature():
    student = torch.tensor([[2.0, 4.0, 0.0]])
    teacher = torch.tensor([[1.0, 9.0, -8.0]])  # top = index 1
    tau = 2.0
    z = [s / tau for s in (2.0, 4.0, 0.0)]
    expected = -(z[1] - math.log(sum(math.exp(v) for v in z)))
    assert RankingLoss(tau)(student, teacher).item() == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError):
        RankingLoss(0.0)


def test_ranking_leaves_out_a_query_without_candidates_and_is_0_without_any():
    student = torch.tensor([[2.0, 4.0, 0.0], [1.0, 1.0, 1.0]], requires_grad=True)
    teacher = torch.tensor([[1.0, 9.0, -8.0], [5.0, 1.0, 1.0]])
    mask = torch.tensor([[True, True, True], [False, False, False]])  # query 2: padding only
    z = [2.0, 4.0, 0.0]
    expected = -(z[1] - math.log(sum(math.exp(v) for v in z)))  # query 1 alone
    loss = RankingLoss(1.0)(student, teacher, mask)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    none = RankingLoss(1.0)(student, teacher, torch.zeros(2, 3, dtype=torch.bool))
    none.backward()  # a graph to backpropagate through, with nothing in it
    assert none.item() == 0.0 and torch.equal(student.grad, torch.zeros(2, 3))
    assert RankingLoss(1.0)(torch.zeros(0, 3), torch.zeros(0, 3)).item() == 0.0


def test_ranking_takes_the_first_of_tied_teacher_tops_and_is_0_on_empty_lists():
    student = torch.tensor([[1.0, 3.0, 0.0]])
    teacher = torch.tensor([[5.0, 5.0, 1.0]])  # candidates 0 and 1 tie at the top: target 0
    z = [1.0, 3.0, 0.0]
    expected = -(z[0] - math.log(sum(math.exp(v) for v in z)))
    assert RankingLoss(1.0)(student, teacher).item() == pytest.approx(expected, rel=1e-6)
    # queries without a candidate slot at all (N = 0) and no mask: nothing to rank
    assert RankingLoss(1.0)(torch.zeros(2, 0), torch.zeros(2, 0)).item() == 0.0


def test_flops_is_product_of_means_and_ignores_domain_ids():
    q = torch.tensor([[1.0, 2.0, 0.0], [3.0, 0.0, 4.0]])  # means: 2, 1, 2
    d = torch.tensor([[2.0, 2.0, 2.0], [0.0, 4.0, 6.0]])  # means: 1, 3, 4
    assert FlopsLoss()(q, d, []).item() == pytest.approx(2 * 1 + 1 * 3 + 2 * 4)
    # token 2 is a domain token: its 2 * 4 drops out, however large it is
    assert FlopsLoss()(q, d, [2]).item() == pytest.approx(2 * 1 + 1 * 3)
    q2 = q.clone()
    q2[:, 2] = 100.0
    assert FlopsLoss()(q2, d, [2]).item() == pytest.approx(2 * 1 + 1 * 3)
    # every domain id is exempt, not only the first (a set, as the trainer passes it)
    assert FlopsLoss()(q2, d, [2, 0]).item() == pytest.approx(1 * 3)
    assert FlopsLoss()(q2, d, {0, 2}).item() == pytest.approx(1 * 3)


def test_domain_hinge_only_on_present_tokens_and_zero_above_tau_min():
    # vocabulary of 5, D = {3, 4}
    weights = torch.tensor([[0.0, 0.0, 0.0, 0.5, 0.0], [0.0, 0.0, 0.0, 2.5, 1.0]])
    input_ids = torch.tensor([[1, 3, 0], [3, 4, 2]])  # text 0 holds 3; text 1 holds 3 and 4
    loss = DomainHingeLoss(tau_min=2.0)(weights, input_ids, [3, 4])
    # text 0: (2 - 0.5) / 2 ; text 1: (max(0, 2 - 2.5) + (2 - 1)) / 2 ; mean over the 2 texts
    assert loss.item() == pytest.approx(((1.5) / 2 + (0 + 1.0) / 2) / 2)
    above = torch.tensor([[0.0, 0.0, 0.0, 2.1, 3.0]])
    assert DomainHingeLoss(2.0)(above, torch.tensor([[3, 4]]), [3, 4]).item() == 0.0
    absent = torch.zeros(1, 5)  # token 4 absent from the text: no penalty even at weight 0
    assert DomainHingeLoss(2.0)(absent, torch.tensor([[1, 2]]), [3, 4]).item() == 0.0
    assert DomainHingeLoss(2.0)(absent, torch.tensor([[1, 2]]), []).item() == 0.0
    # a token that occurs twice in a text is one presence, not two pushes
    twice = DomainHingeLoss(2.0)(weights[:1], torch.tensor([[3, 1, 3]]), [3, 4])
    assert twice.item() == pytest.approx(1.5 / 2)
    # a text without any domain token counts in the mean over texts, with 0
    mixed = DomainHingeLoss(2.0)(torch.cat([weights[:1], absent]), torch.tensor([[3, 1], [1, 2]]), [3, 4])
    assert mixed.item() == pytest.approx(1.5 / 2 / 2)


def test_contrastive_pairs_positives_against_non_positive_teacher_scores():
    student = torch.tensor([[6.0, 3.0, 2.0, 0.0]])
    teacher = torch.tensor([[10.0, 0.5, 0.0, -8.0]])  # P = {0, 1}, N = {2, 3} (0.0 counts as negative)
    m = 5.0
    pairs = [max(0.0, m - (si - sj)) for si in (6.0, 3.0) for sj in (2.0, 0.0)]
    assert ContrastiveLoss(m)(student, teacher).item() == pytest.approx(sum(pairs) / 4)
    all_pos = torch.tensor([[1.0, 2.0]])
    assert ContrastiveLoss(m)(torch.tensor([[0.0, 9.0]]), all_pos).item() == 0.0


def test_contrastive_leaves_out_a_query_without_a_positive_negative_pair():
    student = torch.tensor([[6.0, 3.0], [0.0, 9.0]])
    teacher = torch.tensor([[10.0, -8.0], [1.0, 2.0]])  # query 1: positives only, no pair
    # query 0 alone: 5 - (6 - 3) = 2; averaging query 1 in as 0 would give 1
    assert ContrastiveLoss(5.0)(student, teacher).item() == pytest.approx(2.0)


def test_margin_and_tau_min_of_0_are_accepted_and_negative_ones_refused():
    # 0 is a valid config value for both (distill.margin, distill.tau_min)
    student, teacher = torch.tensor([[1.0, 3.0]]), torch.tensor([[1.0, -1.0]])
    assert ContrastiveLoss(0.0)(student, teacher).item() == pytest.approx(2.0)  # only the misordered pair: 0 - (1 - 3)
    weights, ids = torch.tensor([[0.0, 0.5]]), torch.tensor([[1, 0]])
    assert DomainHingeLoss(0.0)(weights, ids, [1]).item() == 0.0
    with pytest.raises(ValueError, match="margin"):
        ContrastiveLoss(-1.0)
    with pytest.raises(ValueError, match="tau_min"):
        DomainHingeLoss(-1.0)


def test_query_expansion_is_negative_log_sigmoid_over_targets():
    w = torch.tensor([[0.0, 1.0, 2.0], [0.0, 0.0, 5.0]])
    targets = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]])  # columns = domain ids [0, 1, 2]
    # query 0: mean over {0, 2}; query 1 has no target and is left out of the mean
    assert QueryExpansionLoss()(w, targets, [0, 1, 2]).item() == pytest.approx((neg_log_sigmoid(0.0) + neg_log_sigmoid(2.0)) / 2)
    assert QueryExpansionLoss()(w, torch.zeros(2, 3), [0, 1, 2]).item() == 0.0
    # two queries with targets: the mean of their per-query means, not the sum
    both = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    assert QueryExpansionLoss()(w, both, [0, 1, 2]).item() == pytest.approx(((neg_log_sigmoid(0.0) + neg_log_sigmoid(2.0)) / 2 + neg_log_sigmoid(5.0)) / 2)


def test_domain_losses_follow_the_order_of_domain_ids_not_sorted_ids():
    # D comes in term order (e.g. base tokens ``ssl``, ``api``), so it is not sorted: column j
    # of presence and targets is domain_ids[j]
    weights = torch.tensor([[0.0, 0.0, 0.0, 0.5, 0.0], [0.0, 0.0, 0.0, 2.5, 1.0]])
    input_ids = torch.tensor([[1, 3, 0], [3, 4, 2]])
    hinge = DomainHingeLoss(2.0)
    assert hinge(weights, input_ids, [4, 3]).item() == pytest.approx(hinge(weights, input_ids, [3, 4]).item())
    w = torch.tensor([[0.0, 1.0, 2.0]])
    # targets column 0 is token 2, column 1 is token 0
    assert QueryExpansionLoss()(w, torch.tensor([[1.0, 0.0]]), [2, 0]).item() == pytest.approx(neg_log_sigmoid(2.0))


def test_sparsity_ramp_is_quadratic_then_flat():
    assert sparsity_ramp(5, 10) == pytest.approx(0.25)
    assert sparsity_ramp(10, 10) == 1.0 and sparsity_ramp(50, 10) == 1.0
    assert sparsity_ramp(1, 0) == 1.0


def test_distillation_combines_the_six_terms_with_their_weights():
    # V = 4, D = {3}; one query, 2 unique documents, candidates [doc1, doc0]
    q = torch.tensor([[1.0, 0.0, 2.0, 0.0]], requires_grad=True)
    d = torch.tensor([[1.0, 1.0, 0.0, 1.0], [0.0, 2.0, 1.0, 0.5]], requires_grad=True)
    q_ids = torch.tensor([[1, 2]])
    d_ids = torch.tensor([[3, 0], [1, 3]])  # both documents contain token 3
    index = torch.tensor([[1, 0]])
    teacher = torch.tensor([[10.0, -8.0]])
    mask = torch.tensor([[True, True]])
    w = dict(kd=0.5, ret=2.0, sp=3.0, dom=4.0, ctr=5.0, qexp=6.0)
    # margin 2: the contrastive hinge is active (at 1 it would sit on its kink, where the
    # gradient is a convention)
    fn = DistillationLoss(**w, temperature=1.0, tau_min=2.0, margin=2.0, sp_warmup_steps=4)
    out = fn(query_weights=q, query_input_ids=q_ids, doc_weights=d, doc_input_ids=d_ids, doc_index=index,
             teacher=teacher, mask=mask, domain_ids=[3], step=2)
    # s: q . doc1 = 0 + 0 + 2 = 2 ; q . doc0 = 1
    assert out["kd"].item() == pytest.approx(((10 - 2) ** 2 + (-8 - 1) ** 2) / 2)
    assert out["ret"].item() == pytest.approx(-(2.0 - math.log(math.exp(2.0) + math.exp(1.0))))
    assert out["sp"].item() == pytest.approx(1.0 * 0.5 + 0.0 * 1.5 + 2.0 * 0.5)  # token 3 excluded
    # hinge: query lacks token 3; doc0 weight 1 -> 1, doc1 weight 0.5 -> 1.5; mean over 3 texts
    assert out["dom"].item() == pytest.approx((0 + 1.0 + 1.5) / 3)
    assert out["ctr"].item() == pytest.approx(max(0.0, 2.0 - (2.0 - 1.0)))
    assert out["qexp"].item() == pytest.approx(math.log(2.0))  # w_q^3 = 0, in the positive doc1
    ramp = (2 / 4) ** 2
    expected = sum(w[k] * out[k].item() * (ramp if k == "sp" else 1.0) for k in w)
    assert out["total"].item() == pytest.approx(expected)
    # the terms are detached, for logging (.numpy() of one still in the graph raises)
    assert out["total"].requires_grad and not any(out[k].requires_grad for k in w)
    out["total"].backward()
    # d total / d doc0[token 2]; s(doc0) = q . doc0 moves by q_2 = 2 per unit:
    #   KD   0.5 x (s0 + 8) x 2           = 9
    #   Ret  2 x softmax(s)_doc0 x 2      = 4 / (e + 1)
    #   Sp   3 x ramp 1/4 x q_2 x 1/2     = 0.75   (mean over the 2 documents)
    #   Ctr  5 x 2 (hinge active)         = 10
    #   Dom, QExp: no token-2 term        = 0
    assert d.grad[0, 2].item() == pytest.approx(9 + 4 / (math.e + 1) + 0.75 + 10)
    # token 3 is a domain token that q does not fire: only the hinge reaches it, -dom / 3 texts
    assert d.grad[:, 3].tolist() == pytest.approx([-4 / 3, -4 / 3])
    # d total / d q[token 1], through both scores: s(doc1) moves by 2 per unit, s(doc0) by 1.
    #   d/ds(doc1): KD 0.5 x (2 - 10) = -4, Ret 2 x (p1 - 1) = -2 / (e + 1), Ctr -5
    #   d/ds(doc0): KD 0.5 x (1 + 8) = 4.5, Ret 2 x p0 = 2 / (e + 1), Ctr +5
    #   Sp: 3 x ramp 1/4 x mean of the documents' token 1, 1.5 = 1.125
    assert q.grad[0, 1].item() == pytest.approx(2 * (-9 - 2 / (math.e + 1)) + (9.5 + 2 / (math.e + 1)) + 1.125)
    # d total / d q[token 3]: the scores (doc1 holds 0.5 of it, doc0 1) and QExp, 6 x -sigmoid(-0) = -3
    assert q.grad[0, 3].item() == pytest.approx(0.5 * (-9 - 2 / (math.e + 1)) + (9.5 + 2 / (math.e + 1)) - 3)


def test_distillation_hinge_pushes_a_domain_token_the_query_names():
    # V = 4, D = {3}: the query names token 3 at weight 0.5; the document lacks it
    q = torch.tensor([[0.0, 1.0, 0.0, 0.5]], requires_grad=True)
    out = DistillationLoss(kd=0.0, ret=0.0, sp=0.0, ctr=0.0, qexp=0.0, dom=1.0, tau_min=2.0)(
        query_weights=q, query_input_ids=torch.tensor([[3, 1]]), doc_weights=torch.tensor([[0.0, 1.0, 0.0, 0.0]]),
        doc_input_ids=torch.tensor([[1, 2]]), doc_index=torch.tensor([[0]]), teacher=torch.tensor([[1.0]]),
        mask=torch.ones(1, 1, dtype=torch.bool), domain_ids=[3], step=1,
    )
    assert out["dom"].item() == pytest.approx((2 - 0.5) / 2)  # over the query and the document
    out["total"].backward()
    assert q.grad[0, 3].item() == pytest.approx(-1 / 2)


def test_distillation_passes_its_temperature_and_tau_min_to_the_terms():
    # The trainer's defaults (distill.temperature 2, tau_min 3.5) differ from the terms' own
    # (1 and 2): a value not handed on would be silently replaced.
    q = torch.tensor([[1.0, 0.0, 2.0, 0.0]])
    d = torch.tensor([[1.0, 1.0, 0.0, 1.0], [0.0, 2.0, 1.0, 0.5]])
    out = DistillationLoss(temperature=2.0, tau_min=1.0)(
        query_weights=q, query_input_ids=torch.tensor([[1, 2]]), doc_weights=d,
        doc_input_ids=torch.tensor([[3, 0], [1, 3]]), doc_index=torch.tensor([[1, 0]]),
        teacher=torch.tensor([[10.0, -8.0]]), mask=torch.ones(1, 2, dtype=torch.bool), domain_ids=[3], step=1,
    )
    # s = (2, 1), over tau 2: (1, 0.5); at tau 1 it would be -log softmax(2, 1)_0
    assert out["ret"].item() == pytest.approx(-(1.0 - math.log(math.exp(1.0) + math.exp(0.5))))
    # tau_min 1: doc0 weighs 1 on token 3 (no push), doc1 0.5; the query lacks it; 3 texts
    assert out["dom"].item() == pytest.approx(0.5 / 3)


def test_distillation_gradients_repeat_bit_for_bit_on_several_threads():
    # A seeded run must reproduce: the gather of each query's candidates from the batch's
    # unique documents is where CPU threads used to reorder sums (x[idx]'s backward).
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        gen = torch.Generator().manual_seed(0)
        B, N, U, V = 8, 8, 20, 30522
        q0 = torch.rand(B, V, generator=gen)
        d0 = torch.rand(U, V, generator=gen)
        index = torch.randint(0, U, (B, N), generator=gen)  # repeats: shared candidates
        teacher = torch.randn(B, N, generator=gen) * 5
        fn = DistillationLoss(kd=1.0, ret=1.0, sp=1.0, dom=1.0, ctr=1.0, qexp=1.0, temperature=1.0, tau_min=2.0,
                              margin=1.0, sp_warmup_steps=0)

        def grads():
            q, d = q0.clone().requires_grad_(), d0.clone().requires_grad_()
            out = fn(query_weights=q, query_input_ids=torch.ones(B, 4, dtype=torch.long), doc_weights=d,
                     doc_input_ids=torch.ones(U, 4, dtype=torch.long), doc_index=index, teacher=teacher,
                     mask=torch.ones(B, N, dtype=torch.bool), domain_ids=[5], step=1)
            out["total"].backward()
            return d.grad

        first = grads()
        assert all(torch.equal(first, grads()) for _ in range(5))
    finally:
        torch.set_num_threads(threads)


def test_student_scores_stay_fp32_under_bf16_autocast():
    # CUDA trains under bf16 autocast, which would run the score products in bf16: scores of
    # 16-32 then move in steps of 0.125. CPU autocast rounds alike, so this is checked here.
    from sparse_adapt.losses.in_batch import InBatchLoss

    gen = torch.Generator().manual_seed(0)
    B, N, U, V = 3, 4, 5, 200
    q, d = torch.rand(B, V, generator=gen), torch.rand(U, V, generator=gen)  # scores ~ V/4 = 50
    teacher = torch.randn(B, N, generator=gen) * 5
    inputs = dict(query_weights=q, query_input_ids=torch.ones(B, 4, dtype=torch.long), doc_weights=d,
                  doc_input_ids=torch.ones(U, 4, dtype=torch.long), doc_index=torch.randint(0, U, (B, N), generator=gen),
                  teacher=teacher, mask=torch.ones(B, N, dtype=torch.bool), domain_ids=[5], step=1)
    fn = DistillationLoss(kd=1.0, ret=1.0, sp=1.0, dom=1.0, ctr=1.0, qexp=1.0, temperature=1.0, tau_min=2.0,
                          margin=1.0, sp_warmup_steps=0)
    in_batch = InBatchLoss(temperature=1.0, teacher_temperature=0.05)
    pairs_teacher = torch.rand(B, B, generator=gen)
    plain = fn(**inputs), in_batch(q, d[:B], pairs_teacher)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = fn(**inputs), in_batch(q, d[:B], pairs_teacher)
    for name in ("kd", "ret", "ctr", "total"):
        assert mixed[0][name].dtype == torch.float32
        assert mixed[0][name].item() == pytest.approx(plain[0][name].item(), rel=1e-6), name
    for name in ("nce", "kd"):
        assert mixed[1][name].item() == pytest.approx(plain[1][name].item(), rel=1e-6), name
    # Score preservation subtracts two such scores: in bf16 its value would be mostly noise.
    pres = DistillationLoss(kd=0.0, ret=0.0, sp=0.0, dom=0.0, ctr=0.0, qexp=0.0, pres=1.0, pres_form="scores")
    refs = dict(ref_query_weights=q * 0.9, ref_doc_weights=d * 0.9)
    plain_pres = pres(**inputs, **refs)["pres"]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed_pres = pres(**inputs, **refs)["pres"]
    assert plain_pres.item() > 0 and mixed_pres.item() == pytest.approx(plain_pres.item(), rel=1e-5)


def test_student_scores_of_bf16_vectors_are_fp32_products():
    # 256 + 1 = 257 needs 9 significant bits; bf16 keeps 8 and would say 256.
    from sparse_adapt.losses.scores import dot_scores, pair_scores

    q = torch.tensor([[1.0, 1.0]], dtype=torch.bfloat16)
    d = torch.tensor([[256.0, 1.0]], dtype=torch.bfloat16)
    for scores in (pair_scores(q, d), dot_scores("bv,bnv->bn", q, d[None])):
        assert scores.dtype == torch.float32 and scores.tolist() == [[257.0]]


def test_distillation_terms_on_two_padded_lists_of_unequal_pair_counts():
    # Two queries, four candidate slots; query 1 has two padded slots whose teacher scores
    # (9) would win its ranking and count as positives if the mask were ignored. Candidate
    # rows: d0 and d3 hold the domain token 5 in their text; d3 is a negative for both.
    q = torch.tensor([[1.0, 0, 0, 0, 0, 0], [0, 1.0, 0, 0, 0, 2.0]])
    d = torch.tensor([[2.0, 0, 0, 0, 0, 0], [1.0, 1.0, 0, 0, 0, 0], [0, 3.0, 0, 0, 0, 0], [1.0, 0, 0, 0, 0, 4.0]])
    ids = torch.tensor([[5, 1], [1, 1], [1, 1], [1, 5]])
    index = torch.tensor([[0, 1, 3, -1], [2, 3, -1, -1]])
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    teacher = torch.tensor([[5.0, 2.0, -1.0, -9.0], [3.0, -1.0, 9.0, 9.0]])
    fn = DistillationLoss(kd=1.0, ret=1.0, sp=1.0, dom=1.0, ctr=1.0, qexp=1.0, temperature=1.0, tau_min=2.0,
                          margin=5.0, sp_warmup_steps=0)
    out = fn(query_weights=q, query_input_ids=torch.ones(2, 2, dtype=torch.long), doc_weights=d, doc_input_ids=ids,
             doc_index=index, teacher=teacher, mask=mask, domain_ids=[5], step=1)
    # Student scores: query 0 -> d0, d1, d3 = 2, 1, 1; query 1 -> d2, d3 = 3, 8.
    # KD: mean over the 5 real pairs of (t - s)^2.
    assert out["kd"].item() == pytest.approx(((5 - 2) ** 2 + (2 - 1) ** 2 + (-1 - 1) ** 2 + 0 + (-1 - 8) ** 2) / 5)
    # Ret: mean over queries of -log softmax at the teacher's top real candidate.
    ret0 = -math.log(math.exp(2) / (math.exp(2) + 2 * math.exp(1)))
    ret1 = -math.log(math.exp(3) / (math.exp(3) + math.exp(8)))
    assert out["ret"].item() == pytest.approx((ret0 + ret1) / 2)
    # Ctr, per query over |P| x |N| pairs, then over queries: query 0 has P = {d0, d1},
    # N = {d3}: hinges 5 - (2 - 1) = 4 and 5 - (1 - 1) = 5; query 1 has P = {d2}, N = {d3}:
    # 5 - (3 - 8) = 10. Pooling the three pairs instead would give 19 / 3.
    assert out["ctr"].item() == pytest.approx(((4 + 5) / 2 + 10) / 2)
    # QExp: only query 0 has the domain token in a positive (d0); its weight there is 0.
    # Taking every candidate would add query 1 (d3 holds the token) at -log sigmoid(2).
    assert out["qexp"].item() == pytest.approx(math.log(2))
    # Sp: over the 4 distinct documents, d3 once although two lists hold it (and no padded
    # slot's row 0): query means (0.5, 0.5), document means (1, 1), token 5 excluded.
    assert out["sp"].item() == pytest.approx(0.5 * 1.0 + 0.5 * 1.0)


def test_query_expansion_targets_a_token_once_however_many_positives_hold_it():
    # V = 4, D = {2, 3}; both candidates are positives, both hold token 2, only d0 holds 3
    q = torch.tensor([[0.0, 0.0, 1.0, 0.0]])
    d = torch.zeros(2, 4)
    out = DistillationLoss()(
        query_weights=q, query_input_ids=torch.tensor([[1, 1]]), doc_weights=d,
        doc_input_ids=torch.tensor([[2, 3], [2, 1]]), doc_index=torch.tensor([[0, 1]]),
        teacher=torch.tensor([[5.0, 4.0]]), mask=torch.ones(1, 2, dtype=torch.bool), domain_ids=[2, 3], step=1,
    )
    assert out["qexp"].item() == pytest.approx((neg_log_sigmoid(1.0) + neg_log_sigmoid(0.0)) / 2)  # counting d1's token 2 twice: / 3


def test_query_expansion_targets_only_candidates_the_teacher_scores_above_0():
    # V = 3, D = {2}; the only candidate holds token 2. Teacher 0 is a negative (as in the
    # contrastive term), so the token is no target; at 0.5 it is one, at weight 0: log 2.
    kw = dict(query_weights=torch.zeros(1, 3), query_input_ids=torch.tensor([[1, 1]]), doc_weights=torch.zeros(1, 3),
              doc_input_ids=torch.tensor([[2, 1]]), doc_index=torch.tensor([[0]]),
              mask=torch.ones(1, 1, dtype=torch.bool), domain_ids=[2], step=1)
    assert DistillationLoss()(**kw, teacher=torch.tensor([[0.0]]))["qexp"].item() == 0.0
    assert DistillationLoss()(**kw, teacher=torch.tensor([[0.5]]))["qexp"].item() == pytest.approx(math.log(2))


def test_distillation_refuses_a_negative_weight():
    with pytest.raises(ValueError, match="loss weight ctr must be >= 0"):
        DistillationLoss(ctr=-1.0)
    with pytest.raises(ValueError, match="loss weight pres must be >= 0"):  # the one off by default
        DistillationLoss(pres=-1.0)
    DistillationLoss(ctr=0.0)  # 0 switches a term off


def test_mlm_loss_on_the_target_positions_equals_the_models_own_loss(tiny_mlm):
    """``mlm_loss`` projects only the masked positions onto the vocabulary; the value and the
    gradient must be those of Hugging Face's full forward with ``labels`` in every family."""
    from sparse_adapt.losses.mlm import mlm_loss
    from sparse_adapt.modeling.heads import head_support

    assert head_support(tiny_mlm.mlm).parts is not None  # else both sides are the same call
    batch = tiny_mlm.tokenize(["the Zorblatt metric tracks spending", "a short one"], "document")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    labels = torch.full_like(ids, -100)
    labels[:, 1:4] = ids[:, 1:4]  # three targets per text, padding never one
    labels[1, 3] = -100

    tiny_mlm.mlm.train(False)  # no dropout: the two forwards must see one network
    params = [p for p in tiny_mlm.mlm.parameters() if p.requires_grad]
    ours = mlm_loss(tiny_mlm.mlm, ids, mask, labels)
    ours_grads = torch.autograd.grad(ours, params, allow_unused=True)
    theirs = tiny_mlm.mlm(input_ids=ids, attention_mask=mask, labels=labels).loss
    theirs_grads = torch.autograd.grad(theirs, params, allow_unused=True)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    for a, b in zip(ours_grads, theirs_grads):
        if a is None or b is None:
            assert a is None and b is None or (a if b is None else b).abs().max() == 0
        else:
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_mlm_loss_of_a_registered_family_skips_the_full_vocabulary_forward(tiny_mlm, monkeypatch):
    # The point of the head registry: (L, V) logits of every position cost ~7x the targets'.
    from sparse_adapt.losses.mlm import mlm_loss

    def full_forward(*args, **kwargs):
        raise AssertionError("projected every position onto the vocabulary")

    batch = tiny_mlm.tokenize(["the Zorblatt metric tracks spending"], "document")
    labels = torch.full_like(batch["input_ids"], -100)
    labels[:, 1:3] = batch["input_ids"][:, 1:3]
    monkeypatch.setattr(tiny_mlm.mlm, "forward", full_forward)
    assert mlm_loss(tiny_mlm.mlm, batch["input_ids"], batch["attention_mask"], labels).item() > 0


def test_mlm_loss_counts_a_target_whose_label_is_id_0(tiny_bert):
    # Only -100 marks a non-target: id 0 is an ordinary piece in some vocabularies ("!" in GPT-2's).
    from sparse_adapt.losses.mlm import mlm_loss

    batch = tiny_bert.tokenize(["the Zorblatt metric tracks spending"], "document")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    labels = torch.full_like(ids, -100)
    labels[0, 1:3] = ids[0, 1:3]
    labels[0, 3] = 0
    tiny_bert.mlm.train(False)
    with torch.no_grad():
        ours = mlm_loss(tiny_bert.mlm, ids, mask, labels)
        theirs = tiny_bert.mlm(input_ids=ids, attention_mask=mask, labels=labels).loss
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


def test_mlm_loss_of_an_unregistered_family_leaves_padding_out():
    """A family outside the head registry (ELECTRA) takes the model's own forward: a text's loss
    is the same alone and padded in a batch beside a longer one."""
    from transformers import ElectraConfig, ElectraForMaskedLM

    from sparse_adapt.losses.mlm import mlm_loss
    from sparse_adapt.modeling.heads import head_support
    from tests.conftest import _tokenizer

    tok = _tokenizer()
    torch.manual_seed(0)
    mlm = ElectraForMaskedLM(ElectraConfig(
        vocab_size=len(tok), embedding_size=32, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=80, pad_token_id=tok.pad_token_id)).eval()
    assert head_support(mlm).parts is None
    both = tok(["a short one", "the Zorblatt metric tracks departmental spending"], padding=True, return_tensors="pt")
    alone = tok(["a short one"], return_tensors="pt")
    assert both["attention_mask"][0].sum() < both["attention_mask"].shape[1]  # the short text is padded

    def loss(batch):
        labels = torch.full_like(batch["input_ids"], -100)
        labels[0, 1:3] = batch["input_ids"][0, 1:3]  # targets in the short text only
        with torch.no_grad():
            return mlm_loss(mlm, batch["input_ids"], batch["attention_mask"], labels)

    torch.testing.assert_close(loss(both), loss(alone), rtol=1e-5, atol=1e-6)
