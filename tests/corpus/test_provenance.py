"""generated.json: which terms file each generated input of DIR was made from, and what a rerun
with another terms file does with it (made again unless edited since; ``dry`` only says)."""

from __future__ import annotations

import json

from sparse_adapt.corpus.provenance import PROVENANCE, record, record_unrecorded, recorded_notes, refresh
from sparse_adapt.progress import Hooks

TRAIN_FILES = ("train.jsonl", "heldout_queries.jsonl", "heldout_qrels.tsv", "query_groups.json")


def _made(tmp_path):
    """DIR with both generated inputs recorded as made from terms.json, then terms.json edited."""
    out = tmp_path / "run"
    out.mkdir()
    terms = out / "domain_terms.json"
    terms.write_text('{"jargon": ["zentrofax"]}')
    for f in ("dictionary.jsonl", *TRAIN_FILES):
        (out / f).write_text(f"{f} made from the old terms\n")
    record(out, "dictionary", terms)
    record(out, "train", terms, notes={"queries": 12})
    terms.write_text('{"jargon": ["zentrofax", "sourdough"]}')
    return out, terms


def test_a_rerun_with_other_terms_removes_what_nobody_edited_and_keeps_an_edited_input(tmp_path):
    out, terms = _made(tmp_path)
    # not the main file but one of its companions: the warning names the one the user edited
    (out / "heldout_qrels.tsv").write_text("q1\t0\td1\t1\n")
    said = []
    assert refresh(out, terms, Hooks(message=said.append)) == ["dictionary"]
    assert not (out / "dictionary.jsonl").exists()
    assert all((out / f).is_file() for f in TRAIN_FILES)
    assert said == [
        "domain_terms.json changed since dictionary.jsonl was made from it: making dictionary.jsonl again",
        f"warning: {out / 'train.jsonl'} was made from an earlier domain_terms.json and heldout_qrels.tsv was "
        "edited since: kept as it is (delete train.jsonl to make it again from the terms file)",
    ]


def test_a_dry_refresh_names_what_would_go_and_neither_removes_nor_says_anything(tmp_path):
    out, terms = _made(tmp_path)
    (out / "train.jsonl").write_text("edited\n")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    said = []
    assert refresh(out, terms, Hooks(message=said.append), dry=True) == ["dictionary"]
    assert said == [] and {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_refresh_leaves_inputs_of_the_same_terms_gone_ones_and_a_dir_without_terms_alone(tmp_path):
    out, terms = _made(tmp_path)
    old = '{"jargon": ["zentrofax"]}'
    assert refresh(out, terms, dry=True) == ["dictionary", "train"]
    # an input whose files are all gone is made by the run anyway: nothing to remove or name
    (out / "dictionary.jsonl").unlink()
    assert refresh(out, terms, dry=True) == ["train"]
    terms.unlink()  # no terms file to compare with: nothing is stale
    assert refresh(out, terms) == [] and all((out / f).is_file() for f in TRAIN_FILES)
    terms.write_text(old)  # the terms the inputs were made from
    assert refresh(out, terms) == [] and all((out / f).is_file() for f in TRAIN_FILES)


def test_record_hashes_only_the_files_present_and_keeps_its_notes(tmp_path):
    out, terms = _made(tmp_path)
    (out / "query_groups.json").unlink()  # a run without groups
    record(out, "train", terms)
    made = json.loads((out / PROVENANCE).read_text())
    assert sorted(made["train"]["files"]) == sorted(TRAIN_FILES[:3])
    assert "notes" not in made["train"] and recorded_notes(out, "train") is None
    assert recorded_notes(out, "dictionary") is None and recorded_notes(out, "nothing") is None
    record(out, "train", terms, notes={"queries": 3})
    assert recorded_notes(out, "train") == {"queries": 3}
    # recorded with its 3 files: all 3 unedited, so the edited terms remove them
    (out / "dictionary.jsonl").unlink()
    assert refresh(out, terms.parent / "other.json") == []  # no such terms file
    terms.write_text("{}")
    assert refresh(out, terms) == ["train"] and not any((out / f).exists() for f in TRAIN_FILES)


def test_an_unrecorded_input_is_recorded_once_and_only_when_it_and_the_terms_exist(tmp_path):
    out, terms = _made(tmp_path)
    recorded = json.loads((out / PROVENANCE).read_text())
    record_unrecorded(out, "train", terms)  # recorded already (from the old terms): left as it was
    assert json.loads((out / PROVENANCE).read_text()) == recorded
    (out / PROVENANCE).write_text(json.dumps({"train": recorded["train"]}))
    (out / "dictionary.jsonl").unlink()
    record_unrecorded(out, "dictionary", terms)  # its file is gone: nothing to record
    assert "dictionary" not in json.loads((out / PROVENANCE).read_text())
    (out / "dictionary.jsonl").write_text("x\n")
    record_unrecorded(out, "dictionary", out / "missing.json")
    assert "dictionary" not in json.loads((out / PROVENANCE).read_text())
    record_unrecorded(out, "dictionary", terms)
    made = json.loads((out / PROVENANCE).read_text())
    assert made["train"] == recorded["train"] and made["dictionary"]["terms"] != recorded["dictionary"]["terms"]


def test_a_record_of_another_version_or_a_hand_edit_is_left_alone(tmp_path):
    """generated.json that parses but not as this version wrote it: an unknown input, a record
    that is no object, files or notes of another shape; refresh neither crashes nor removes."""
    out, terms = _made(tmp_path)
    (out / "glossary.jsonl").write_text("x\n")
    (out / PROVENANCE).write_text(json.dumps({
        "glossary": {"terms": "old", "files": {"glossary.jsonl": "old"}},
        "train": "made from the old terms",
        "dictionary": {"terms": "old", "files": ["dictionary.jsonl"], "notes": ["queries", 12]},
    }))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert refresh(out, terms) == [] and {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert recorded_notes(out, "dictionary") is None and recorded_notes(out, "train") is None
