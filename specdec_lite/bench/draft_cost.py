"""What a proposer costs inside real decoding, and when a dearer but better one pays.

:class:`TimedProposer` wraps a proposer and times each of its ``propose`` calls as the
decoder makes them, with the caches as decoding leaves them (for a draft model that
includes catching up on the tokens the last step accepted; for the EAGLE drafter, reading
the target's cached features). Its proposals pass through unchanged, so a timed run
emits the same tokens as an untimed one with the same seed.

:func:`break_even_verification` answers chapter 6's question for two proposers at the
same k: a step costs ``k c + r(k+1)`` plain decoding steps and emits τ tokens, so
proposer a beats proposer b when ``tau_a / (k c_a + r) > tau_b / (k c_b + r)``, that is
when the verification cost r = r(k+1) exceeds ``k (tau_b c_a - tau_a c_b) / (tau_a - tau_b)``.
"""

from __future__ import annotations

import time

import numpy as np

from ..checks import check_int, check_real
from ..drafting.proposers import Draft, for_run
from ..rules.distributions import Sampling


class TimedProposer:
    """``proposer`` (anything with ``propose``; wrap a draft model in
    :class:`~specdec_lite.drafting.proposers.ModelDraft` first), timed: ``seconds`` spent in its
    ``propose`` calls and ``tokens`` they proposed, summed over every call since it was
    made."""

    def __init__(self, proposer: object) -> None:
        if not callable(getattr(proposer, "propose", None)):
            raise TypeError(f"proposer must have a propose method (wrap a model in ModelDraft), "
                            f"got {type(proposer).__name__}")
        self.proposer = proposer
        if hasattr(proposer, "vocab_size"):  # the decoder checks it against the target's
            self.vocab_size = proposer.vocab_size
        self.seconds = 0.0
        self.tokens = 0

    def for_sequence(self, target: object) -> _TimedRun:
        """The timer for one run: the proposer's own state for that run
        (:func:`~specdec_lite.drafting.proposers.for_run`), its times added up here."""
        return _TimedRun(self, for_run(self.proposer, target))

    def propose(self, context: np.ndarray, k: int, sampling: Sampling,
                rng: np.random.Generator) -> Draft:
        return self.timed(self.proposer, context, k, sampling, rng)

    def timed(self, proposer: object, context: np.ndarray, k: int, sampling: Sampling,
              rng: np.random.Generator) -> Draft:
        """``proposer.propose(...)``, its time and tokens added to this timer's."""
        start = time.perf_counter()
        proposal = proposer.propose(context, k, sampling, rng)
        self.seconds += time.perf_counter() - start
        self.tokens += len(proposal.tokens)
        return proposal

    @property
    def seconds_per_token(self) -> float:
        """Seconds per proposed token; ``ValueError`` before any token was proposed."""
        if self.tokens == 0:
            raise ValueError("the proposer has proposed no token yet")
        return self.seconds / self.tokens


class _TimedRun:
    """A :class:`TimedProposer` over one run's proposer: each call is timed into it."""

    def __init__(self, timer: TimedProposer, proposer: object) -> None:
        self.timer, self.proposer = timer, proposer

    def propose(self, context: np.ndarray, k: int, sampling: Sampling,
                rng: np.random.Generator) -> Draft:
        return self.timer.timed(self.proposer, context, k, sampling, rng)


def break_even_verification(k: int, tau_a: float, c_a: float, tau_b: float,
                            c_b: float) -> float:
    """The verification cost r(k+1), in plain decoding steps, above which proposer a
    (τ = ``tau_a`` tokens per step, ``c_a`` plain steps per draft token) is faster than
    proposer b: ``k (tau_b c_a - tau_a c_b) / (tau_a - tau_b)``. A value below 1 means a
    is faster at any r(k+1) >= 1. Needs ``tau_a > tau_b`` (a must be the better guesser,
    or no verification cost makes it pay for a higher c); ``ValueError`` otherwise."""
    k = check_int(k, "k", 1)
    tau_a = check_real(tau_a, "tau_a", positive=True)
    tau_b = check_real(tau_b, "tau_b", positive=True)
    c_a, c_b = check_real(c_a, "c_a", minimum=0.0), check_real(c_b, "c_b", minimum=0.0)
    if tau_a <= tau_b:
        raise ValueError(f"tau_a must exceed tau_b, got {tau_a} and {tau_b}")
    return k * (tau_b * c_a - tau_a * c_b) / (tau_a - tau_b)


__all__ = ["TimedProposer", "break_even_verification"]
