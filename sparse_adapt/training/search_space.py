"""The search space of ``sparse-adapt tune``: which distill settings a study searches, over
which ranges (:data:`SEARCH_SPACE`, or a ``--space`` file), and the checks that keep every
value a trial can draw one the config takes."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from sparse_adapt.data.reading import int_as_float
from sparse_adapt.errors import ConfigError
from sparse_adapt.training.config import DistillConfig, TrainConfig
from sparse_adapt.training.config_files import read_table


@dataclass(frozen=True)
class Range:
    low: float
    high: float
    log: bool = True


# Distill settings searched, with ranges around the defaults (``config.py``); log scale
# where the plausible values span orders of magnitude.
SEARCH_SPACE: dict[str, Range] = {
    "lr": Range(3e-5, 5e-4),
    "kd": Range(0.01, 1.0),
    "ret": Range(0.1, 3.0),
    "sp": Range(0.02, 1.0),
    "dom": Range(10.0, 3000.0),
    "ctr": Range(0.05, 2.0),
    "qexp": Range(0.5, 20.0),
    "pres": Range(0.01, 3.0),
}


# Searched together, their product bounds AdamW's decay (config.check_decay): each end can be
# fine with the other's default and the pair not, or the other way round.
_DECAY_PAIR = ("lr", "weight_decay")
_LENIENT = {"lr": 1e-12, "weight_decay": 0.0}


def load_space(path: str | Path) -> dict[str, Range]:
    """A search space from a TOML or JSON file: ``name = [low, high]`` (log scale) or
    ``name = {low = .., high = .., log = false}`` per distill setting that is a float
    (``lr``, ``kd``, ...). Replaces :data:`SEARCH_SPACE` whole; errors name the file and key."""
    path = Path(path)
    raw = read_table(path, "search space")
    # Not searchable: what defines the objective (its validation split, its control penalty) or
    # happens after it is measured (interpolation).
    defaults = DistillConfig()
    floats = {f.name for f in dataclasses.fields(defaults) if isinstance(getattr(defaults, f.name), float)}
    floats -= {"valid_fraction", "control_penalty", "interpolate"}
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"{path}: expected a table of distill settings, each [low, high] or {{low, high, log}}")
    space: dict[str, Range] = {}
    for key, value in raw.items():
        if key not in floats:
            raise ConfigError(f"{path}: {key!r} is no distill setting with a float value (one of: {', '.join(sorted(floats))})")
        if isinstance(value, list) and len(value) == 2:
            value = {"low": value[0], "high": value[1]}
        if not isinstance(value, dict) or set(value) - {"low", "high", "log"} or not {"low", "high"} <= set(value):
            raise ConfigError(f"{path}: {key}: expected [low, high] or {{low, high, log}}, got {value!r:.80}")
        low, high, log = value["low"], value["high"], value.get("log", True)
        # int_as_float: a 400-digit integer overflowed math.isfinite with a traceback
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(int_as_float(v)) for v in (low, high)) \
                or not isinstance(log, bool) or not low < high or (log and low <= 0):
            raise ConfigError(f"{path}: {key}: finite numbers low < high expected (low > 0 on a log scale), got {value!r:.80}")
        space[key] = Range(float(low), float(high), log)
    default = TrainConfig()
    for key, r in space.items():  # both ends as the config checks them: found in a trial, it stopped the study
        # The other of the decay pair at its most lenient (the space's low, else a stand-in: the
        # config's own value is judged with it by check_decay_highs, once the config is known).
        partner = {}
        if key in _DECAY_PAIR:
            other = next(p for p in _DECAY_PAIR if p != key)
            partner[other] = space[other].low if other in space else _LENIENT[other]
        for end in (r.low, r.high):
            try:
                with_distill(default, {key: end, **partner})
            except ConfigError as e:
                raise ConfigError(f"{path}: {key}: {end:g} is no value the config takes ({e})") from None
    return space


def check_decay_highs(space: dict[str, Range], cfg: TrainConfig) -> None:
    """The highs of ``lr``/``weight_decay`` the space searches, with ``cfg``'s value of the
    other, are values the config takes: a trial that drew them stopped the study, after the
    prefix had trained."""
    highs = {key: space[key].high for key in _DECAY_PAIR if key in space}
    if highs:
        try:
            with_distill(cfg, highs)
        except ConfigError as e:
            shown = " and ".join(f"{k} = {v:g}" for k, v in highs.items())
            other = next(k for k in _DECAY_PAIR if k not in highs) if len(highs) == 1 else ""
            whose = f"its high, with the config's {other}" if other else "its highs together"
            raise ConfigError(f"search space: {shown} ({whose}) is no value the config takes ({e})") from None


def sample(trial, space: dict[str, Range]) -> dict[str, float]:
    return {k: trial.suggest_float(k, r.low, r.high, log=r.log) for k, r in space.items()}


def with_distill(cfg: TrainConfig, values: dict[str, float]) -> TrainConfig:
    return dataclasses.replace(cfg, distill=dataclasses.replace(cfg.distill, **values)).validate()
