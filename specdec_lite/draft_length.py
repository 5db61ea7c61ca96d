"""Draft length: how many tokens to ask the proposer for at each step.

A fixed k is a guess made before the run: the best k depends on α, which changes from
prompt to prompt and from one stretch of text to the next. A policy chooses each step's
k from what the previous steps showed. Each is a small immutable record with a
``start`` (the first step's k) and a pure function ``after(k, gen)``: the next step's k,
given this step's k and the sequence's trace so far (a
:class:`~specdec_lite.decode.Generation`, whose last step is the one just finished). So
one policy serves any number of sequences.

Choosing k from past steps only (never from the tokens the target is about to judge)
keeps the exact rule exact: each step is an ordinary speculative step with some k.

* :class:`FixedK`: the same k every step (what ``k=3`` means).
* :class:`AdaptiveK`: Hugging Face's heuristic schedule: two more after a step whose
  drafts were all accepted, one fewer otherwise.
* :class:`TheoryK`: estimate α from the counts so far and take the k that maximises
  Theorem 3.8's expected speedup for a draft costing ``c`` target calls per token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .checks import check_int, check_real
from .theory import optimal_k

if TYPE_CHECKING:
    from .decode import Generation


@dataclass(frozen=True)
class FixedK:
    """k tokens at every step."""

    k: int

    def __post_init__(self) -> None:
        check_int(self.k, "k", 1)

    @property
    def start(self) -> int:
        return self.k

    def after(self, k: int, gen: Generation) -> int:
        return self.k


@dataclass(frozen=True)
class AdaptiveK:
    """Start at ``start``; after a step whose drafts were all accepted ask for ``grow``
    more (at most ``k_max``), after any other step with drafts ``shrink`` fewer (at least
    ``k_min``). A step with no drafts (a prompt lookup that found nothing) leaves k as
    it was."""

    start: int = 4
    k_min: int = 1
    k_max: int = 10
    grow: int = 2
    shrink: int = 1

    def __post_init__(self) -> None:
        check_int(self.k_min, "k_min", 1)
        check_int(self.k_max, "k_max", self.k_min)
        check_int(self.start, "start", self.k_min, self.k_max)
        check_int(self.grow, "grow", 0)
        check_int(self.shrink, "shrink", 0)

    def after(self, k: int, gen: Generation) -> int:
        last = gen.steps[-1]
        if not last.proposed:
            return k
        if last.n_accepted == len(last.proposed):
            return min(k + self.grow, self.k_max)
        return max(k - self.shrink, self.k_min)


@dataclass(frozen=True)
class TheoryK:
    """Choose k as :func:`specdec_lite.theory.optimal_k` would for the α seen so far.

    α is estimated from the sequence's accepted and checked draft tokens plus ``prior``
    pseudo-tokens at ``alpha0``, so the first steps do not swing k from one extreme to
    the other. ``c`` is the draft's cost per token in target calls (chapter 6 measures
    it); with c = 0, as for prompt lookup, the theorem always wants more tokens, so
    ``k_max`` caps it.
    """

    c: float
    alpha0: float = 0.6
    prior: float = 4.0
    k_max: int = 10

    def __post_init__(self) -> None:
        check_real(self.c, "c", minimum=0.0)
        if check_real(self.alpha0, "alpha0", minimum=0.0) >= 1:
            raise ValueError(f"alpha0 must be < 1, got {self.alpha0}")
        check_real(self.prior, "prior", positive=True)
        check_int(self.k_max, "k_max", 1)

    @property
    def start(self) -> int:
        return optimal_k(self.alpha0, self.c, self.k_max)

    def alpha(self, gen: Generation) -> float:
        """The running estimate of α after ``gen``'s steps."""
        return ((self.prior * self.alpha0 + gen.n_accepted)
                / (self.prior + gen.n_checked))

    def after(self, k: int, gen: Generation) -> int:
        return optimal_k(min(self.alpha(gen), 0.999), self.c, self.k_max)


def as_draft_length(k: object) -> object:
    """``k`` as a policy: an int as :class:`FixedK`, anything with ``start`` and an
    ``after(k, gen)`` method as it is; else ``TypeError``/``ValueError`` naming ``k``."""
    if hasattr(k, "start") and callable(getattr(k, "after", None)):
        check_int(k.start, "k.start", 1)
        return k
    return FixedK(check_int(k, "k", 1))


__all__ = ["AdaptiveK", "FixedK", "TheoryK", "as_draft_length"]
