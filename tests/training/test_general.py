"""General-English pretraining (``sparse-adapt pretrain``): the dictionary pairs, the in-batch
loss against its hand-worked formula, and the stage on a tiny random model."""

from __future__ import annotations

import json
import math
import re
import shutil

import pytest
import torch

from sparse_adapt.cli import main
from sparse_adapt.corpus.lexicon import MIN_QUERY_WORDS, LexiconPair, lexicon_pairs
from sparse_adapt.errors import ConfigError
from sparse_adapt.losses.in_batch import InBatchLoss
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.training.general import RECORD, GeneralConfig, run_general
from tests.conftest import make_tiny_bert


def _softmax(xs):
    z = sum(math.exp(x) for x in xs)
    return [math.exp(x) / z for x in xs]


def test_in_batch_loss_equals_the_hand_worked_formula():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    d = torch.tensor([[2.0, 1.0], [0.0, 1.0]])  # S = Q D^T = [[2, 0], [1, 1]]: rows and columns differ
    teacher = torch.tensor([[1.0, 0.0], [0.5, 1.0]])
    out = InBatchLoss(temperature=1.0, teacher_temperature=1.0)(q, d, teacher)
    rows = [[2.0, 0.0], [1.0, 1.0]]  # query i against every document
    columns = [[2.0, 1.0], [0.0, 1.0]]  # document i against every query
    q_to_d = -(math.log(_softmax(rows[0])[0]) + math.log(_softmax(rows[1])[1])) / 2
    d_to_q = -(math.log(_softmax(columns[0])[0]) + math.log(_softmax(columns[1])[1])) / 2
    assert q_to_d != pytest.approx(d_to_q)  # a loss reading one direction twice cannot pass
    assert out["nce"].item() == pytest.approx((q_to_d + d_to_q) / 2, rel=1e-6)
    target = [_softmax([1.0, 0.0]), _softmax([0.5, 1.0])]
    kd = sum(t * math.log(t / s) for tr, r in zip(target, rows) for t, s in zip(tr, _softmax(r))) / 2
    assert out["kd"].item() == pytest.approx(kd, abs=1e-6)  # float32 against float64


def test_in_batch_loss_temperature_scales_scores_and_shapes_are_checked():
    q, d = torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([[2.0, 0.0], [0.0, 2.0]])
    hot = InBatchLoss(temperature=2.0)(q, d)["nce"].item()
    assert hot == pytest.approx(-math.log(_softmax([1.0, 0.0])[0]), rel=1e-6)  # 2/2 against 0/2
    assert InBatchLoss()(q, d)["kd"].item() == 0.0  # no teacher: no KD term
    # the teacher's temperature divides its similarities: [1, 0] / 0.5 = [2, 0]
    teacher = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    kd = InBatchLoss(temperature=1.0, teacher_temperature=0.5)(q, d, teacher)["kd"].item()
    assert kd == pytest.approx(0.0, abs=1e-6)  # S = [[2, 0], [0, 2]]: the same distribution
    student = _softmax([2.0, 0.0])
    sharper = InBatchLoss(temperature=1.0, teacher_temperature=0.25)(q, d, teacher)["kd"].item()
    target = _softmax([4.0, 0.0])
    assert sharper == pytest.approx(sum(t * math.log(t / s) for t, s in zip(target, student)), abs=1e-6)
    with pytest.raises(ValueError, match="teacher"):
        InBatchLoss()(q, d, torch.zeros(3, 3))
    with pytest.raises(ValueError, match="teacher"):  # one column per query would broadcast
        InBatchLoss()(q, d, torch.zeros(2, 1))
    with pytest.raises(ValueError, match="pair row by row"):
        InBatchLoss()(q, d[:1])


def test_in_batch_kd_compares_the_teacher_with_the_student_scores_over_the_temperature():
    # KL(softmax(T / tau_t) || softmax(S / tau)): with tau 2 the student side is S / 2, not S
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    d = torch.tensor([[2.0, 1.0], [0.0, 1.0]])  # S = [[2, 0], [1, 1]]
    teacher = torch.tensor([[1.0, 0.0], [0.5, 1.0]])
    kd = InBatchLoss(temperature=2.0, teacher_temperature=1.0)(q, d, teacher)["kd"].item()
    rows = [[1.0, 0.0], [0.5, 0.5]]  # S / 2
    target = [_softmax([1.0, 0.0]), _softmax([0.5, 1.0])]
    expected = sum(t * math.log(t / s) for tr, r in zip(target, rows) for t, s in zip(tr, _softmax(r))) / 2
    assert kd == pytest.approx(expected, abs=1e-6)


