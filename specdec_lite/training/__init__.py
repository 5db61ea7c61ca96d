"""Retraining the shipped weights (the ``train`` extra: torch).

* :mod:`.train`: the GPT target and draft;
* :mod:`.train_eagle`: the EAGLE-style drafter on the target's features;
* :mod:`.train_early_exit`: the exit heads of the early-exit draft.

Each runs as ``python -m specdec_lite.training.<name>``. Nothing else imports them.
"""
