"""One sequence being decoded by :class:`specdec_lite.engine.batch.BatchEngine`, and its record.

A :class:`SequenceState` holds everything that decides what the sequence emits next: its
prompt and the tokens emitted so far, its own Generator, its sampling (temperature, top-k,
top-p), its draft-length policy with the k that policy chose for the next step, and the
confidence at which its drafting stops. :meth:`SequenceState.to_dict` writes it as
JSON-friendly data between steps and :func:`state_from_dict` reads it back, so a sequence
continues elsewhere exactly as it would have.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import check_eos, check_int, check_prompt, check_real, check_tokens
from ..drafting.draft_length import FixedK, policy_from_record, policy_record, replay_k
from ..drafting.stop_head import RiskStop
from ..rules.distributions import Sampling
from .faults import generator_from_state
from .trace import Generation, Step


@dataclass
class SequenceState:
    """One sequence of a batch: its request, its own Generator and what it has emitted.

    ``context`` is the prompt followed by the emitted tokens; the trace ``gen`` gets its
    ``tokens`` when the sequence finishes. ``policy`` picks each step's k after the steps
    before it (:mod:`specdec_lite.drafting.draft_length`); ``k_now`` is the k of the next step.
    With ``min_confidence`` set, drafting stops after a token the draft gave less than it;
    with ``risk_stop`` (:class:`~specdec_lite.drafting.stop_head.RiskStop`), once the
    predicted chance that one of the step's drafts is rejected passes its limit.
    """

    request_id: object
    prompt: np.ndarray  # [n_prompt]
    max_new_tokens: int
    eos_id: int | None
    rng: np.random.Generator
    gen: Generation
    context: np.ndarray  # [n_prompt + n_new]
    done: bool = False
    started: float = 0.0
    n_fallbacks: int = 0  # steps decoded plainly because verification failed or was refused
    sampling: Sampling = Sampling()  # this sequence's own temperature and cuts
    policy: object = FixedK(0)  # its draft-length policy
    k_now: int = 0  # the k its policy chose for the next step (see ``policy_behind``)
    policy_behind: bool = False  # plain steps were forced on it since its policy last chose
    min_confidence: float | None = None
    risk_stop: RiskStop | None = None
    proposer_state: object = None  # a drafter's cache for this sequence (not saved: rebuilt)

    def next_k(self) -> int:
        """The k of the next step: ``k_now``, after asking the policy first if steps the
        engine forced to be plain (by load, by an open circuit) came since it last chose.
        A policy reads the steps before it, so asking it once after such a stretch gives
        the k it would have chosen had it been asked after each of them; an engine that
        drafts nothing anyway spares the asking."""
        if self.policy_behind:
            self.k_now, self.policy_behind = self.policy.after(self.k_now, self.gen), False
        return self.k_now

    @property
    def stops_early(self) -> bool:
        return self.min_confidence is not None or self.risk_stop is not None

    @property
    def n_new(self) -> int:
        return len(self.context) - len(self.prompt)

    def to_dict(self) -> dict:
        """Everything needed to continue this sequence elsewhere, as JSON-friendly data."""
        g = self.gen
        return {"request_id": self.request_id, "prompt": self.prompt.tolist(),
                "tokens": self.context[len(self.prompt):].tolist(),
                "max_new_tokens": self.max_new_tokens, "eos_id": self.eos_id,
                "rng_state": self.rng.bit_generator.state,
                "sampling": {"temperature": self.sampling.temperature,
                             "top_k": self.sampling.top_k, "top_p": self.sampling.top_p},
                "policy": policy_record(self.policy), "k_now": self.next_k(),
                "min_confidence": self.min_confidence,
                "risk_stop": None if self.risk_stop is None else self.risk_stop.record(),
                "n_target_calls": g.n_target_calls, "n_draft_calls": g.n_draft_calls,
                "steps": step_records(g.steps)}


def step_records(steps: list[Step]) -> list[list]:
    """``steps`` as the record keeps them: [proposed, n_accepted, emitted, extra] each."""
    return [[list(s.proposed), s.n_accepted, list(s.emitted), s.extra] for s in steps]


def state_from_dict(snapshot: object, vocab: int, sampling: Sampling,
                    policy: object) -> SequenceState:
    """The sequence :meth:`SequenceState.to_dict` wrote, checked against a target of
    ``vocab`` tokens. ``sampling`` and ``policy`` stand in for a record without them; a
    record with its steps but no ``k_now`` gets the k its policy would choose after them.
    A bad record raises ``TypeError`` or ``ValueError`` naming what is wrong."""
    if not isinstance(snapshot, dict):
        raise TypeError(f"snapshot must be a dict, got {type(snapshot).__name__}")
    missing = {"request_id", "prompt", "tokens", "max_new_tokens", "eos_id",
               "rng_state"} - set(snapshot)
    if missing:
        raise ValueError(f"snapshot lacks {sorted(missing)}")
    prompt = check_prompt(snapshot["prompt"], vocab)
    tokens = check_tokens(snapshot["tokens"], vocab, name="snapshot tokens")
    max_new_tokens = check_int(snapshot["max_new_tokens"], "max_new_tokens", len(tokens))
    rng = generator_from_state(snapshot["rng_state"])
    gen = Generation(tokens=np.zeros(0, np.int64), prompt=prompt,
                     steps=[Step(tuple(p), n, tuple(e), x)
                            for p, n, e, x in snapshot.get("steps", [])],
                     n_target_calls=snapshot.get("n_target_calls", 0),
                     n_draft_calls=snapshot.get("n_draft_calls", 0))
    saved = snapshot.get("sampling")
    if saved is not None and not isinstance(saved, dict):
        raise TypeError(f"snapshot sampling must be a dict, got {type(saved).__name__}")
    if snapshot.get("policy") is not None:
        policy = policy_from_record(snapshot["policy"])
    k_now = snapshot.get("k_now")
    k_now = replay_k(policy, gen) if k_now is None else check_int(k_now, "k_now", 0)
    min_confidence = snapshot.get("min_confidence")
    if min_confidence is not None:
        min_confidence = check_real(min_confidence, "min_confidence", positive=True)
    risk_stop = snapshot.get("risk_stop")
    if risk_stop is not None:
        risk_stop = RiskStop.from_record(risk_stop)
    return SequenceState(snapshot["request_id"], prompt, max_new_tokens,
                         check_eos(snapshot["eos_id"], vocab), rng, gen,
                         np.concatenate([prompt, tokens]),
                         sampling=Sampling.checked(**saved) if saved else sampling,
                         policy=policy, k_now=k_now, min_confidence=min_confidence,
                         risk_stop=risk_stop)


__all__ = ["SequenceState", "state_from_dict", "step_records"]
