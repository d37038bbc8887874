"""Training: typed config, masking, ONE loop used by every stage, the stages and the
resumable pipeline (``config.py``, ``masking.py``, ``loop.py``, ``stages.py``, ``pipeline.py``)."""
