"""Errors caused by what the user gave us. The CLI prints these as one line, exit code 2;
anything else is a bug and keeps its traceback."""


class SparseAdaptError(Exception):
    """Base of every user-facing error."""


class ConfigError(SparseAdaptError, ValueError):
    """An invalid option or configuration value (unknown stage name, negative weight...)."""


class ModelLoadError(SparseAdaptError, RuntimeError):
    """A model name or directory cannot be loaded; the message says what was tried."""


class OutputError(SparseAdaptError):
    """An output path cannot be written: it holds the user's files, is read-only or is in use."""