def test_in_batch_loss_gradients_reach_both_directions_and_the_kd_term():
    # With Q = I, S = D^T, so d.grad[j][i] = dL/dS_ij and q.grad = dL/dS @ D.
    q = torch.eye(2, requires_grad=True)
    d = torch.tensor([[2.0, 1.0], [0.0, 1.0]], requires_grad=True)  # S = [[2, 0], [1, 1]]
    teacher = torch.tensor([[1.0, 0.0], [0.5, 1.0]])
    out = InBatchLoss(temperature=1.0, teacher_temperature=1.0)(q, d, teacher)
    rows, columns = [_softmax([2.0, 0.0]), _softmax([1.0, 1.0])], [_softmax([2.0, 1.0]), _softmax([0.0, 1.0])]
    # NCE: (softmax of row i - one-hot + softmax of column j - one-hot) / 2B
    nce = [[(rows[i][j] + columns[j][i] - 2 * (i == j)) / 4 for j in range(2)] for i in range(2)]
    out["nce"].backward(retain_graph=True)
    assert d.grad.T.tolist() == [pytest.approx(r, abs=1e-6) for r in nce]
    assert q.grad.tolist() == [pytest.approx([2 * r[0], r[0] + r[1]], abs=1e-6) for r in nce]  # dL/dS @ D
    d.grad = None
    # KD: (softmax of row i - teacher's distribution) / B
    target = [_softmax([1.0, 0.0]), _softmax([0.5, 1.0])]
    out["kd"].backward()
    expected = [[(rows[i][j] - target[i][j]) / 2 for j in range(2)] for i in range(2)]
    assert d.grad.T.tolist() == [pytest.approx(r, abs=1e-6) for r in expected]


def test_in_batch_kd_of_a_bf16_teacher_is_taken_in_fp32():
    # A teacher's bf16 similarities over tau_t 0.05 reach ~20, where bf16 steps by 0.125:
    # the division and softmax must run in fp32 on the values given.
    q, d = torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([[2.0, 1.0], [0.0, 1.0]])
    teacher = torch.tensor([[0.81, 0.77], [0.53, 0.97]], dtype=torch.bfloat16)
    loss = InBatchLoss(temperature=1.0, teacher_temperature=0.05)
    kd = loss(q, d, teacher)["kd"]
    assert kd.dtype == torch.float32
    assert kd.item() == pytest.approx(loss(q, d, teacher.float())["kd"].item(), rel=1e-6)


def test_lexicon_pairs_describe_a_word_without_naming_it():
    pairs = lexicon_pairs(seed=0)
    assert len(pairs) > 20_000
    psoriasis = [p for p in pairs if p.document.split(", ")[0] == "psoriasis"]
    assert psoriasis and "skin disease" in psoriasis[0].query
    for p in pairs[:2000]:
        head = p.document.split(", ")[0]
        assert head.casefold() not in p.query.casefold().split()
        assert len(p.query.split()) >= MIN_QUERY_WORDS


def test_lexicon_pairs_are_seeded_and_limited():
    assert lexicon_pairs(seed=3, limit=50) == lexicon_pairs(seed=3)[:50]
    assert lexicon_pairs(seed=3, limit=50) != lexicon_pairs(seed=4, limit=50)
    rare = set(p.document for p in lexicon_pairs(seed=0, min_zipf=0.0))
    assert len(rare) > len(set(p.document for p in lexicon_pairs(seed=0)))  # the frequency floor drops words


class WordTeacher:
    """Unit vectors of word counts over a tiny fixed vocabulary: a stand-in dense teacher."""

    name = "words"
    VOCAB = ["skin", "red", "engine", "oil", "river", "water", "song", "bird"]

    def embed(self, texts):
        rows = torch.tensor([[float(w in t.split()) for w in self.VOCAB] for t in texts]) + 1e-3
        return torch.nn.functional.normalize(rows, dim=-1)


