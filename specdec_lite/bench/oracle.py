"""The hindsight oracle for draft length: what a policy could do if it knew the future.

At T = 0 a run's tokens are known before it starts: greedy speculative decoding emits
exactly the target's greedy continuation. So for every step one can know in advance how
many of the drafter's tokens the target will accept: the length of the agreement between
the drafter's proposal and that continuation. The oracle drafts exactly that many (at
most ``k_max``): no drafted token is ever rejected, and a step where the first one would
be is a plain decoding step (k = 0). Each step still emits what the same step with more
drafts would, the accepted tokens and one more, at the lowest draft and verification
cost for that step.

Only a benchmark can run it: :func:`oracle_schedule` decodes the whole continuation
first, untimed, and :class:`OracleK` replays the schedule it found. It is the ceiling of
the policies that stop drafting at the right token (SpecDec++'s target), not a bound on
every policy: with a bumpy cost curve a step that drafts past the rejection, or stops
short of it, can sometimes cost less per token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..checks import check_int
from ..drafting.proposers import as_proposer, for_run
from ..engine.decode import generate
from ..engine.trace import Generation
from ..models.bound import fresh
from ..rules.distributions import Sampling


@dataclass(frozen=True)
class OracleK:
    """A draft-length policy that replays ``schedule`` (tokens emitted so far -> k), made
    by :func:`oracle_schedule` for one prompt, drafter and length; k = 0 where it has no
    entry."""

    schedule: dict[int, int] = field(default_factory=dict)

    @property
    def start(self) -> int:
        return self.schedule.get(0, 0)

    def after(self, k: int, gen: Generation) -> int:
        return self.schedule.get(len(gen.tokens), 0)


def oracle_schedule(target: object, draft: object, prompt: np.ndarray, max_new_tokens: int,
                    k_max: int) -> dict[int, int]:
    """For greedy decoding of ``max_new_tokens`` tokens after ``prompt`` with ``draft`` (a
    model or a proposer), the k of each step that drafts exactly the tokens the target
    will accept: ``{tokens emitted before the step: k}``, each k at most ``k_max``."""
    k_max = check_int(k_max, "k_max", 1)
    reference = generate(target, prompt, max_new_tokens=max_new_tokens, temperature=0).tokens
    proposer = for_run(as_proposer(draft, target.vocab_size), fresh(target))
    greedy, rng = Sampling.checked(0.0, None, None), np.random.default_rng(0)
    schedule, done = {}, 0
    while done < len(reference):
        wanted = min(k_max, len(reference) - done - 1)
        if wanted == 0:
            schedule[done] = 0
            done += 1
            continue
        context = np.concatenate([prompt, reference[:done]])
        drafted = np.asarray(proposer.propose(context, wanted, greedy, rng).tokens)  # [m]
        truth = reference[done : done + len(drafted)]
        agree = int(np.cumprod(drafted == truth).sum())  # the accepted prefix
        schedule[done] = agree
        done += agree + 1
    return schedule


__all__ = ["OracleK", "oracle_schedule"]
