"""What a speculative step costs on this machine, measured in a fraction of a second.

Whether drafting pays, and how many tokens, depends on the machine as much as on α
(chapter 6): a step that drafts k tokens costs k draft calls plus one target call over
k + 1 tokens plus the loop's own work, and on a CPU none of those is free. The
automatic draft-length policy (:class:`specdec_lite.drafting.draft_length.AutoK`) needs that
cost for each k, in units of one plain decoding step. :func:`time_steps` measures it by
running real steps, so everything a step pays is in the number.

Timings vary from run to run, and a policy built on them chooses k from them; at T > 0
a different k gives different (equally exact) tokens for the same seed. So measure once
and pass the same :class:`~specdec_lite.drafting.draft_length.StepCosts` to every run that must
be reproducible (:func:`specdec_lite.engine.decode.speculative_generate` does this for
``policy="auto"``: it measures a target and draft pair once per process).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ..checks import check_int
from ..drafting.draft_length import StepCosts


def time_steps(run_step: Callable[[int], object], k_max: int, *,
               reset: Callable[[], object] | None = None, repeats: int = 15,
               seed: int = 0) -> StepCosts:
    """``run_step(k)`` runs a step that drafts and checks k tokens (or a few such steps in
    a row, returning how many: each call's time is then divided by it), always from the
    same starting point, which ``reset()`` (untimed, before each call) restores: models
    with a cache must forget the step's last context token, as in a run, where every step
    reads the tokens the previous one emitted. Each k in
    0..``k_max`` is timed ``repeats`` times, in rounds whose order is shuffled by
    ``seed`` (so a slow moment of the machine hits every k alike), after one untimed
    warm-up round. The median time of each k over that of k = 0, made non-decreasing in
    k: a step with more drafts does all the work of one with fewer and more, so a k timed
    cheaper than a smaller one is timing noise (it would make the policy prefer it for no
    reason), and takes the smaller k's price."""
    k_max = check_int(k_max, "k_max", 1)
    repeats = check_int(repeats, "repeats", 1)
    rng = np.random.default_rng(seed)
    seconds = np.zeros((repeats, k_max + 1))  # [repeats, k_max + 1]
    for rep in range(repeats + 1):
        for k in rng.permutation(k_max + 1):
            if reset is not None:
                reset()
            start = time.perf_counter()
            steps = run_step(int(k))
            if rep:
                seconds[rep - 1, k] = (time.perf_counter() - start) / (steps or 1)
    median = np.median(seconds, axis=0)  # [k_max + 1]
    ratio = np.maximum.accumulate(median / median[0])  # [k_max + 1], ratio[0] = 1
    return StepCosts(tuple(float(x) for x in ratio))


__all__ = ["time_steps"]
