"""Reading and writing training config files: JSON or TOML overrides laid over the defaults
of ``config.py`` (and a command's own) and the settings recommended for the base (a built-in
base's, or a model folder's ``recommended_training.json``), each value checked against
its field's type with an error naming the file and the dotted key; and a config back to TOML.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
from pathlib import Path
from typing import Any, Collection

from sparse_adapt.data import read_text
from sparse_adapt.data.reading import encodable
from sparse_adapt.errors import ConfigError
from sparse_adapt.training.config import TrainConfig


# Every int setting (epochs, steps, lengths, sizes) is far below this; a 400-digit max_steps
# passed and overflowed the lr schedule.
MAX_INT = 2**31 - 1


def _coerce(where: str, key: str, value: Any, kind: Any) -> Any:
    """Check a raw value against the field's annotated type (``int``, ``float``, ``bool``, ``str``)."""
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok:
            try:
                value = float(value)
            except OverflowError:  # an integer beyond float range
                value = math.inf
            if not math.isfinite(value):
                # JSON and TOML both spell NaN and infinity; either would train a NaN model.
                raise ConfigError(f"{where}: {key}: expected a finite number, got {value!r}")
    else:
        ok = isinstance(value, str)
        if ok and not encodable(value):  # it failed in the tokenizer, or when `tune` wrote best.toml after a trial
            raise ConfigError(f"{where}: {key}: contains an unpaired surrogate, not text: {value!r:.60}")
    if ok and kind is int and abs(value) > MAX_INT:
        raise ConfigError(f"{where}: {key}: expected at most {MAX_INT:,}, got {str(value)[:60]}")
    if not ok:
        raise ConfigError(f"{where}: {key}: expected {kind.__name__}, got {value!r:.60}")
    return value


def config_from_dict(raw: dict[str, Any], source: str = "<config>") -> TrainConfig:
    """Build a validated :class:`TrainConfig` from ``{section: {key: value}}`` overrides."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a table of stage sections")
    sections = {f.name: f for f in dataclasses.fields(TrainConfig)}
    built = {}
    for name, values in raw.items():
        if name not in sections:
            raise ConfigError(f"{source}: unknown section {name!r}; valid: {', '.join(sections)}")
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: section {name!r} must be a table of settings")
        cls = sections[name].default_factory
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kwargs = {}
        for key, value in values.items():
            if key not in fields:
                shown = f"{name}.{key}" if f"{name}.{key}".isprintable() else repr(f"{name}.{key}")
                raise ConfigError(f"{source}: unknown key {shown}; valid: {', '.join(fields)}")
            kind = {"int": int, "float": float, "bool": bool, "str": str}[str(fields[key].type)]
            kwargs[key] = _coerce(source, f"{name}.{key}", value, kind)
        built[name] = cls(**kwargs)
    cfg = TrainConfig(**built)
    try:
        return cfg.validate()
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    # json keeps the last of two equal keys; TOML refuses them, and so does a JSON config.
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} is given twice")
        out[key] = value
    return out


def load_config(path: str | Path | None, base: str | Path | None = None, defaults: dict | None = None) -> TrainConfig:
    """Defaults, then ``defaults`` (a command's own, e.g. ``adapt``'s), then the settings
    recommended for ``base`` when it is a built-in base that has some
    (``sparse_adapt.modeling.builtin``) or a model folder holding ``recommended_training.json``
    (written by ``pretrain``), then ``path`` (``.toml`` or JSON) when given: a key the file sets
    always wins."""
    if path is None:
        return config_from_dict(with_recommended({}, base, defaults), _recommended_source(base))
    raw = read_table(path)
    try:
        return config_from_dict(with_recommended(raw, base, defaults), str(path))
    except ConfigError:
        # Whose value it is: a NaN in the base's recommended file had been blamed on the user's
        # config. Judged only after the merge failed: a recommended value the file overrides, or
        # one that is fine with the file's other settings, is no error of anyone's.
        config_from_dict(with_recommended({}, base, defaults), _recommended_source(base))
        raise


def _recommended_source(base: str | Path | None) -> str:
    """Where the settings recommended for ``base`` come from, as an error names it."""
    from sparse_adapt.modeling.builtin import BUILTIN_BASES, RECOMMENDED_FILE

    if base is None or str(base) in BUILTIN_BASES:
        return f"the settings recommended for {base}" if base is not None else "the defaults"
    return str(Path(base) / RECOMMENDED_FILE)


def read_table(path: str | Path, what: str = "config") -> Any:
    """A ``.toml`` file, or JSON (duplicate keys refused), as parsed; one-line errors naming it."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{p}: is a directory; give the {what} file itself (JSON or TOML)")
    if not p.is_file():
        raise ConfigError(f"{p}: {what} file not found" if not p.exists() else
                          f"{p}: not a regular file (a pipe or a device); give the {what} file itself (JSON or TOML)")
    text = read_text(p)
    toml = p.suffix.lower() == ".toml"
    try:
        return tomllib.loads(text) if toml else json.loads(text, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as e:  # both decode errors are ValueErrors; so is a 5000-digit int
        read_as = "" if toml or p.suffix.lower() == ".json" else "; read as JSON: only a .toml file is read as TOML"
        raise ConfigError(f"{p}: cannot parse ({str(e)[:200]}{read_as})") from None


def with_recommended(raw: Any, base: str | Path | None, defaults: dict | None = None) -> Any:
    """``raw`` overrides laid over the settings recommended for ``base``, themselves laid over
    ``defaults`` (neither: ``raw`` itself).

    Only sections that are tables merge; anything else is passed on as written, so that
    :func:`config_from_dict` names the file and the bad section.
    """
    if (base is None and not defaults) or not isinstance(raw, dict):
        return raw
    from sparse_adapt.modeling.builtin import recommended_settings

    merged = {section: dict(values) for section, values in (defaults or {}).items()}
    for section, values in (recommended_settings(base) if base is not None else {}).items():
        merged.setdefault(section, {}).update(values)
    for section, values in raw.items():
        if isinstance(values, dict) and isinstance(merged.get(section), dict):
            merged[section].update(values)
        else:
            merged[section] = values
    return merged


def recommended_in_effect(cfg: TrainConfig, base: str | Path | None, sections: Collection[str] | None = None) -> str:
    """``section.key = value`` of each setting recommended for ``base`` that ``cfg`` holds (in
    ``sections`` only, when given: the stages a run has), or ''."""
    held = cfg.to_dict()
    return ", ".join(
        f"{section}.{key} = {value!r}"
        for section, values in with_recommended({}, base).items()
        if sections is None or section in sections
        for key, value in values.items()
        if held.get(section, {}).get(key) == value
    )


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)  # validated configs hold finite numbers; repr round-trips floats
    # A JSON string is a valid TOML basic string (same escapes for quotes, backslashes, controls).
    return json.dumps(value, ensure_ascii=False)


def config_to_toml(cfg: TrainConfig, header: str = "") -> str:
    """Every setting of ``cfg`` as TOML that :func:`load_config` reads back to an equal config."""
    lines = [f"# {h}" for h in header.splitlines()] if header else []
    for section, values in cfg.to_dict().items():
        lines += ["" if lines else None, f"[{section}]"]
        lines += [f"{key} = {_toml_value(value)}" for key, value in values.items()]
    return "\n".join(line for line in lines if line is not None) + "\n"
