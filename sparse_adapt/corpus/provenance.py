"""Which terms file each generated input of an ``adapt`` run was made from.

The dictionary and the pseudo-labelled data are made from the terms file: its terms are
the entries, the removed words of the semantic queries and the line of the term-consistent
labels. A user who edits ``DIR/domain_terms.json`` (adding a term the cut left out) and
reruns had them trained as made from the old terms, silently. ``DIR/generated.json`` records,
per generated input, the sha256 of the terms file it was made from and of its own files; on
a rerun with another terms file an input nobody edited is removed, so the run makes it again,
and an edited one is kept with a warning (the user's edit wins, as everywhere in ``DIR``).
"""

from __future__ import annotations

from pathlib import Path

from sparse_adapt.atomic import write_json_atomic
from sparse_adapt.data import file_sha256, read_record
from sparse_adapt.progress import SILENT, Hooks

PROVENANCE = "generated.json"
# Each generated input made from the terms file, and the files it consists of in DIR.
MADE_FROM_TERMS = {
    "dictionary": ("dictionary.jsonl",),
    "train": ("train.jsonl", "heldout_queries.jsonl", "heldout_qrels.tsv", "query_groups.json"),
}


def _read(out: Path) -> dict:
    return read_record(out / PROVENANCE)  # {}: a run from before this record, or a damaged one


def record(out: Path, name: str, terms: Path, notes: dict | None = None) -> None:
    """``name`` (a key of ``MADE_FROM_TERMS``) was just made in ``out`` from ``terms``;
    ``notes``: what making it counted, for a later run's summary (:func:`recorded_notes`)."""
    data = _read(out)
    data[name] = {"terms": file_sha256(terms),
                  "files": {f: file_sha256(out / f) for f in MADE_FROM_TERMS[name] if (out / f).is_file()},
                  **({"notes": notes} if notes else {})}
    write_json_atomic(out / PROVENANCE, data)


def record_unrecorded(out: Path, name: str, terms: Path) -> None:
    """Record ``name``, found in ``out`` without a record, as made from ``terms``: a run killed
    between writing it and recording it left it untracked for good, so a later edit of the
    terms file never made it again."""
    if name not in _read(out) and (out / MADE_FROM_TERMS[name][0]).is_file() and terms.is_file():
        record(out, name, terms)


def recorded_notes(out: Path, name: str) -> dict | None:
    made = _read(out).get(name)
    notes = made.get("notes") if isinstance(made, dict) else None
    return notes if isinstance(notes, dict) else None


def refresh(out: Path, terms: Path, hooks: Hooks = SILENT, dry: bool = False) -> list[str]:
    """Remove the generated inputs of ``out`` made from another terms file than ``terms`` and
    not edited since, so that the run makes them again; returns their names. An edited one
    stays, with a warning. ``dry``: only say which would go (nothing removed, nothing said)."""
    data = _read(out)
    if not data or not terms.is_file():
        return []
    current = file_sha256(terms)
    removed = []
    for name, made in data.items():
        if name not in MADE_FROM_TERMS or not isinstance(made, dict) or made.get("terms") == current:
            continue
        files = made.get("files") if isinstance(made.get("files"), dict) else {}
        present = {f: out / f for f in files if (out / f).is_file()}
        if not present:
            continue  # already gone: the run makes it anyway
        edited = [f for f, path in present.items() if file_sha256(path) != files[f]]
        main = MADE_FROM_TERMS[name][0]
        if edited:
            if dry:
                continue
            hooks.message(f"warning: {out / main} was made from an earlier {terms.name} and {edited[0]} was edited "
                          f"since: kept as it is (delete {main} to make it again from the terms file)")
            continue
        removed.append(name)
        if dry:
            continue
        for path in present.values():
            path.unlink()
        hooks.message(f"{terms.name} changed since {main} was made from it: making {main} again")
    return removed
