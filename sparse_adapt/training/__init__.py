"""Training, one concept per module:

- ``config.py``, ``config_files.py``: the typed config and its JSON/TOML files; ``search_space.py``,
  ``tuning.py``, ``study.py``: ``tune``'s hyperparameter search.
- ``loop.py``: ONE loop used by every stage; ``checkpoint.py``: its mid-stage checkpoints;
  ``masking.py``, ``mlm_data.py``: masked-LM inputs; ``distributed.py``: several processes.
- ``stages.py``: extend -> warmup -> dictionary -> distill; ``template.py``: the dictionary
  stage's text; ``definitions.py``: definition queries; ``reference.py``: the frozen reference;
  ``freezing.py``: training the domain rows only; ``density.py``: document density.
- ``pipeline.py``: the resumable staged pipeline; ``rundir.py``: its run directory;
  ``validation.py``: validation and best-epoch selection; ``interpolation.py``: the final
  model averaged with its starting point.
- ``general.py``: general-English pretraining of a base (``pretrain``).
"""
