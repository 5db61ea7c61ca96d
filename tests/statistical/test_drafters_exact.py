"""The new draft sources and draft-length policies keep the exact rule exact.

As in test_lossless.py: N whole continuations from a first-order Markov target over
V = 3 tokens, compared with the target's enumerated law by Pearson's chi-square at its
0.1% critical value. Prompt lookup proposes deterministically (one-hot q), the
confidence stop and the policies change k from step to step (the automatic policy down
to k = 0); each must still sample p. The controls must fail the same test: a proposer
that reports the wrong q for its tokens, one that keeps only confident tokens but
reports their unrestricted rows, and one whose stopping rule peeks at the acceptance
test's uniforms.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import speculative_samples

from specdec_lite import MarkovModel, speculative_generate
from specdec_lite.drafting.draft_length import AdaptiveK, AutoK, StepCosts, TheoryK
from specdec_lite.drafting.proposers import Draft, ModelDraft, PromptLookup
from specdec_lite.drafting.stop_head import RiskStop, shipped_head
from specdec_lite.teaching.exactness import ChiSquare, chi_square, sequence_law

V, LENGTH, N = 3, 5, 3000
PROMPT = [0, 1, 2, 1, 0, 1]  # repeats, so prompt lookup finds matches from the start


def markov(seed: int) -> MarkovModel:
    return MarkovModel(np.random.default_rng(seed).dirichlet(np.ones(V), size=V))


TARGET, DRAFT = markov(1), markov(2)
RISKY = RiskStop(shipped_head(), 0.8)  # the shipped stop head, at a limit that cuts steps


def test_the_risk_stop_cuts_some_steps_short():
    """On these models the risk stop drafts 1, 2 or 3 of the 4 tokens it may, so the tests
    above test it."""
    rng = np.random.default_rng(3)
    lengths = set()
    for _ in range(100):
        gen = speculative_generate(TARGET, ModelDraft(DRAFT, risk_stop=RISKY), PROMPT, k=4,
                                   max_new_tokens=LENGTH, seed=rng)
        lengths |= {len(step.proposed) for step in gen.steps}
    assert {1, 2, 3} <= lengths, lengths


def sample_sequences(draft, k, temperature: float = 1.0, **kwargs) -> list[tuple]:
    """N continuations of ``PROMPT`` from one Generator (``kwargs`` go to the decoder)."""
    return speculative_samples(TARGET, draft, PROMPT, k=k, length=LENGTH, n=N,
                               temperature=temperature, **kwargs)


def chi2(samples: list[tuple], temperature: float = 1.0, **cuts) -> ChiSquare:
    """Chi-square of ``samples`` against the warped target's enumerated law."""
    return chi_square(samples, sequence_law(TARGET, PROMPT, LENGTH, temperature, **cuts))


@pytest.mark.parametrize(
    ("draft", "k", "temperature", "kwargs"),
    [
        (PromptLookup(), 3, 1.0, {}),
        (PromptLookup(max_ngram=1), 2, 0.7, {}),
        (PromptLookup(), 4, 1.0, {"top_k": 2}),
        (ModelDraft(DRAFT, min_confidence=0.5), 4, 1.0, {}),
        (ModelDraft(DRAFT, risk_stop=RISKY), 4, 1.0, {}),
        (ModelDraft(DRAFT, risk_stop=RISKY), 4, 1.0, {"top_p": 0.9}),
        (DRAFT, AdaptiveK(start=1, k_max=5), 1.0, {}),
        (DRAFT, TheoryK(c=0.1, k_max=5), 0.8, {}),
        (PromptLookup(), AdaptiveK(start=2), 1.0, {"top_p": 0.9}),
    ],
    ids=["lookup-k3", "lookup-unigram-T0.7", "lookup-topk2", "confidence-stop", "risk-stop",
         "risk-stop-topp",
         "adaptive-k", "theory-k-T0.8", "lookup-adaptive-topp"],
)
def test_exact_rule_stays_exact(draft, k, temperature, kwargs):
    result = chi2(sample_sequences(draft, k, temperature, **kwargs), temperature, **kwargs)
    assert result.n_impossible == 0, str(result)
    assert result.passed(1e-3), str(result)


