"""The record of a decoding run: each step's :class:`Step`, the whole run's
:class:`Generation`, and the counts every report reads from them.

Every decoder returns a :class:`Generation` whose ``steps`` record, for every
target call, what the draft proposed, how many tokens were accepted and what
was emitted. Its metrics, each defined once (names as in the papers):

* ``n_proposed``: draft tokens proposed, summed over steps.
* ``n_accepted``: draft tokens accepted, summed over steps.
* ``n_checked``: draft tokens the target judged: per step the accepted ones plus the
  first rejected one (the tokens after a rejection are never looked at).
* ``alpha`` (α) = n_accepted / n_checked: the estimate of the chance that one draft
  token is accepted, the α of Leviathan et al. (2023).
* ``acceptance_rate`` = n_accepted / n_proposed: a different, lower number (E[N]/k
  per full step), because it also counts the unchecked tokens after a rejection.
  It is what many serving dashboards report.
* ``tau`` (τ) = emitted tokens / target calls. It includes the correction or bonus
  token, so plain decoding has τ = 1 (the Spec-Bench and vLLM convention).
* ``n_target_calls``, ``n_draft_calls`` (draft-model calls) and ``n_head_calls``
  (Medusa head calls): forward passes of each kind.

Each is 0.0 (or 0) when there is nothing to divide by, as in plain decoding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Step:
    """One target call: the draft ``proposed`` tokens, ``n_accepted`` of them were kept,
    and ``emitted`` tokens were appended (the accepted prefix, then one ``extra`` token:
    ``"correction"``, ``"bonus"``, or ``"sample"`` for plain decoding). ``emitted`` can be
    shorter than ``n_accepted + 1`` only when EOS cut the step short."""

    proposed: tuple[int, ...]
    n_accepted: int
    emitted: tuple[int, ...]
    extra: str

    @property
    def n_checked(self) -> int:
        """Draft tokens the target judged: the accepted ones and the first rejected one."""
        return min(self.n_accepted + 1, len(self.proposed))

    def token_kinds(self) -> list[tuple[int, str]]:
        """(token, kind) for the step's proposal, left to right, then its extra token.

        A proposed token is ``"accepted"`` (kept and emitted), ``"rejected"`` (the first
        one the target turned down), ``"unchecked"`` (after the rejection, which the
        target never judged) or ``"cut"`` (judged and accepted, so counted in
        ``n_accepted``, but cut off after an EOS token, or by ``max_new_tokens`` in Medusa's
        loop, so never emitted). The extra token follows
        as ``"correction"``, ``"bonus"`` or ``"sample"``, unless EOS came before it.
        """
        n_emitted = len(self.emitted)
        kinds = []
        for i, token in enumerate(self.proposed):
            if i < self.n_accepted:
                kinds.append((token, "accepted" if i < n_emitted else "cut"))
            else:
                kinds.append((token, "rejected" if i == self.n_accepted else "unchecked"))
        if n_emitted == self.n_accepted + 1:  # the extra token survived (no EOS before it)
            kinds.append((self.emitted[-1], self.extra))
        return kinds


@dataclass
class Generation:
    """The result of a decoder: new tokens, call counts and a per-step trace.

    The metrics are defined in this module's docstring.
    """

    tokens: np.ndarray  # [n_new]
    prompt: np.ndarray  # [n_prompt]
    steps: list[Step] = field(default_factory=list)
    n_target_calls: int = 0
    n_draft_calls: int = 0
    n_head_calls: int = 0
    wall_time_s: float = 0.0

    @property
    def accepted(self) -> list[int]:
        """Draft tokens accepted at each step: [n_steps]."""
        return [s.n_accepted for s in self.steps]

    @property
    def n_proposed(self) -> int:
        return step_counts(self.steps)["n_proposed"]

    @property
    def n_accepted(self) -> int:
        return step_counts(self.steps)["n_accepted"]

    @property
    def n_checked(self) -> int:
        return step_counts(self.steps)["n_checked"]

    @property
    def alpha(self) -> float:
        """α = n_accepted / n_checked (0.0 if nothing was checked)."""
        return self.n_accepted / self.n_checked if self.n_checked else 0.0

    @property
    def acceptance_rate(self) -> float:
        """n_accepted / n_proposed (0.0 if nothing was proposed); not α, see the module."""
        return self.n_accepted / self.n_proposed if self.n_proposed else 0.0

    @property
    def tau(self) -> float:
        """τ = emitted tokens / target calls (0.0 before any call)."""
        return len(self.tokens) / self.n_target_calls if self.n_target_calls else 0.0


def step_counts(steps: list[Step]) -> dict[str, int]:
    """The draft-token counts of a trace, defined here once for the library, the service
    and its journal: ``n_proposed``, ``n_accepted`` and ``n_checked`` summed over
    ``steps`` (see the module docstring)."""
    return {"n_proposed": sum(len(s.proposed) for s in steps),
            "n_accepted": sum(s.n_accepted for s in steps),
            "n_checked": sum(s.n_checked for s in steps)}


def cut_at_eos(tokens: np.ndarray, eos_id: int | None) -> tuple[np.ndarray, bool]:
    """``tokens`` [m] up to and including the first ``eos_id``, and whether it was there.
    ``eos_id=None`` keeps every token."""
    if eos_id is None:
        return tokens, False
    hits = np.flatnonzero(tokens == eos_id)
    return (tokens[: hits[0] + 1], True) if hits.size else (tokens, False)


__all__ = ["Generation", "Step", "cut_at_eos", "step_counts"]