PAIRS = [
    LexiconPair("disease of the skin with red patches", "psoriasis"),
    LexiconPair("machine that burns oil to move a car", "engine, motor"),
    LexiconPair("large natural stream of water", "river"),
    LexiconPair("small bird that sings a song", "songbird"),
] * 10


@pytest.fixture
def tiny_dir(tmp_path):
    path = tmp_path / "tiny"
    make_tiny_bert().save_pretrained(path)
    return path


def _pair_loss(path) -> float:
    enc = SpladeEncoder.from_pretrained(path)
    with torch.no_grad():
        q = enc(**enc.tokenize([p.query for p in PAIRS[:4]], "query"))
        d = enc(**enc.tokenize([p.document for p in PAIRS[:4]], "document"))
        return InBatchLoss()(q, d)["nce"].item()


def test_pretraining_learns_the_pairs_and_records_what_it_did(tiny_dir, tmp_path):
    out = tmp_path / "pretrained"
    cfg = GeneralConfig(steps=10, batch_size=4, lr=3e-3, sp=0.0)
    run_general(tiny_dir, out, cfg, seed=0, teacher=WordTeacher(), pairs=PAIRS)
    assert _pair_loss(out) < _pair_loss(tiny_dir) - 0.05  # the pairs now match better than chance
    record = json.loads((out / RECORD).read_text())
    assert record["steps"] == 10 and record["pairs"] == len(PAIRS) and record["teacher"] == "words"
    assert {"nce", "kd", "sp", "loss"} <= set(record["log"][-1])
    # The result is a base like any other.
    assert SpladeEncoder.from_pretrained(out).encode(["red skin"], "query").shape[0] == 1


def test_pretraining_refuses_bad_settings_and_existing_outputs(tiny_dir, tmp_path):
    with pytest.raises(ConfigError, match="nothing would be learned"):
        run_general(tiny_dir, tmp_path / "a", GeneralConfig(nce=0.0, kd=0.0), pairs=PAIRS)
    with pytest.raises(ConfigError, match="batch_size"):
        run_general(tiny_dir, tmp_path / "b", GeneralConfig(batch_size=1), pairs=PAIRS)
    with pytest.raises(ConfigError, match="training pairs"):
        run_general(tiny_dir, tmp_path / "c", GeneralConfig(kd=0.0), pairs=PAIRS[:1])
    assert not any((tmp_path / n).exists() for n in "abc")


def test_pretrain_cli_gives_one_line_and_exit_2_on_bad_input(tiny_dir, tmp_path, capsys):
    existing = tmp_path / "mine"
    existing.mkdir()
    (existing / "notes.txt").write_text("keep me")
    assert main(["pretrain", "--base", str(tiny_dir), "--out", str(existing)]) == 2
    assert (existing / "notes.txt").read_text() == "keep me"
    assert main(["pretrain", "--base", str(tiny_dir), "--out", str(tmp_path / "x"), "--steps", "0"]) == 2
    err = capsys.readouterr().err
    assert "steps must be > 0" in err and "Traceback" not in err
    for lr, said in (("5", "lr must be < 1, got 5.0"), ("nan", "lr must be > 0, got nan"), ("0", "lr must be > 0")):
        assert main(["pretrain", "--base", str(tiny_dir), "--out", str(tmp_path / "x"), "--lr", lr]) == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err and not (tmp_path / "x").exists()


def test_pretrain_cli_passes_its_seed_and_overwrite_on(tmp_path, monkeypatch):
    import sparse_adapt.training.general as general

    seen = []
    monkeypatch.setattr(general, "run_general", lambda base, out, cfg, **kw: seen.append((base, out, kw)))
    assert main(["pretrain", "--base", "offline-splade-tiny", "--out", str(tmp_path / "a"), "--seed", "7",
                 "--overwrite"]) == 0
    [(base, out, kw)] = seen
    assert (base, out, kw["seed"], kw["overwrite"]) == ("offline-splade-tiny", tmp_path / "a", 7, True)


