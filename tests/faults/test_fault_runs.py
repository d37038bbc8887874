"""Issue rows: a failed run, a kill during a checkpoint save, resume, two concurrent trains
into one ``--out``, killing ``index``. ``run.json`` appears only once inputs and base have
loaded, crash leftovers are removed, the log drops a dead attempt's steps and marks the
new one, one process at a time owns a run directory, and the Java child dies with its
parent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparse_adapt.errors import SparseAdaptError
from sparse_adapt.progress import Hooks
from sparse_adapt.training import stages as stages_mod
from sparse_adapt.training.pipeline import run_pipeline
from tests.faults.conftest import assert_one_line_error, cli, hidden_leftovers, train_argv

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _pipeline(model, inputs, out, stages="extend,distill", **kw):
    return run_pipeline(
        base=str(model), corpus=inputs["corpus"], terms=inputs["terms"], dictionary=inputs["dictionary"],
        train=inputs["train"], out=out, stages=stages, config=inputs["config"], seed=3, **kw,
    )


def _log(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]


def test_a_run_that_failed_to_load_its_base_can_be_corrected(tiny_model_dir, train_inputs, tmp_path, capsys):
    out = tmp_path / "run"
    typo = cli(capsys, train_argv(tmp_path / "no-such-model", train_inputs, out))
    assert_one_line_error(typo, "no-such-model")
    assert not (out / "run.json").exists()
    fixed = cli(capsys, train_argv(tiny_model_dir, train_inputs, out))
    assert fixed.code == 0, fixed.err
    assert json.loads((out / "run.json").read_text())["base"] == str(tiny_model_dir)


KILLED_IN_SAVE = """
import os, signal, sys
from pathlib import Path
from sparse_adapt.modeling import encoder
from sparse_adapt.training.pipeline import run_pipeline

model, corpus, terms, dictionary, train, config, out = sys.argv[1:]
original = encoder.SpladeSettings.save

def save(self, directory):  # the last file of a checkpoint: weights and tokenizer are written
    original(self, directory)
    if Path(directory).name.startswith(".extend.tmp-"):
        os.kill(os.getpid(), signal.SIGKILL)

encoder.SpladeSettings.save = save
run_pipeline(base=model, corpus=corpus, terms=terms, dictionary=dictionary, train=train, out=out,
             stages="extend", config=config, seed=3)
"""


def test_a_checkpoint_save_killed_midway_leaves_nothing_after_the_next_run(tiny_model_dir, train_inputs, tmp_path):
    out = tmp_path / "run"
    args = [str(tiny_model_dir), *(str(train_inputs[k]) for k in ("corpus", "terms", "dictionary", "train", "config"))]
    proc = subprocess.run([sys.executable, "-c", KILLED_IN_SAVE, *args, str(out)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    leftovers = hidden_leftovers(out)
    assert len(leftovers) == 1 and leftovers[0].startswith(".extend.tmp-")
    assert (out / leftovers[0] / "model.safetensors").is_file()  # a real checkpoint, written but for its last file
    _pipeline(tiny_model_dir, train_inputs, out, stages="extend")
    assert hidden_leftovers(out) == []
    assert (out / "final" / "model.safetensors").is_file()


def test_resume_drops_the_dead_attempts_steps_and_marks_the_new_attempt(
    tiny_model_dir, train_inputs, tmp_path, monkeypatch
):
    class PowerCut(Exception):
        pass

    original = stages_mod.DistillStage._step

    def step(splade, batch, loss_fn, domain, step_number, *rest):
        if step_number == 2:
            raise PowerCut("after one logged step of distill")
        return original(splade, batch, loss_fn, domain, step_number, *rest)

    out = tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr(stages_mod.DistillStage, "_step", staticmethod(step))
        with pytest.raises(PowerCut):
            _pipeline(tiny_model_dir, train_inputs, out)
    dead = _log(out)
    assert [r["step"] for r in dead if r.get("stage") == "distill" and "step" in r] == [1]
    _pipeline(tiny_model_dir, train_inputs, out)
    log = _log(out)
    starts = [r["stage"] for r in log if r.get("event") == "stage_start"]
    assert starts == ["extend", "distill"]
    assert [r["step"] for r in log if r.get("stage") == "distill" and "step" in r] == [1, 2]
    resume = [r for r in log if r.get("event") == "resume"]
    assert len(resume) == 1 and resume[0]["attempt"] == 2 and resume[0]["completed"] == ["extend"]
    assert resume[0]["dropped_records"] == 2  # the dead attempt's distill stage_start and step 1
    events = [r.get("event") for r in log]
    assert events.index("resume") < events.index("stage_start", events.index("stage_start") + 1)  # before distill's


def test_a_second_train_into_the_same_out_is_refused_while_the_first_runs(tiny_model_dir, train_inputs, tmp_path):
    out = tmp_path / "run"
    refused: list[Exception] = []

    def message(text: str) -> None:
        if text.startswith("stage extend done") and not refused:
            try:  # a second invocation while the first is between its stages
                _pipeline(tiny_model_dir, train_inputs, out)
            except SparseAdaptError as e:
                refused.append(e)
            else:
                refused.append(AssertionError("the second run was not refused"))

    _pipeline(tiny_model_dir, train_inputs, out, hooks=Hooks(message=message))
    assert len(refused) == 1 and isinstance(refused[0], SparseAdaptError), refused
    assert "is in use by another sparse-adapt process" in str(refused[0]) and f"pid {os.getpid()}" in str(refused[0])
    steps = [(r["stage"], r["step"]) for r in _log(out) if "step" in r]
    assert len(steps) == len(set(steps)) == 2  # extend has no steps; distill's two, logged once


HOLD_LOCK = """
import sys, time
from sparse_adapt.lock import locked
with locked(sys.argv[1]):
    print("holding", flush=True)
    time.sleep(120)
