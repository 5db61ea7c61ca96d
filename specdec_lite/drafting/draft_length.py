"""Draft length: how many tokens to ask the proposer for at each step.

A fixed k is a guess made before the run: the best k depends on α, which changes from
prompt to prompt and from one stretch of text to the next. A policy chooses each step's
k from what the previous steps showed. Each is a small immutable record with a
``start`` (the first step's k) and a pure function ``after(k, gen)``: the next step's k,
given this step's k and the sequence's trace so far (a
:class:`~specdec_lite.engine.decode.Generation`, whose last step is the one just finished). So
one policy serves any number of sequences.

A policy may also say how many steps ahead its k is already decided:
``steady(k, gen)`` is the number of steps, this one included, that keep ``k`` whatever
they emit (None: every step to the end). A decoder may then take those steps in one go
(the compiled step does, :meth:`~specdec_lite.engine.compiled_step.CompiledStep.run`). A
policy without it is asked after every step.

Choosing k from past steps only (never from the tokens the target is about to judge)
keeps the exact rule exact: each step is an ordinary speculative step with some k.

* :class:`FixedK`: the same k every step (what ``k=3`` means).
* :class:`AdaptiveK`: Hugging Face's heuristic schedule: two more after a step whose
  drafts were all accepted, one fewer otherwise.
* :class:`TheoryK`: estimate α from the counts so far and take the k that maximises
  Theorem 3.8's expected speedup for a draft costing ``c`` target calls per token.
* :class:`AutoK`: the same, with the cost of a step with k drafts measured on this
  machine (:class:`StepCosts`, from :func:`specdec_lite.engine.decode.auto_costs`), k = 0
  included: where no k pays, it decodes plainly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING

import numpy as np

from ..checks import check_int, check_real
from ..rules.theory import optimal_k
from .proposers import ModelDraft
from .stop_head import MAX_RISK, RiskStop, shipped_head

if TYPE_CHECKING:
    from ..engine.trace import Generation


@dataclass(frozen=True)
class FixedK:
    """k tokens at every step (k = 0: plain decoding)."""

    k: int

    def __post_init__(self) -> None:
        check_int(self.k, "k", 0)

    @property
    def start(self) -> int:
        return self.k

    def after(self, k: int, gen: Generation) -> int:
        return self.k

    def steady(self, k: int, gen: Generation) -> None:
        return None  # k for good


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
    """Choose k as :func:`specdec_lite.rules.theory.optimal_k` would for the α seen so far.

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
        # optimal_k's argmax, in plain floats: Theorem 3.8 prices k drafts at k·c + 1
        cost = tuple(k * self.c + 1.0 for k in range(self.k_max + 1))
        return best_rate_k(min(self.alpha(gen), 0.999), cost, k_min=1)


@dataclass(frozen=True)
class StepCosts:
    """``step_cost[k]``: the time of one step that drafts k tokens and checks them, in
    units of one plain decoding step (so ``step_cost[0]`` is 1), for k = 0..k_max."""

    step_cost: tuple[float, ...]

    def __post_init__(self) -> None:
        cost = np.asarray(self.step_cost, dtype=np.float64)
        if (cost.ndim != 1 or len(cost) < 2 or not np.all(np.isfinite(cost))
                or np.any(cost <= 0) or cost[0] != 1):
            raise ValueError("step_cost must be two or more finite values > 0, starting "
                             f"with 1, got {self.step_cost!r}")

    @classmethod
    def from_ratio(cls, ratio: object, c: float) -> StepCosts:
        """Chapter 6's model: a step with k drafts costs k·c + r(k + 1), from the verify
        ratios ``ratio`` [r(1) = 1, r(2), ...] and the draft cost ``c``."""
        r = np.asarray(ratio, dtype=np.float64)
        c = check_real(c, "c", minimum=0.0)
        return cls(tuple(float(k * c + r[k]) for k in range(len(r))))

    @property
    def k_max(self) -> int:
        return len(self.step_cost) - 1

    def best_k(self, alpha: float, margin: float = 0.0) -> int:
        """The k in 0..k_max with the most expected tokens per unit of time at ``alpha``:
        E(α, k) / step_cost[k], where k = 0 (plain decoding) scores 1; 0 unless the best
        k > 0 scores above 1 + ``margin``."""
        k, rate = best_rate(alpha, self.step_cost)
        return k if k == 0 or rate > 1.0 + margin else 0


