"""The EAGLE drafter keeps the exact rule exact.

As in test_drafters_exact.py: N whole continuations of a prompt, compared with the
target's enumerated law by Pearson's chi-square at its 0.1% critical value. The target is
a random one-layer GPT over V = 3 tokens (the drafter needs a GPT's features) and the
drafter a random EAGLE layer, so its rows q differ from the target's p: the verifier has
real work to do. Its drafts are read from features the target cached while verifying,
and drafted autoregressively from its own predicted features; every emitted token must
still follow p. The control must fail the same test: a drafter that takes the argmax of
each row but reports the row itself as q (the tokens were not drawn from what is
reported).
"""

from __future__ import annotations

import numpy as np
import pytest
from support import random_params, speculative_samples

from specdec_lite.drafting.eagle import EagleDraft, EagleWeights, eagle_shapes
from specdec_lite.drafting.proposers import Draft
from specdec_lite.models.transformer import TransformerConfig, TransformerModel
from specdec_lite.teaching.exactness import ChiSquare, chi_square, sequence_law

pytestmark = pytest.mark.statistical

V, LENGTH, N = 3, 4, 2000
CONFIG = TransformerConfig(vocab_size=V, n_layer=1, n_head=2, d_model=8, max_len=16)
PROMPT = [0, 1, 2, 1]
TARGET = TransformerModel(CONFIG, random_params(CONFIG, seed=3))


def random_weights(seed: int = 5, scale: float = 0.3) -> EagleWeights:
    rng = np.random.default_rng(seed)
    arrays = {name: scale * rng.standard_normal(shape)
              for name, shape in eagle_shapes(CONFIG.d_model).items()}
    return EagleWeights.from_arrays(arrays, CONFIG.n_head)


def sample_sequences(drafter, k, temperature: float = 1.0, **kwargs) -> list[tuple]:
    """N continuations of ``PROMPT`` from one Generator (``kwargs`` go to the decoder)."""
    return speculative_samples(TARGET, drafter, PROMPT, k=k, length=LENGTH, n=N,
                               temperature=temperature, **kwargs)


def chi2(samples: list[tuple], temperature: float = 1.0, **cuts) -> ChiSquare:
    """Chi-square of ``samples`` against the warped target's enumerated law."""
    return chi_square(samples, sequence_law(TARGET, PROMPT, LENGTH, temperature, **cuts))


@pytest.mark.parametrize(
    ("k", "temperature", "cuts"),
    [(3, 1.0, {}), (2, 0.7, {"top_k": 2}), (4, 1.0, {"top_p": 0.9})],
    ids=["k3", "k2-T0.7-topk2", "k4-topp0.9"],
)
def test_the_eagle_drafter_keeps_the_exact_rule_exact(k, temperature, cuts):
    drafter = EagleDraft(TARGET, random_weights())
    result = chi2(sample_sequences(drafter, k, temperature, **cuts), temperature, **cuts)
    assert result.n_impossible == 0, str(result)
    assert result.passed(1e-3), str(result)


class ArgmaxEagle(EagleDraft):
    """Drafts the argmax of each of its rows but reports the rows as the q its tokens
    were drawn from (each row the drafter's first row after the prefix so far). It
    overrides ``propose_with``, the drafting every decoder calls (the single-sequence
    decoders through ``for_sequence``, the batched engine directly)."""

    def propose_with(self, state, read_features, context, k, sampling, rng):
        tokens, rows = [], []
        for _ in range(k):
            prefix = np.r_[context, np.array(tokens, dtype=np.int64)]
            row = super().propose_with(state, read_features, prefix, 1, sampling, rng).q[0]
            tokens.append(int(row.argmax()))
            rows.append(row)
        return Draft(np.array(tokens, dtype=np.int64), np.array(rows).reshape(k, V), k)


def test_a_drafter_that_reports_rows_it_did_not_draw_from_is_caught():
    result = chi2(sample_sequences(ArgmaxEagle(TARGET, random_weights()), 3))
    assert not result.passed(1e-3), f"the wrong q went unnoticed: {result}"


def batched_samples(drafter: EagleDraft) -> list[tuple]:
    """N continuations of ``PROMPT`` through one BatchEngine of eight slots (k = 3, T = 1),
    the requests joining and leaving as they finish, each with its own seed."""
    from specdec_lite import BatchEngine

    engine = BatchEngine(TARGET, drafter, k=3, max_batch=8)
    for i, seed in enumerate(np.random.SeedSequence(11).spawn(N)):
        engine.add(np.array(PROMPT), max_new_tokens=LENGTH,
                   seed=np.random.default_rng(seed), request_id=i)
    done = engine.run()
    return [tuple(done[i].tokens.tolist()) for i in range(N)]


def test_the_eagle_drafter_stays_exact_in_the_batched_engine():
    """Each request drafts with its own drafter state from its slot's features
    (``propose_with``), and the continuations follow the target's law."""
    result = chi2(batched_samples(EagleDraft(TARGET, random_weights())))
    assert result.n_impossible == 0, str(result)
    assert result.passed(1e-3), str(result)


def test_a_batched_drafter_that_reports_rows_it_did_not_draw_from_is_caught():
    result = chi2(batched_samples(ArgmaxEagle(TARGET, random_weights())))
    assert not result.passed(1e-3), f"the wrong q went unnoticed: {result}"
