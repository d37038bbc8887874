"""sparse-adapt: teach SPLADE learned-sparse retrieval models the vocabulary of a domain.

Importing the package changes no global state (logging, progress bars, threads); the
CLI configures those for itself. ``from sparse_adapt import SpladeEncoder`` loads the
model code on first use.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    if name in ("SpladeEncoder", "SpladeSettings"):
        from sparse_adapt.modeling import encoder

        return getattr(encoder, name)
    raise AttributeError(f"module 'sparse_adapt' has no attribute {name!r}")