def best_rate_k(alpha: float, step_cost: tuple[float, ...], k_min: int = 0) -> int:
    """argmax over k = k_min..len(step_cost) - 1 of E(α, k) / step_cost[k], the first on a
    tie. Plain Python floats: a policy runs this once per step, for a dozen k at most."""
    return best_rate(alpha, step_cost, k_min)[0]


def best_rate(alpha: float, step_cost: tuple[float, ...],
              k_min: int = 0) -> tuple[int, float]:
    """:func:`best_rate_k` and the rate E(α, k) / step_cost[k] it reached."""
    best, top = k_min, -1.0
    power = alpha ** k_min  # α^k, updated as k grows
    for k in range(k_min, len(step_cost)):
        power *= alpha  # α^(k + 1)
        tokens = (1.0 - power) / (1.0 - alpha) if alpha < 1.0 else k + 1.0  # E(α, k)
        rate = tokens / step_cost[k]
        if rate > top:
            best, top = k, rate
    return best, top


@dataclass(frozen=True)
class AutoK:
    """k from the recent α and the step costs measured on this machine.

    Each k in 0..``costs.k_max`` is priced by ``costs`` (:class:`StepCosts`) and k = 0 is
    a choice: where no k is expected to beat plain decoding, steps draft nothing. α is
    estimated from the steps that drafted, each older step weighing ``decay`` times less
    than the next (so a stretch the draft predicts well is noticed), starting from
    ``prior`` pseudo-tokens at ``alpha0`` (only the last ``window`` steps that drafted
    are read, among the last 8 × ``window`` steps: the weight of older ones is below
    decay^window). After ``probe_every`` plain steps in a
    row one step drafts a single token, so that the estimate can recover. Each probe after
    which the policy went straight back to plain decoding doubles the wait before the next
    (up to 2^``max_backoff`` times ``probe_every``), whether its token was rejected or
    accepted without lifting the estimate to where drafting pays; a probe followed by
    more drafting starts it again at ``probe_every``. A probe is not free: it is a step
    that verifies a token the estimate says will likely be rejected, or that drafting
    does not pay for, and a drafter that keeps state (the EAGLE drafter's cache) must
    first catch up with every token decoded plainly since it last ran.

    A k > 0 is chosen only when it is expected to beat plain decoding by more than
    ``margin``: near break-even, a noisy α (a few recent tokens) and step prices timed
    apart from the run make drafting a coin toss that loses more often than it wins, since
    every draft the target turns down costs time while plain decoding never does.
    """

    costs: StepCosts
    alpha0: float = 0.6
    prior: float = 2.0
    decay: float = 0.8
    probe_every: int = 16
    window: int = 32
    margin: float = 0.05
    max_backoff: int = 3

    def __post_init__(self) -> None:
        if not isinstance(self.costs, StepCosts):
            raise TypeError(f"costs must be a StepCosts, got {type(self.costs).__name__}")
        if check_real(self.alpha0, "alpha0", minimum=0.0) >= 1:
            raise ValueError(f"alpha0 must be < 1, got {self.alpha0}")
        check_real(self.prior, "prior", positive=True)
        if not 0 < check_real(self.decay, "decay", positive=True) <= 1:
            raise ValueError(f"decay must be in (0, 1], got {self.decay}")
        check_int(self.probe_every, "probe_every", 1)
        check_int(self.window, "window", 1)
        check_real(self.margin, "margin", minimum=0.0)
        check_int(self.max_backoff, "max_backoff", 0)

    @property
    def start(self) -> int:
        return self.costs.best_k(self.alpha0, self.margin)

    def alpha(self, gen: Generation) -> float:
        """The decayed estimate of α after ``gen``'s steps: its last ``window`` steps that
        drafted, newest first, each weighing ``decay`` times the one after it, then the
        prior (the policy runs after every step, so this loop is kept to a few attribute
        reads per step)."""
        decay, weight, seen = self.decay, 1.0, 0
        accepted = checked = 0.0
        for step in reversed(gen.steps[-8 * self.window:]):
            proposed = step.proposed
            if proposed:
                n = step.n_accepted
                accepted += weight * n
                checked += weight * (n + 1 if n < len(proposed) else n)  # n_checked
                weight *= decay
                seen += 1
                if seen == self.window:
                    break
        return (accepted + weight * self.prior * self.alpha0) / (checked + weight * self.prior)

    def after(self, k: int, gen: Generation) -> int:
        best = self.costs.best_k(min(self.alpha(gen), 0.999), self.margin)
        if best == 0 and self.probe_due(gen.steps):
            return 1  # a probe
        return best

    def steady(self, k: int, gen: Generation) -> int:
        """Steps of plain decoding (``k`` = 0) that follow for sure, this one included:
        plain steps change neither which drafting steps the α estimate reads (until the
        oldest of them falls out of the last 8 × ``window`` steps) nor the probes' count,
        so the policy says 0 again after each, until the next probe is due. 1 for k > 0."""
        if k != 0:
            return 1
        steps = gen.steps
        gap, wait = self.probe_wait(steps)
        ahead = wait - gap  # the probe follows the plain step that completes the wait
        oldest, seen = None, 0  # distance back of the oldest drafting step α reads, count
        for distance, step in enumerate(reversed(steps[-8 * self.window:]), 1):
            if step.proposed:
                oldest, seen = distance, seen + 1
                if seen == self.window:
                    break
        if oldest is not None:  # it stays read while it is within 8 × window steps back
            ahead = min(ahead, 8 * self.window - oldest + 1)
        return max(ahead, 1)

    def probe_due(self, steps: list) -> bool:
        """Whether the plain steps at the end of ``steps`` are enough to probe: at least
        ``probe_every`` times 2^j, j the number of fruitless probes in a row before them
        (a one-token step after ``probe_every`` plain steps or more, and followed by plain
        steps: its outcome did not make drafting pay), at most ``max_backoff``. Reads back
        only as far as those probes go."""
        gap, wait = self.probe_wait(steps)
        return gap >= wait

    def probe_wait(self, steps: list) -> tuple[int, int]:
        """(plain steps at the end of ``steps``, how many :meth:`probe_due` waits for)."""
        i, gap = len(steps) - 1, 0
        while i >= 0 and not steps[i].proposed:  # the plain steps since the last drafting
            gap, i = gap + 1, i - 1
        failed = 0
        if gap < self.probe_every:
            return gap, self.probe_every
        while i >= 0 and failed < self.max_backoff:
            step = steps[i]
            if len(step.proposed) != 1:
                break  # not a probe: other drafting came before these plain steps
            i, before = i - 1, 0
            while i >= 0 and not steps[i].proposed:
                before, i = before + 1, i - 1
            if before < self.probe_every:
                break  # it followed other drafting: no probe
            failed += 1
        return gap, self.probe_every << failed


