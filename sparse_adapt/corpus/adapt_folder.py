"""What an ``adapt --out`` folder holds, and when a rerun into it may resume.

``adapt.json`` (the manifest) says what the run is; a rerun with the same manifest resumes,
one with another corpus, base, teacher, options, seed, config or given files is refused (or, with
``--overwrite``, its outputs are discarded, never a file the user gave), and a folder that
holds anything but an adapt run is refused.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from sparse_adapt.atomic import clean_leftovers, write_atomic
from sparse_adapt.corpus.provenance import PROVENANCE
from sparse_adapt.data import file_sha256, read_record
from sparse_adapt.errors import SparseAdaptError
from sparse_adapt.lock import LOCK_FILE
from sparse_adapt.training.rundir import PARTIAL
from sparse_adapt.progress import Hooks, SILENT

MANIFEST = "adapt.json"
# Where adapt writes the inputs it generates, in DIR (a user's own files stay where they are).
GENERATED = {"terms": "domain_terms.json", "dictionary": "dictionary.jsonl", "train": "train.jsonl"}
# The held-out queries, their qrels and query groups make-train splits off into DIR.
HELDOUT = {"queries": "heldout_queries.jsonl", "qrels": "heldout_qrels.tsv", "groups": "query_groups.json"}
PRETRAINED = "pretrained"
TRAINING = "training"
FINAL = "final"
SUMMARY = "summary.json"  # written by the summary (report/adapt.py)


class AdaptMismatchError(SparseAdaptError):
    """``--out`` holds a different adapt run, or something that is no adapt run."""


# Options added to adapt after runs were made with it: an older adapt.json lacks them, and
# its files were made as each option's value here still makes them (no siblings, the teacher's
# own labels, no glosses, no pretraining, mined against English), so such a run resumes with those values and
# is refused with others.
LEGACY_OPTIONS = {"siblings": 0, "term_labels": False, "glosses": False, "pretrain": False, "lang": "en"}


# What a run writes into DIR, and --overwrite removes; not ``pretrained/``, which depends on the
# base alone and says in its own manifest which base it came from.
RUN_OUTPUTS = (
    MANIFEST, *GENERATED.values(), *HELDOUT.values(), "mining.json",
    PROVENANCE, SUMMARY, TRAINING, FINAL,
)


def check_out(
    out: Path, manifest: dict, overwrite: bool = False, keep: tuple[Path, ...] = (), hooks: Hooks = SILENT,
) -> None:
    for name in (*RUN_OUTPUTS, PRETRAINED, PRETRAINED + PARTIAL):  # temporaries of a killed write of
        clean_leftovers(out, name)  # ours (the caller holds DIR's lock: no writer lives); never a user's
    path = out / MANIFEST
    if path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            old = None
        if not isinstance(old, dict):  # emptied or edited by hand: no run that could resume
            if not overwrite:
                raise AdaptMismatchError(f"{path} is damaged (not a JSON object of an adapt run); use another --out, "
                                         f"pass --overwrite to discard that run, or delete {out}")
            discard_run(out, keep, hooks)
            hooks.message(f"--overwrite: discarded the adapt run in {out} (its {MANIFEST} was damaged)")
            return
        if isinstance(old.get("options"), dict):
            old["options"] = {**LEGACY_OPTIONS, **old["options"]}
        diff = sorted(k for k in set(old) | set(manifest) if old.get(k) != manifest.get(k))
        if diff and all(p.name == MANIFEST or _left_by_a_run(p) for p in out.iterdir()):
            # The run stopped before making any input (mining found no term, say): the options its
            # error suggested start it afresh. Its pretraining (and checkpoint) stays: each says
            # which base it holds by the base's files, and one of another base is made again
            # (training.general), where comparing names here dropped "b" for "b/".
            path.unlink()
            return
        if diff and not overwrite:
            raise AdaptMismatchError(
                f"{out} holds an adapt run with other {differences(old, manifest, diff)}; use another --out, "
                f"pass --overwrite to discard that run, or delete {out}"
            )
        if diff:
            discard_run(out, keep, hooks)
            hooks.message(f"--overwrite: discarded the adapt run in {out}, made with other {differences(old, manifest, diff)}")
    elif out.exists() and (not out.is_dir() or not all(_left_by_a_run(p) for p in out.iterdir())):
        raise AdaptMismatchError(not_a_run(out))


def _left_by_a_run(entry: Path) -> bool:
    """What a run leaves in DIR besides its manifest and inputs, and a rerun may find without
    them (--overwrite discarded the run, then the teacher failed to load): the lock, the
    pretrained base and its checkpoint (each by its own files) and edited cards kept aside
    (:func:`check_out` first removes temporaries of our own writes killed midway). A user's
    folder holding anything else is not ours."""
    from sparse_adapt.training.checkpoint import TRAINER_STATE
    from sparse_adapt.training.general import RECORD

    name = entry.name
    return (name == LOCK_FILE
            or (name == PRETRAINED and (entry / RECORD).is_file())
            or (name == PRETRAINED + PARTIAL and (entry / TRAINER_STATE).is_file())
            or (entry.is_file() and _EDITED_CARD_NAME.fullmatch(name) is not None))


def not_a_run(out: Path) -> str:
    return (f"{out} {'is a file' if out.is_file() else f'exists and holds no {MANIFEST}'}: refusing to write an adapt "
            "run into it; --out names a new folder for the run (its generated inputs, training/ and final/), e.g. runs/my-domain")


def differences(old: dict, new: dict, keys: list[str]) -> str:
    """``options (top 20 -> 10), base (b -> b2)`` for the manifest keys that differ: which option changed
    is what a user needs to rerun as before (hashes of files are only named)."""
    said = []
    for key, before, after in ((k, old.get(k), new.get(k)) for k in keys):
        if isinstance(before, dict) and isinstance(after, dict) and key in ("options", "given"):
            changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            detail = changed if key == "given" else [f"{k} {before.get(k)} -> {after.get(k)}" for k in changed]
            said.append(f"{key} ({', '.join(detail)})")
        else:
            said.append(f"{key} ({before} -> {after})" if key in ("base", "teacher", "seed") else key)
    return ", ".join(said)


def discard_run(out: Path, keep: tuple[Path, ...], hooks: Hooks = SILENT) -> None:
    """Remove a run's own outputs from ``out``; a file the user gave this command (an edited
    ``domain_terms.json`` passed as ``--terms``) is theirs and stays, and so does an edited
    model card (:func:`keep_edited_card`)."""
    from sparse_adapt.modeling.card import CARD_FILE
    from sparse_adapt.training.rundir import FINAL as RUN_FINAL

    keep_edited_card(out, {card_sha256(out / TRAINING / RUN_FINAL / CARD_FILE)}, hooks)
    kept = {p.resolve() for p in keep}
    for name in RUN_OUTPUTS:
        path = out / name
        if path.resolve() in kept or any(path.resolve() in k.parents for k in kept):
            continue
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def pseudo_data_done(out: Path) -> bool:
    # heldout_queries.jsonl is written last of the four pseudo-data files.
    return (out / GENERATED["train"]).is_file() and (out / HELDOUT["queries"]).is_file()


# An edited model card DIR/final held when DIR/final is replaced by a retrained model's copy.
EDITED_CARD = "final-card.edited{}.md"
_EDITED_CARD_NAME = re.compile(re.escape(EDITED_CARD).replace(r"\{\}", r"(-\d+)?"))  # every copy's name


def card_sha256(path: Path) -> str | None:
    """The sha256 of the model card at ``path``; None when there is none."""
    return file_sha256(path) if path.is_file() else None


def recorded_card_sha256(out: Path) -> str | None:
    """The card ``DIR/summary.json`` says it wrote into ``DIR/final``; None when there is no
    summary, or a damaged one: it then recognises no card."""
    recorded = read_record(out / SUMMARY).get("card_sha256")
    return recorded if isinstance(recorded, str) else None


def keep_edited_card(out: Path, ours: set[str | None], hooks: Hooks = SILENT) -> Path | None:
    """Copy ``DIR/final``'s card aside (never over an earlier copy) when it is none of the cards
    this run wrote (``ours``: their sha256s; the summary's recorded one is added here), before
    ``DIR/final`` is replaced: the text a user wrote into it is theirs, the new model gets a
    fresh card. Returns the copy, or None."""
    from sparse_adapt.modeling.card import CARD_FILE, unedited_card

    card = out / FINAL / CARD_FILE
    if not card.is_file() or unedited_card(card) or file_sha256(card) in (ours | {recorded_card_sha256(out)}) - {None}:
        return None
    n = 1
    while (copy := out / EDITED_CARD.format("" if n == 1 else f"-{n}")).exists():
        n += 1
    write_atomic(copy, card.read_bytes())
    hooks.message(f"{card} was edited since this run wrote it: kept as {copy}; the new {FINAL}/ gets a card of its own")
    return copy
