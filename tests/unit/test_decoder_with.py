"""exactness.decoder_with: the decode loop of :mod:`specdec_lite.teaching.exactness` with an
acceptance rule plugged in, as chapter 2 runs non-prefix acceptance with top-k."""

from __future__ import annotations

import numpy as np
import pytest

from specdec_lite import MarkovModel, speculative_generate
from specdec_lite.rules.verify import verify
from specdec_lite.teaching.exactness import decoder_with, sample_continuations
from specdec_lite.teaching.pitfalls import nonprefix_verify

V = 8  # vocabulary of the Markov pair


def markov(seed: int) -> MarkovModel:
    return MarkovModel(np.random.default_rng(seed).dirichlet(np.ones(V), size=V))


@pytest.mark.parametrize("cuts", [{}, {"top_k": 3}, {"top_p": 0.8}, {"top_k": 4, "top_p": 0.7}])
def test_with_verify_it_draws_as_the_library_decoder(cuts):
    """Same seed, same tokens as speculative_generate, cuts included: both models' rows are
    cut (a draft left uncut would draw other tokens). The library drafts fewer than k in
    its last steps, so it runs longer and only its first tokens are compared."""
    target, draft, prompt = markov(0), markov(1), [0]
    decoder = decoder_with(verify)
    for seed in range(5):
        ours = decoder(target, draft, prompt, k=3, max_new_tokens=40, seed=seed, **cuts)
        library = speculative_generate(target, draft, prompt, k=3, max_new_tokens=60,
                                       seed=seed, **cuts)
        assert len(ours.tokens) == 40
        assert ours.tokens.tolist() == library.tokens[:40].tolist()


def test_temperature_reaches_both_models():
    target, draft, prompt = markov(2), markov(3), [1]
    ours = decoder_with(verify)(target, draft, prompt, k=2, max_new_tokens=30,
                                temperature=0.5, seed=4)
    library = speculative_generate(target, draft, prompt, k=2, max_new_tokens=50,
                                   temperature=0.5, seed=4)
    assert ours.tokens.tolist() == library.tokens[:30].tolist()


def test_sample_continuations_runs_a_pitfall_with_top_k():
    """Non-prefix acceptance keeps drafts that came after a rejection; with top-k = 2 on
    both models some continuations leave the target's top 2, which plain top-k sampling
    of the target never does."""
    target, draft, prompt = markov(4), markov(5), [0]
    samples = sample_continuations(target, draft, prompt, 4, 300, 0, k=3, top_k=2,
                                   decoder=decoder_with(nonprefix_verify))

    def in_top_2(seq):
        context = list(prompt)
        for token in seq:
            row = target.probs(context)[-1]
            if token not in np.argsort(row)[-2:]:
                return False
            context.append(token)
        return True

    assert len(samples) == 300 and all(len(s) == 4 for s in samples)
    assert not all(in_top_2(s) for s in samples)
    exact = sample_continuations(target, draft, prompt, 4, 300, 0, k=3, top_k=2,
                                 decoder=decoder_with(verify))
    assert all(in_top_2(s) for s in exact)


def test_judge_must_be_a_function():
    with pytest.raises(TypeError, match="judge"):
        decoder_with("verify")