POLICIES = ("fixed", "heuristic", "confidence", "specdec++", "auto")
CONFIDENCE = 0.4  # Hugging Face's default assistant_confidence_threshold
HEURISTIC_K_MAX = 10  # "heuristic" grows k up to max(k, this), as Hugging Face's schedule


def named_policy(policy: str | None, k: object, proposer: object,
                 measure: Callable[[int], StepCosts]) -> tuple[object, object]:
    """(draft-length policy, proposer) for ``policy``, a name in :data:`POLICIES` or None:

    * ``"fixed"`` (None): ``k`` tokens every step (an int, or a policy object as it is);
    * ``"heuristic"``: :class:`AdaptiveK` starting at ``k``, up to
      max(k, :data:`HEURISTIC_K_MAX`);
    * ``"confidence"``: up to ``k`` tokens, drafting stops after a token the draft model
      gave less than :data:`CONFIDENCE` (a model draft only);
    * ``"specdec++"``: up to ``k`` tokens, drafting stops once the shipped acceptance head
      predicts a rejection among the step's tokens with a chance above
      :data:`~specdec_lite.drafting.stop_head.MAX_RISK` (a model draft only);
    * ``"auto"``: :class:`AutoK` over k = 0..``k``, priced by ``measure(k)``.
    """
    if policy is None or policy == "fixed":
        return as_draft_length(k), proposer
    if not isinstance(policy, str) or policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES} or None, got {policy!r}")
    k = check_int(k, "k", 1)
    if policy == "heuristic":
        return (AdaptiveK(start=min(k, HEURISTIC_K_MAX), k_max=max(k, HEURISTIC_K_MAX)),
                proposer)
    if policy in ("confidence", "specdec++"):
        if not isinstance(proposer, ModelDraft):
            raise ValueError(f"policy {policy!r} needs a draft model (it reads the draft's "
                             f"probabilities), got {type(proposer).__name__}")
        if policy == "confidence":
            return FixedK(k), ModelDraft(proposer.model, min_confidence=CONFIDENCE)
        return FixedK(k), ModelDraft(proposer.model,
                                     risk_stop=RiskStop(shipped_head(), MAX_RISK))
    return AutoK(measure(k)), proposer