"""


def test_a_lock_held_by_another_process_refuses_and_dies_with_it(tiny_model_dir, train_inputs, tmp_path, capsys):
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(out)], cwd=ROOT, env=ENV,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        result = cli(capsys, train_argv(tiny_model_dir, train_inputs, out))
        assert_one_line_error(result, f"{out} is in use by another sparse-adapt process (pid {holder.pid})")
    finally:
        holder.send_signal(signal.SIGKILL)  # no cleanup possible: the kernel releases the lock
        holder.wait()
    result = cli(capsys, train_argv(tiny_model_dir, train_inputs, out))
    assert result.code == 0, result.err


PARENT = """
import sys
from pathlib import Path
sys.executable = sys.argv[1]  # the "JVM child": a stand-in that records its pid and waits
from sparse_adapt.retrieval.lucene import build_index
build_index(Path(sys.argv[2]), Path(sys.argv[3]))
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in state  # exited; its new parent has not reaped it yet


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux's")
def test_the_index_child_dies_with_its_parent(tmp_path, capsys):
    if os.statvfs(tmp_path).f_flag & os.ST_NOEXEC:
        pytest.skip("the stand-in indexer is a script, and the temporary folder is mounted noexec")
    pidfile = tmp_path / "child.pid"
    child = tmp_path / "fake-java"
    child.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 120\n")
    child.chmod(0o755)
    vectors, index = tmp_path / "vectors", tmp_path / "index"
    vectors.mkdir()
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(child), str(vectors), str(index)], cwd=ROOT, env=ENV)
    deadline = time.time() + 120
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.time() < deadline and parent.poll() is None, "the child never started"
        time.sleep(0.1)
    pid = int(pidfile.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 10
    while not _gone(pid) and time.time() < deadline:
        time.sleep(0.1)
    alive = not _gone(pid)
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, "the indexing child outlived its killed parent"
    # the killed parent's temporary index is removed by the next write of that index
    assert [p for p in hidden_leftovers(tmp_path) if p.startswith(".index.tmp-")]
    from sparse_adapt.destination import check_output

    check_output(index)
    assert hidden_leftovers(tmp_path) == []


def test_overwrite_discards_a_different_run_but_never_other_files(tiny_model_dir, train_inputs, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(SparseAdaptError, match="not empty and holds no run.json"):
        _pipeline(tiny_model_dir, train_inputs, out, stages="distill")
    _pipeline(tiny_model_dir, train_inputs, out, stages="distill", overwrite=True)  # written beside the notes
    first = (out / "final" / "model.safetensors").read_bytes()
    config = json.loads(train_inputs["config"].read_text())
    config["distill"]["lr"] /= 10
    train_inputs["config"].write_text(json.dumps(config))
    with pytest.raises(SparseAdaptError, match=r"changes its config \[distill\]"):
        _pipeline(tiny_model_dir, train_inputs, out, stages="distill")
    _pipeline(tiny_model_dir, train_inputs, out, stages="distill", overwrite=True)
    assert (out / "final" / "model.safetensors").read_bytes() != first
    assert json.loads((out / "run.json").read_text())["config"]["distill"]["lr"] == config["distill"]["lr"]
    assert [r["event"] for r in _log(out) if "event" in r] == ["stage_start", "stage_end", "final"]  # the old log went too
    assert (out / "notes.txt").read_text() == "keep me"


def test_a_run_recorded_before_a_config_key_existed_resumes_after_an_upgrade(tiny_model_dir, train_inputs, tmp_path):
    out = tmp_path / "run"
    _pipeline(tiny_model_dir, train_inputs, out, stages="extend,distill")
    made = json.loads((out / "final" / "made_from.json").read_text())["written"]
    # An older version wrote no step_cap: its run.json and final record lack the key.
    for path, where in ((out / "run.json", lambda r: r), (out / "final" / "made_from.json", lambda r: r["run"])):
        record = json.loads(path.read_text())
        for section in where(record)["config"].values():
            section.pop("step_cap")
        path.write_text(json.dumps(record))
    _pipeline(tiny_model_dir, train_inputs, out, stages="extend,distill")  # resumes: nothing to train
    assert [r["event"] for r in _log(out) if "event" in r].count("stage_end") == 2
    assert json.loads((out / "final" / "made_from.json").read_text())["written"] == made  # final kept as it was
    # A key whose recorded value differs from today's is still a different run.
    record = json.loads((out / "run.json").read_text())
    record["config"]["distill"]["step_cap"] = 7
    (out / "run.json").write_text(json.dumps(record))
    with pytest.raises(SparseAdaptError, match=r"changes its config \[distill\]"):
        _pipeline(tiny_model_dir, train_inputs, out, stages="extend,distill")


def test_a_base_directory_retrained_in_place_is_another_run(tiny_model_dir, train_inputs, tmp_path):
    import shutil

    from tests.conftest import make_tiny_bert

    base, out = tmp_path / "base", tmp_path / "run"
    shutil.copytree(tiny_model_dir, base)
    _pipeline(base, train_inputs, out, stages="extend,distill")
    made = json.loads((out / "final" / "made_from.json").read_text())["written"]
    (base / "README.md").write_text("notes a user keeps beside the model")  # not what the model computes
    _pipeline(base, train_inputs, out, stages="extend,distill")
    assert json.loads((out / "final" / "made_from.json").read_text())["written"] == made
    # A run recorded before base files were hashed resumes, and its final is kept.
    for path, where in ((out / "run.json", lambda r: r), (out / "final" / "made_from.json", lambda r: r["run"])):
        record = json.loads(path.read_text())
        assert where(record).pop("base_sha256")
        path.write_text(json.dumps(record))
    said: list[str] = []
    _pipeline(base, train_inputs, out, stages="extend,distill", hooks=Hooks(message=said.append))
    assert json.loads((out / "final" / "made_from.json").read_text())["written"] == made
    assert "base_sha256" in json.loads((out / "run.json").read_text())  # recorded from now on
    assert not any("changed" in m for m in said), said  # an upgrade is no change of settings
    # Other weights under the same path: refused, not resumed on top of the old checkpoints.
    make_tiny_bert(seed=1).save_pretrained(base)
    with pytest.raises(SparseAdaptError, match="changes its base's files"):
        _pipeline(base, train_inputs, out, stages="extend,distill")


def test_a_base_under_the_home_directory_is_hashed_as_it_loads(tiny_model_dir, tmp_path, monkeypatch):
    import shutil

    from sparse_adapt.training.rundir import files_sha256

    monkeypatch.setenv("HOME", str(tmp_path))
    shutil.copytree(tiny_model_dir, tmp_path / "base")
    assert files_sha256("~/base") == files_sha256(tmp_path / "base") is not None


def test_a_base_inside_the_run_it_would_replace_is_refused(tiny_model_dir, train_inputs, tmp_path):
    """`train --base OUT/final --out OUT --overwrite` deleted the run, base included, then
    failed to load it: the trained model was gone."""
    out = tmp_path / "run"
    _pipeline(tiny_model_dir, train_inputs, out, stages="extend,distill")
    weights = (out / "final" / "model.safetensors").read_bytes()
    for kw in ({}, {"overwrite": True}):
        with pytest.raises(SparseAdaptError, match=rf"--base {out / 'final'} is {out / 'final'}, part of the run"):
            _pipeline(out / "final", train_inputs, out, stages="distill", **kw)
    assert (out / "final" / "model.safetensors").read_bytes() == weights
    _pipeline(out / "final", train_inputs, tmp_path / "next", stages="distill")  # elsewhere: fine


def test_the_completed_stages_are_the_prefix_whose_checkpoints_are_whole(tmp_path):
    """A later stage's directory after a missing or half-saved one is no checkpoint of this run: the
    run resumes after the last stage whose predecessors are all complete."""
    from sparse_adapt.training.rundir import completed_stages, saved_checkpoints

    def save(name, *files):
        (tmp_path / name).mkdir()
        for f in files:
            (tmp_path / name / f).write_text("{}")

    save("extend", "config.json", "sparse_adapt.json")
    save("warmup", "config.json")  # no sparse_adapt.json: not a complete save
    save("dictionary", "config.json", "sparse_adapt.json")
    save("distill", "config.json", "sparse_adapt.json")
    names = ["extend", "warmup", "dictionary", "distill"]
    assert completed_stages(tmp_path, names) == ["extend"]
    assert completed_stages(tmp_path, ["extend", "dictionary", "distill"]) == ["extend", "dictionary", "distill"]
    assert saved_checkpoints(tmp_path) == ["extend", "dictionary", "distill"]


def test_a_resume_from_a_partial_checkpoint_keeps_the_steps_it_holds_and_drops_the_rest(tmp_path):
    """The checkpoint holds warmup's steps 1-2: their records stay (the work is in the weights);
    step 3, warmup's stage_start (logged anew) and a line torn by the kill go."""
    from sparse_adapt.training.rundir import restart_log

    records = [{"event": "stage_start", "stage": "extend"}, {"event": "stage_end", "stage": "extend"},
               {"event": "stage_start", "stage": "warmup"}, *({"stage": "warmup", "step": s} for s in (1, 2, 3))]
    path = tmp_path / "train_log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"stage": "warm')
    restart_log(path, ["extend"], ("warmup", 2))
    log = _log(tmp_path)
    assert log[:-1] == records[:2] + records[3:5]
    assert {k: log[-1][k] for k in ("event", "attempt", "completed", "dropped_records")} == {
        "event": "resume", "attempt": 2, "completed": ["extend"], "dropped_records": 3}
    restart_log(path, ["extend"], ("warmup", 2))  # a third attempt: the earlier resume event stays
    assert [r["attempt"] for r in _log(tmp_path) if r.get("event") == "resume"] == [2, 3]


def test_a_log_line_that_is_json_but_no_record_is_counted_as_dropped(tmp_path):
    # the resume event's count is what tells the user the log lost lines
    from sparse_adapt.training.rundir import restart_log

    path = tmp_path / "train_log.jsonl"
    path.write_text(json.dumps({"event": "stage_end", "stage": "extend"}) + "\n[1, 2]\n\"x\"\n")
    restart_log(path, ["extend"])
    log = _log(tmp_path)
    assert log[0] == {"event": "stage_end", "stage": "extend"} and len(log) == 2
    assert log[-1]["dropped_records"] == 2


def test_a_base_whose_file_was_renamed_hashes_otherwise(tmp_path):
    # the same bytes under another name load otherwise (vocab.txt is WordPiece's, vocab.json BPE's)
    from sparse_adapt.training.rundir import files_sha256

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    (tmp_path / "a" / "vocab.txt").write_text("[PAD]\n")
    (tmp_path / "b" / "vocab.json").write_text("[PAD]\n")
    assert files_sha256(tmp_path / "a") != files_sha256(tmp_path / "b")


def test_a_final_is_kept_only_when_its_record_matches_and_its_model_is_whole(tmp_path):
    """A rerun that trains nothing keeps OUT/final when it was made by the same recipe; a final
    whose model files went (a user's clean-up) is made again, record or not."""
    from sparse_adapt.training.rundir import final_is_current, final_recipe, record_final

    run = {"stages": ["distill"], "config": {"distill": {}}, "seed": 0, "base": "b", "inputs": {}}
    recipe = final_recipe(run, 0.0, None)
    (tmp_path / "final").mkdir()
    record_final(tmp_path, recipe)
    assert not final_is_current(tmp_path, recipe)  # the record alone: no model
    for name in ("config.json", "sparse_adapt.json"):
        (tmp_path / "final" / name).write_text("{}")
    assert final_is_current(tmp_path, recipe)
    assert not final_is_current(tmp_path, final_recipe({**run, "seed": 1}, 0.0, None))
    assert not final_is_current(tmp_path, final_recipe(run, 0.5, "anchor"))


def test_a_stage_trained_again_replaces_its_folder_whole(tiny_model_dir, train_inputs, tmp_path):
    # extend gone, distill is no longer of a completed prefix: both train again, and what the
    # old distill folder held beside its model described the model now replaced
    import shutil

    out = tmp_path / "run"
    _pipeline(tiny_model_dir, train_inputs, out)
    shutil.rmtree(out / "extend")
    (out / "distill" / "eval_notes.json").write_text("{}")
    _pipeline(tiny_model_dir, train_inputs, out)
    assert (out / "extend" / "config.json").is_file() and (out / "distill" / "config.json").is_file()
    assert not (out / "distill" / "eval_notes.json").exists()


def _manifest(lr: float, seed: int = 0) -> dict:
    return {"stages": ["extend", "warmup"], "config": {"warmup": {"lr": lr}}, "seed": seed, "base": "b", "inputs": {}}


def test_overwrite_discards_the_other_runs_partial_checkpoint_too(tmp_path):
    # left in place, the new run would resume warmup from the old run's optimiser and weights
    from sparse_adapt.training.rundir import prepare

    (tmp_path / "run.json").write_text(json.dumps(_manifest(1e-4)))
    (tmp_path / "extend").mkdir()
    for name in ("config.json", "sparse_adapt.json"):
        (tmp_path / "extend" / name).write_text("{}")
    (tmp_path / "warmup.partial").mkdir()
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(SparseAdaptError, match=r"\(this command changes its seed\)"):
        prepare(tmp_path, _manifest(1e-4, seed=1), ["extend", "warmup"], False, Hooks())
    assert prepare(tmp_path, _manifest(1e-4, seed=1), ["extend", "warmup"], True, Hooks()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_run_whose_earlier_attempt_saved_no_stage_is_rerun_with_other_settings(tmp_path):
    # run.json is written once the base loads: an attempt that then failed holds nothing to mix
    from sparse_adapt.training.rundir import prepare

    (tmp_path / "run.json").write_text(json.dumps(_manifest(1e-4)))
    said: list[str] = []
    assert prepare(tmp_path, _manifest(2e-4, seed=1), ["extend", "warmup"], False, Hooks(message=said.append)) == []
    assert said == [f"{tmp_path}: no stage of the earlier attempt completed; starting afresh"]


def test_a_model_folder_of_the_users_inside_out_is_no_part_of_the_run(tmp_path):
    from sparse_adapt.training.rundir import part_holding, run_parts

    for name in ("final", "my-base"):
        (tmp_path / name).mkdir()
    assert part_holding(tmp_path, tmp_path / "final", run_parts()) == "final"
    assert part_holding(tmp_path, tmp_path / "my-base", run_parts()) is None


def test_a_final_record_that_is_no_object_is_none_and_makes_final_again(tmp_path):
    # a made_from.json edited or damaged into a list must not be a traceback on every rerun
    from sparse_adapt.training.rundir import final_is_current, final_recipe, final_record, trained_on

    (tmp_path / "final").mkdir()
    for name in ("config.json", "sparse_adapt.json"):
        (tmp_path / "final" / name).write_text("{}")
    (tmp_path / "final" / "made_from.json").write_text("[1, 2]")
    assert final_record(tmp_path / "final") is None and trained_on(tmp_path / "final") is None
    assert not final_is_current(tmp_path, final_recipe(_manifest(1e-4), 0.0, None))
