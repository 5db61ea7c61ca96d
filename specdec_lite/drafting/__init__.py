"""Where draft tokens come from, and how many to ask for.

* :mod:`.proposers`: the proposer interface, a draft model, prompt lookup;
* :mod:`.eagle`: a one-layer drafter over the target's hidden state;
* :mod:`.early_exit`: the target's first blocks with a trained exit head;
* :mod:`.medusa`: Medusa heads and their candidate trees;
* :mod:`.draft_length`: draft-length policies (fixed, heuristic, confidence, automatic).

Drafting builds on :mod:`specdec_lite.models` and :mod:`specdec_lite.rules`.
"""
