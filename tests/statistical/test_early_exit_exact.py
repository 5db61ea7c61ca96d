"""The early-exit draft keeps the exact rule exact.

As in test_drafters_exact.py: N whole continuations of a prompt, compared with the
target's enumerated law by Pearson's chi-square at its 0.1% critical value. The target is
a random two-block GPT over V = 3 tokens and the draft its first block read out by a
random exit head, so the draft's rows q differ from the target's p and the verifier has
real work to do. The control must fail the same test: a draft that draws its tokens from
the early-exit model but reports the rows of the target's own head read at the same
depth (tokens not drawn from what is reported).
"""

from __future__ import annotations

import numpy as np
import pytest
from support import random_params, speculative_samples

from specdec_lite.drafting.early_exit import early_exit_model, head_shapes
from specdec_lite.drafting.proposers import Draft, ModelDraft
from specdec_lite.models.ngram import model_rows
from specdec_lite.models.transformer import TransformerConfig, TransformerModel
from specdec_lite.teaching.exactness import ChiSquare, chi_square, sequence_law

pytestmark = pytest.mark.statistical

V, LENGTH, N = 3, 4, 2000
CONFIG = TransformerConfig(vocab_size=V, n_layer=2, n_head=2, d_model=8, max_len=16)
PROMPT = [0, 1, 2, 1]
PARAMS = random_params(CONFIG, seed=3)
TARGET = TransformerModel(CONFIG, PARAMS)


def random_head(seed: int = 5) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    head = {name: rng.standard_normal(shape) for name, shape in head_shapes(8, V, 1).items()}
    head["layer1.ln_f.g"] += 1.0
    return head


DRAFT = early_exit_model(CONFIG, PARAMS, random_head(), 1)


def chi2(samples: list[tuple], temperature: float = 1.0, **cuts) -> ChiSquare:
    """Chi-square of ``samples`` against the warped target's enumerated law."""
    return chi_square(samples, sequence_law(TARGET, PROMPT, LENGTH, temperature, **cuts))


@pytest.mark.parametrize(
    ("k", "temperature", "cuts", "policy"),
    [(3, 1.0, {}, "fixed"), (2, 0.7, {"top_k": 2}, "fixed"), (4, 1.0, {"top_p": 0.9}, "fixed"),
     (4, 1.0, {}, "heuristic")],
    ids=["k3", "k2-T0.7-topk2", "k4-topp0.9", "heuristic"],
)
def test_the_early_exit_draft_keeps_the_exact_rule_exact(k, temperature, cuts, policy):
    samples = speculative_samples(TARGET, DRAFT, PROMPT, k=k, length=LENGTH, n=N,
                                  temperature=temperature, policy=policy, **cuts)
    result = chi2(samples, temperature, **cuts)
    assert result.n_impossible == 0, str(result)
    assert result.passed(1e-3), str(result)


class ClaimsTheSharedHead:
    """Draws from the early-exit draft but reports, as q, the rows of the target's own
    final LayerNorm and LM head read after the same block."""

    def __init__(self) -> None:
        shared = {"layer1.ln_f.g": PARAMS["ln_f.g"], "layer1.ln_f.b": PARAMS["ln_f.b"],
                  "layer1.unembed": PARAMS["wte"].T}
        self.drawn = ModelDraft(DRAFT)
        self.claimed = early_exit_model(CONFIG, PARAMS, shared, 1)

    def propose(self, context, k, sampling, rng):
        proposal = self.drawn.propose(context, k, sampling, rng)
        m = len(proposal.tokens)
        seq = np.r_[context, proposal.tokens][:-1]
        rows = sampling.warp(model_rows(self.claimed, seq, m, "claimed", sampling.temperature))
        return Draft(proposal.tokens, rows, proposal.n_calls)


def test_a_draft_that_reports_another_heads_rows_is_caught():
    claimed = ClaimsTheSharedHead().claimed.probs(PROMPT)[-1]
    assert np.abs(claimed - DRAFT.probs(PROMPT)[-1]).sum() > 0.2  # the lie is a real one
    samples = speculative_samples(TARGET, ClaimsTheSharedHead(), PROMPT, k=3, length=LENGTH,
                                  n=N)
    result = chi2(samples)
    assert not result.passed(1e-3), f"the wrong q went unnoticed: {result}"
