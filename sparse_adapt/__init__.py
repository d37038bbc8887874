"""sparse-adapt: teach SPLADE learned-sparse retrieval models the vocabulary of a domain."""

from transformers.utils import logging as _hf_logging

# Weight-loading progress bars from transformers would bury our own output.
_hf_logging.disable_progress_bar()

__version__ = "0.1.0"
