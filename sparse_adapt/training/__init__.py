"""Training: typed config and its files, masking, ONE loop used by every stage, the stages
and the resumable pipeline with its run directory and checkpoints; validation, tuning,
pretraining (``general.py``) and the rest, each in the file named for it (README,
"Development", maps every module)."""