def test_pretrain_cli_takes_its_defaults_from_general_config_and_says_them(tmp_path, monkeypatch, capsys):
    import sparse_adapt.training.general as general

    seen = []
    monkeypatch.setattr(general, "run_general", lambda base, out, cfg, **kw: seen.append(cfg))
    assert main(["pretrain", "--out", str(tmp_path / "a")]) == 0
    assert main(["pretrain", "--out", str(tmp_path / "b"), "--steps", "7", "--batch-size", "3", "--lr", "2e-5"]) == 0
    assert seen[0] == GeneralConfig() and (seen[1].steps, seen[1].batch_size, seen[1].lr) == (7, 3, 2e-5)
    capsys.readouterr()
    assert main(["pretrain", "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.replace("\u2502", " ").split())  # help box borders out
    defaults = GeneralConfig()
    assert f"Default: GeneralConfig's, {defaults.steps}." in shown
    assert f"Default: GeneralConfig's, {defaults.batch_size}." in shown and "[default: (" not in shown
    assert f"Default: GeneralConfig's, {defaults.lr}." in shown


def test_a_pretrained_base_carries_its_adapt_settings_and_a_config_key_still_wins(tiny_dir, tmp_path):
    from sparse_adapt.modeling.builtin import RECOMMENDED_FILE
    from sparse_adapt.training.config import TrainConfig
    from sparse_adapt.training.config_files import load_config, recommended_in_effect
    from sparse_adapt.training.general import RECOMMENDED

    out = tmp_path / "pretrained"
    run_general(tiny_dir, out, GeneralConfig(steps=1, batch_size=4, kd=0.0), pairs=PAIRS)
    assert json.loads((out / RECOMMENDED_FILE).read_text()) == RECOMMENDED
    assert load_config(None, out).distill.pres_form == "all-texts"
    assert recommended_in_effect(load_config(None, out), out) == "distill.pres_form = 'all-texts'"
    assert load_config(None, tiny_dir) == TrainConfig().validate()  # a plain directory: the defaults
    mine = tmp_path / "mine.toml"
    mine.write_text('[distill]\npres_form = "vectors"\n')
    assert load_config(mine, out).distill.pres_form == "vectors"
    (out / RECOMMENDED_FILE).write_text("{not json")
    with pytest.raises(ConfigError, match=RECOMMENDED_FILE):
        load_config(None, out)
    (out / RECOMMENDED_FILE).write_text('{"distill": 3}')
    with pytest.raises(ConfigError, match="table of stage sections"):
        load_config(None, out)
    # a bad value there is the base's file's, not the user's config's (which had been named)
    (out / RECOMMENDED_FILE).write_text('{"distill": {"lr": NaN}}')
    for given in (None, mine):
        with pytest.raises(ConfigError, match=f"^{re.escape(str(out / RECOMMENDED_FILE))}: distill.lr: expected a finite"):
            load_config(given, out)
    # ... but a value the user's file overrides, or makes valid, is no error of anyone's
    mine.write_text("[distill]\nlr = 1e-5\n")
    assert load_config(mine, out).distill.lr == 1e-5
    (out / RECOMMENDED_FILE).write_text('{"distill": {"weight_decay": 5000}}')  # x the default lr 2.5e-4: 1.25
    assert load_config(mine, out).distill.weight_decay == 5000  # x 1e-5: 0.05
    with pytest.raises(ConfigError, match=f"^{re.escape(str(out / RECOMMENDED_FILE))}: distill.weight_decay 5000"):
        load_config(None, out)


def test_pretraining_says_a_capped_step_count_refuses_a_batch_beyond_the_pairs_and_warns_of_a_wrong_base(tiny_dir, tmp_path):
    from sparse_adapt.progress import Hooks

    said = []
    hooks = Hooks(message=said.append)
    with pytest.raises(ConfigError, match=f"a batch of 48 pairs is more than the {len(PAIRS)} there are"):
        run_general(tiny_dir, tmp_path / "a", GeneralConfig(kd=0.0), pairs=PAIRS)
    out = run_general(tiny_dir, tmp_path / "b", GeneralConfig(steps=20, batch_size=8, kd=0.0), pairs=PAIRS, hooks=hooks)
    assert f"warning: pretrain: {len(PAIRS)} pairs make 5 steps of 8, not 20: each pair is used once" in said
    assert json.loads((out / RECORD).read_text())["steps"] == 5
    assert not [m for m in said if "pretrained already" in m]
    said.clear()
    run_general(out, tmp_path / "c", GeneralConfig(steps=2, batch_size=8, kd=0.0), pairs=PAIRS, hooks=hooks)
    assert f"warning: pretrain: {out} is pretrained already ({RECORD}): this trains it a second time" in said
    from sparse_adapt.modeling.vocabulary import extend_vocabulary
    from sparse_adapt.training.general import _not_for_pretraining

    assert _not_for_pretraining("offline-splade-tiny") == ["offline-splade-tiny is a trained SPLADE: pretraining is "
                                                           "for a base that is not"]
    assert _not_for_pretraining("offline-minilm") == [] and _not_for_pretraining(tiny_dir) == []
    extended = make_tiny_bert()
    extend_vocabulary(extended, {"jargon": ["Gatrocraptic"]})
    extended.save_pretrained(tmp_path / "ext")
    assert _not_for_pretraining(tmp_path / "ext") == [f"{tmp_path / 'ext'} holds domain tokens: pretrain the base "
                                                      "first, then extend its vocabulary"]


def test_a_stopped_pretraining_resumes_from_its_checkpoint_and_equals_an_unbroken_one(tiny_dir, tmp_path, monkeypatch):
    """A stopped pretrain (~30-45 min) started again from step 0: it now resumes from OUT.partial."""
    from sparse_adapt.progress import Hooks
    from tests.training.test_resume import PowerCut, _cut_at

    cfg = GeneralConfig(steps=8, batch_size=4, lr=3e-3, checkpoint_every=3)
    ref = run_general(tiny_dir, tmp_path / "ref", cfg, seed=0, teacher=WordTeacher(), pairs=PAIRS)
    out, partial = tmp_path / "run", tmp_path / "run.partial"
    with monkeypatch.context() as m:
        _cut_at(m, 8)  # the 8th step fails: the checkpoint of step 6 is the last
        with pytest.raises(PowerCut):
            run_general(tiny_dir, out, cfg, seed=0, teacher=WordTeacher(), pairs=PAIRS)
    assert not out.exists() and partial.is_dir()
    said: list[str] = []
    run_general(tiny_dir, out, cfg, seed=0, teacher=WordTeacher(), pairs=PAIRS, hooks=Hooks(message=said.append))
    assert f"pretrain: resuming at step 6 from {partial}" in said
    want, got = SpladeEncoder.from_pretrained(ref).mlm.state_dict(), SpladeEncoder.from_pretrained(out).mlm.state_dict()
    assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want)  # bit for bit
    timing = {"tokens_per_s"}
    record, reference = json.loads((out / RECORD).read_text()), json.loads((ref / RECORD).read_text())
    assert [{k: v for k, v in r.items() if k not in timing} for r in record["log"]] == \
        [{k: v for k, v in r.items() if k not in timing} for r in reference["log"]]
    assert record["resumed_at"] == 6 and reference["resumed_at"] is None and not partial.exists()


def _cut_pretraining(tiny_dir, out, monkeypatch) -> GeneralConfig:
    """Pretrain 6 steps (a checkpoint every 2) into ``out``, cut by a power failure at step 4; its config."""
    from tests.training.test_resume import PowerCut, _cut_at

    cfg = GeneralConfig(steps=6, batch_size=4, lr=3e-3, kd=0.0, checkpoint_every=2)
    with monkeypatch.context() as m:
        _cut_at(m, 4)
        with pytest.raises(PowerCut):
            run_general(tiny_dir, out, cfg, seed=0, pairs=PAIRS)
    return cfg


def test_a_checkpoint_of_another_pretraining_is_discarded(tiny_dir, tmp_path, monkeypatch):
    from sparse_adapt.progress import Hooks

    out = tmp_path / "run"
    cfg = _cut_pretraining(tiny_dir, out, monkeypatch)
    said: list[str] = []
    run_general(tiny_dir, out, cfg, seed=1, pairs=PAIRS, hooks=Hooks(message=said.append))  # another seed
    assert any("run.partial was saved by another base, seed, setting, teacher or set of pairs: discarded" in m for m in said)
    assert not any("resuming" in m for m in said) and json.loads((out / RECORD).read_text())["resumed_at"] is None
    # the same name, other weights (a base rebuilt in place): not resumed either
    shutil.rmtree(out)
    _cut_pretraining(tiny_dir, out, monkeypatch)
    make_tiny_bert(seed=1).save_pretrained(tiny_dir)
    said.clear()
    run_general(tiny_dir, out, cfg, seed=0, pairs=PAIRS, hooks=Hooks(message=said.append))
    assert any("discarded, starting afresh" in m for m in said) and not any("resuming" in m for m in said)


def test_a_pretrained_base_of_another_base_is_made_again_and_of_the_same_one_reused(tiny_dir, tmp_path, monkeypatch):
    """adapt --overwrite onto another base kept DIR/pretrained (it depends on the base alone) and
    then trained from the old base's pretraining without a word."""
    from sparse_adapt.progress import Hooks
    from sparse_adapt.training import general

    where = tmp_path / "pretrained"
    run_general(tiny_dir, where, GeneralConfig(steps=1, batch_size=4, kd=0.0, checkpoint_every=0), pairs=PAIRS)
    made = []
    monkeypatch.setattr(general, "run_general", lambda base, out, **kw: made.append(base) or
                        shutil.copytree(tiny_dir, out))  # stands in for the 25-minute pretraining
    said: list[str] = []
    # the same base spelled another way, and a checkpoint setting that no weight depends on: reused
    general.pretrained_base(str(tiny_dir) + "/", where, Hooks(message=said.append))
    assert made == [] and any("steps 1 (today" in m for m in said) and not any("checkpoint_every" in m for m in said)
    copy = tmp_path / "copy"  # the same files elsewhere (or named from another working directory): the same base
    shutil.copytree(tiny_dir, copy)
    monkeypatch.chdir(tmp_path)
    general.pretrained_base("copy", where, Hooks(message=said.append))
    assert made == []
    other = tmp_path / "other"
    make_tiny_bert(seed=1).save_pretrained(other)
    general.pretrained_base(str(other), where, Hooks(message=said.append))
    assert made == [str(other)] and f"{where} was pretrained from {tiny_dir}, not {other}: pretraining again" in said


def test_which_base_a_pretraining_was_made_from():
    from sparse_adapt.training.general import _other_base

    assert _other_base({"base": "offline-minilm"}, "offline-minilm") is None
    assert _other_base({"base": "offline-minilm"}, "org/other-model") == "offline-minilm"  # two names
    assert _other_base({"base": "offline-minilm"}, "./mine") == "offline-minilm"  # a built-in and a folder
    assert _other_base({"base": "mine"}, "../elsewhere/mine") is None  # "mine", recorded from another directory
    # a folder recorded before its files were hashed says too little: reused, as before
    assert _other_base({"base": "./theirs"}, "./mine") is None
    assert _other_base({}, "./mine") is None
    # A name has no files to hash: a record's hash of a folder says nothing about a name given now.
    assert _other_base({"base": "offline-minilm", "base_files": "ab" * 32}, "offline-minilm") is None


@pytest.mark.parametrize("changed, resumed", [({"lr": 1e-3}, False), ({"sp": 0.5}, False), ({"checkpoint_every": 3}, True)])
def test_a_checkpoint_is_resumed_only_under_the_weight_settings_it_was_saved_with(tiny_dir, tmp_path, monkeypatch,
                                                                                 changed, resumed):
    """Another lr or loss weight would finish the first attempt's steps under other settings;
    checkpoint_every shapes no weight, so a run changing only it resumes."""
    from dataclasses import replace

    from sparse_adapt.progress import Hooks

    out = tmp_path / "run"
    cfg = _cut_pretraining(tiny_dir, out, monkeypatch)
    said: list[str] = []
    run_general(tiny_dir, out, replace(cfg, **changed), seed=0, pairs=PAIRS, hooks=Hooks(message=said.append))
    assert any("resuming at step 2" in m for m in said) == resumed
    assert json.loads((out / RECORD).read_text())["resumed_at"] == (2 if resumed else None)


def test_a_batch_of_every_pair_is_one_step_and_a_run_without_kd_records_no_teacher(tiny_dir, tmp_path):
    from sparse_adapt.progress import Hooks

    said: list[str] = []
    out = run_general(tiny_dir, tmp_path / "one", GeneralConfig(steps=1, batch_size=len(PAIRS), kd=0.0),
                      teacher=WordTeacher(), pairs=PAIRS, hooks=Hooks(message=said.append))
    record = json.loads((out / RECORD).read_text())
    assert record["steps"] == 1
    assert not [m for m in said if "pairs make" in m]  # 1 step asked, 1 there: nothing capped
    # The teacher given was not used (kd = 0): the record must not claim its distillation.
    assert record["teacher"] is None


def test_settings_and_stale_settings_of_a_pretrained_base(tmp_path):
    from sparse_adapt.training.general import _stale_settings

    with pytest.raises(ConfigError, match="checkpoint_every must be >= 0"):
        GeneralConfig(checkpoint_every=-1).validate()
    where = tmp_path / "pretrained"
    where.mkdir()
    today = GeneralConfig()
    # A record from before a setting existed names only what it held, and only what differs.
    (where / RECORD).write_text(json.dumps({"config": {"lr": today.lr, "steps": 400}}))
    assert _stale_settings(where) == f"steps 400 (today {today.steps})"
    (where / RECORD).write_text(json.dumps({"config": {"lr": today.lr}}))
    assert _stale_settings(where) == ""


DISTINCT = [
    LexiconPair("disease of the skin with red patches", "psoriasis"),
    LexiconPair("machine that burns oil to move a car", "engine, motor"),
    LexiconPair("large natural stream of water", "river"),
    LexiconPair("small bird that sings a song", "songbird"),
    LexiconPair("red liquid that flows in the veins", "blood"),
    LexiconPair("bird that lives by the water", "heron"),
    LexiconPair("oil pressed from olives", "olive oil"),
    LexiconPair("song sung to a baby at night", "lullaby"),
]


def test_each_step_sees_its_own_batch_and_the_logged_loss_is_the_weighted_sum(tiny_dir, tmp_path, monkeypatch):
    # Eight distinct pairs (PAIRS repeats four, so any slice of it looks alike): step b trains on
    # pairs 4b .. 4b + 3, the teacher's targets are query-by-document, and "loss" counts every term.
    from sparse_adapt.training import general

    targets, embedded = [], []

    class Recording(InBatchLoss):
        def forward(self, q, d, teacher=None):
            targets.append(teacher)
            return super().forward(q, d, teacher)

    class Teacher(WordTeacher):
        def embed(self, texts):
            embedded.append(list(texts))
            return super().embed(texts)

    monkeypatch.setattr(general, "InBatchLoss", Recording)
    cfg = GeneralConfig(steps=2, batch_size=4, lr=1e-4, nce=1.0, kd=0.5, sp=0.25, checkpoint_every=0)
    out = run_general(tiny_dir, tmp_path / "p", cfg, seed=0, teacher=Teacher(), pairs=DISTINCT)
    queries = [[p.query for p in DISTINCT[:4]], [p.query for p in DISTINCT[4:]]]
    documents = [[p.document for p in DISTINCT[:4]], [p.document for p in DISTINCT[4:]]]
    assert embedded[0::2] == queries and embedded[1::2] == documents
    expected = WordTeacher().embed(queries[0]) @ WordTeacher().embed(documents[0]).T
    torch.testing.assert_close(targets[0], expected)
    log = json.loads((out / RECORD).read_text())["log"]
    vocab = len(SpladeEncoder.from_pretrained(tiny_dir).tokenizer)
    for r in log:
        assert r["loss"] == pytest.approx(r["nce"] + 0.5 * r["kd"] + 0.25 * r["sp"], rel=1e-5)
        assert 0 < r["d_active"] < vocab  # active terms, not every entry of the (non-negative) vectors


def test_a_run_without_kd_never_loads_the_dense_teacher(tiny_dir, tmp_path, monkeypatch):
    # kd = 0 uses no teacher: loading the ~90 MB MiniLM (or failing where it is missing) is waste.
    import sparse_adapt.corpus.teacher as teacher_mod

    def refuse(*args, **kwargs):
        raise AssertionError("the teacher was loaded")

    monkeypatch.setattr(teacher_mod, "load_teacher", refuse)
    run_general(tiny_dir, tmp_path / "p", GeneralConfig(steps=1, batch_size=4, kd=0.0, checkpoint_every=0), pairs=PAIRS)
    assert (tmp_path / "p" / RECORD).is_file()


def test_a_checkpoint_of_pairs_with_other_documents_is_not_resumed(tiny_dir, tmp_path, monkeypatch):
    # The same queries, described words of other headwords: another training, so not resumed.
    from sparse_adapt.progress import Hooks

    out = tmp_path / "run"
    cfg = _cut_pretraining(tiny_dir, out, monkeypatch)
    other = [LexiconPair(p.query, p.document + ", other") for p in PAIRS]
    said: list[str] = []
    run_general(tiny_dir, out, cfg, seed=0, pairs=other, hooks=Hooks(message=said.append))
    assert not any("resuming" in m for m in said) and any("discarded, starting afresh" in m for m in said)


def test_a_folder_or_file_of_the_users_where_the_checkpoint_goes_is_refused_and_kept(tiny_dir, tmp_path, capsys):
    """OUT.partial/ is beside OUT, not inside anything pretrain was told to write: only a pretraining
    checkpoint (or an empty folder) there is resumed or replaced; it deleted a folder of notes."""
    from sparse_adapt.errors import OutputError

    cfg = GeneralConfig(steps=1, batch_size=4, kd=0.0, checkpoint_every=0)
    notes = tmp_path / "run.partial"
    notes.mkdir()
    (notes / "notes.txt").write_text("keep me")
    with pytest.raises(OutputError, match=r"run\.partial is where pretraining keeps its checkpoint"):
        run_general(tiny_dir, tmp_path / "run", cfg, pairs=PAIRS)
    assert (notes / "notes.txt").read_text() == "keep me" and not (tmp_path / "run").exists()
    (tmp_path / "file.partial").write_text("mine")
    assert main(["pretrain", "--base", str(tiny_dir), "--out", str(tmp_path / "file")]) == 2
    err = capsys.readouterr().err
    assert "file.partial is where pretraining keeps its checkpoint" in err and "Traceback" not in err
    assert (tmp_path / "file.partial").read_text() == "mine"
    (tmp_path / "empty.partial").mkdir()  # nothing of anyone's: used
    run_general(tiny_dir, tmp_path / "empty", cfg, pairs=PAIRS)
    assert (tmp_path / "empty").is_dir() and not (tmp_path / "empty.partial").exists()


def test_a_reused_pretraining_of_todays_settings_drops_a_leftover_checkpoint_and_says_nothing(tiny_dir, tmp_path):
    from sparse_adapt.training import general

    where = tmp_path / "pretrained"
    run_general(tiny_dir, where, GeneralConfig(steps=1, batch_size=4, kd=0.0, checkpoint_every=0), pairs=PAIRS)
    leftover = tmp_path / "pretrained.partial"
    leftover.mkdir()  # a checkpoint of an attempt finished since (its model is complete): only disk space now
    # its record as one made with today's settings: nothing stale, so nothing to say
    from dataclasses import asdict

    from sparse_adapt.progress import Hooks

    record = json.loads((where / RECORD).read_text())
    (where / RECORD).write_text(json.dumps({**record, "config": asdict(GeneralConfig())}))
    said: list[str] = []
    assert general.pretrained_base(str(tiny_dir), where, Hooks(message=said.append)) == str(where)
    assert not leftover.exists() and said == []


def test_the_pretraining_size_its_comment_gives_is_its_default():
    """GeneralConfig's comment sizes a run as steps x batch_size = pairs with its defaults: a
    default changed alone leaves the comment (and the README repeating it) sizing the old run."""
    import inspect

    said = re.search(r"([\d,]+) x ([\d,]+) = ([\d,]+) of", inspect.getsource(GeneralConfig))
    steps, batch, pairs = (int(g.replace(",", "")) for g in said.groups())
    cfg = GeneralConfig()
    assert (steps, batch, pairs) == (cfg.steps, cfg.batch_size, cfg.steps * cfg.batch_size)
