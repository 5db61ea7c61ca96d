"""The new draft sources and draft-length policies keep the exact rule exact.

As in test_lossless.py: N whole continuations from a first-order Markov target over
V = 3 tokens, compared with the target's enumerated law by Pearson's chi-square at its
0.1% critical value. Prompt lookup proposes deterministically (one-hot q), the
confidence stop and the policies change k from step to step; each must still sample p.
A proposer that reports the wrong q for its tokens is caught by the same test.
"""

from __future__ import annotations

import numpy as np
import pytest

from specdec_lite import MarkovModel, speculative_generate
from specdec_lite.draft_length import AdaptiveK, TheoryK
from specdec_lite.exactness import ChiSquare, chi_square, sequence_law
from specdec_lite.proposers import Draft, ModelDraft, PromptLookup

V, LENGTH, N = 3, 5, 3000
PROMPT = [0, 1, 2, 1, 0, 1]  # repeats, so prompt lookup finds matches from the start


def markov(seed: int) -> MarkovModel:
    return MarkovModel(np.random.default_rng(seed).dirichlet(np.ones(V), size=V))


TARGET, DRAFT = markov(1), markov(2)


def sample_sequences(draft, k, temperature: float = 1.0, **kwargs) -> list[tuple]:
    rng = np.random.default_rng(2024)
    return [tuple(speculative_generate(TARGET, draft, PROMPT, k=k, max_new_tokens=LENGTH,
                                       temperature=temperature, seed=rng,
                                       **kwargs).tokens.tolist())
            for _ in range(N)]


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
        (DRAFT, AdaptiveK(start=1, k_max=5), 1.0, {}),
        (DRAFT, TheoryK(c=0.1, k_max=5), 0.8, {}),
        (PromptLookup(), AdaptiveK(start=2), 1.0, {"top_p": 0.9}),
    ],
    ids=["lookup-k3", "lookup-unigram-T0.7", "lookup-topk2", "confidence-stop",
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