class LyingLookup(PromptLookup):
    """Prompt lookup that reports uniform rows q instead of the one-hot rows its
    deterministic choice really has: the acceptance test then uses the wrong ratio."""

    def propose(self, context, k, sampling, rng):
        tokens = super().propose(context, k, sampling, rng).tokens
        return Draft(tokens, np.full((len(tokens), V), 1 / V), 0)


def test_a_proposer_that_misreports_q_is_caught():
    result = chi2(sample_sequences(LyingLookup(), 3))
    assert not result.passed(1e-3), f"the wrong q went unnoticed: {result}"


# ---------------------------------------------------------------- named and automatic policies

# Step costs under which the automatic policy switches between k = 0 (plain) and k >= 1
# as its running α moves, so that both kinds of step occur within a run.
SWITCHING = StepCosts((1.0, 1.6, 1.9, 2.1, 2.3))


@pytest.mark.parametrize(
    ("draft", "k", "temperature", "kwargs"),
    [
        (DRAFT, 4, 1.0, {"policy": "heuristic"}),
        (DRAFT, 4, 0.8, {"policy": "confidence"}),
        (DRAFT, 4, 0.8, {"policy": "specdec++"}),
        (DRAFT, AutoK(SWITCHING, probe_every=2, margin=0.0), 1.0, {}),
        (PromptLookup(), AutoK(SWITCHING, probe_every=1, margin=0.0), 1.0, {"top_p": 0.8}),
    ],
    ids=["heuristic", "confidence-T0.8", "specdec++-T0.8", "auto-switching",
         "auto-lookup-topp"],
)
def test_named_and_automatic_policies_stay_exact(draft, k, temperature, kwargs):
    cuts = {key: value for key, value in kwargs.items() if key in ("top_k", "top_p")}
    result = chi2(sample_sequences(draft, k, temperature, **kwargs), temperature, **cuts)
    assert result.n_impossible == 0, str(result)
    assert result.passed(1e-3), str(result)


def test_the_automatic_policy_really_switches():
    rng = np.random.default_rng(5)
    ks = set()
    for _ in range(200):
        gen = speculative_generate(TARGET, DRAFT, PROMPT,
                                   k=AutoK(SWITCHING, probe_every=2, margin=0.0),
                                   max_new_tokens=LENGTH, seed=rng)
        ks |= {len(s.proposed) for s in gen.steps[:-1]}
    assert 0 in ks and len(ks - {0}) >= 2, ks


# ---------------------------------------------------------------- stopping rules that break it


class ConfidentOnly(ModelDraft):
    """Drafts only tokens the draft is sure of (it draws again until q(x) >= 0.3) but reports
    the unrestricted rows q: the kept tokens were not drawn from the rows they are
    verified against."""

    def propose(self, context, k, sampling, rng):
        draft = super().propose(context, k, sampling, rng)
        tokens = draft.tokens.copy()
        for i in range(len(tokens)):
            while draft.q[i, tokens[i]] < 0.3:
                tokens[i] = rng.choice(V, p=draft.q[i])
        return Draft(tokens, draft.q, draft.n_calls)


class PeekingDraft(ModelDraft):
    """Drafts as the draft model does, then peeks at the uniforms the acceptance test is
    about to draw and stops just before the first token they would reject: a stopping
    rule that looks at the acceptance draws."""

    def propose(self, context, k, sampling, rng):
        draft = super().propose(context, k, sampling, rng)
        peek = np.random.default_rng()
        peek.bit_generator.state = rng.bit_generator.state
        u = peek.random(len(draft.tokens))  # [k] the uniforms acceptance_mask will draw
        ctx = np.concatenate([context, draft.tokens])
        p = TARGET.probs(ctx)[len(context) - 1 : -1]  # [k, V] the target's rows
        rows = np.arange(len(draft.tokens))
        rejected = u * draft.q[rows, draft.tokens] >= p[rows, draft.tokens]
        m = int(rejected.argmax()) if rejected.any() else len(draft.tokens)
        return Draft(draft.tokens[:m], draft.q[:m], draft.n_calls)


@pytest.mark.parametrize("proposer", [ConfidentOnly(DRAFT), PeekingDraft(DRAFT)],
                         ids=["drops-unsure-tokens", "peeks-at-acceptance-draws"])
def test_stopping_rules_that_break_exactness_are_caught(proposer):
    result = chi2(sample_sequences(proposer, 3))
    assert not result.passed(1e-3), f"a broken stopping rule went unnoticed: {result}"