def as_draft_length(k: object) -> object:
    """``k`` as a policy: an int as :class:`FixedK`, anything with ``start`` and an
    ``after(k, gen)`` method as it is; else ``TypeError``/``ValueError`` naming ``k``."""
    if hasattr(k, "start") and callable(getattr(k, "after", None)):
        check_int(k.start, "k.start", 0)
        return k
    return FixedK(check_int(k, "k", 1))


def replay_k(policy: object, gen: Generation) -> int:
    """The k ``policy`` chooses after ``gen``'s steps, worked out again from its start: a
    sequence resumed from its steps continues with the k it would have had."""
    k = policy.start
    for i in range(1, len(gen.steps) + 1):  # the trace as the loop had it after step i
        k = policy.after(k, replace(gen, steps=gen.steps[:i]))
    return k


_SAVED = {cls.__name__: cls for cls in (FixedK, AdaptiveK, TheoryK, AutoK)}


def policy_record(policy: object) -> dict:
    """The library's draft-length ``policy`` as JSON-friendly data (its class name under
    ``"policy"``, then its fields); :func:`policy_from_record` makes it again. Another
    class of policy raises ``TypeError``: its state is not known here."""
    name = type(policy).__name__
    if _SAVED.get(name) is not type(policy):
        raise TypeError(f"policy {name} cannot be saved: only {sorted(_SAVED)} have a record")
    return {"policy": name, **asdict(policy)}


def policy_from_record(record: object) -> object:
    """The policy :func:`policy_record` wrote; a bad record raises ``ValueError``."""
    if not isinstance(record, dict) or record.get("policy") not in _SAVED:
        raise ValueError(f"policy record must name one of {sorted(_SAVED)}: {record!r:.80}")
    cls = _SAVED[record["policy"]]
    values = {f.name: record[f.name] for f in fields(cls) if f.name in record}
    if cls is AutoK:
        costs = values.get("costs")
        if not isinstance(costs, dict) or "step_cost" not in costs:
            raise ValueError(f"AutoK record lacks costs.step_cost: {record!r:.80}")
        values["costs"] = StepCosts(tuple(costs["step_cost"]))
    return cls(**values)


__all__ = ["CONFIDENCE", "HEURISTIC_K_MAX", "POLICIES", "AdaptiveK", "AutoK", "FixedK",
           "StepCosts", "TheoryK", "as_draft_length", "best_rate",
           "best_rate_k", "named_policy",
           "policy_from_record", "policy_record", "replay_k"]
