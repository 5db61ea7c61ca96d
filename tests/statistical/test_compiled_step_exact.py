"""The compiled step is exact: speculative decoding with two small random GPTs on the numba
backend, whose every step runs in one compiled call (specdec_lite.engine.compiled_step),
samples whole continuations from the target's law, enumerated exactly from the same
compiled target. The same for the other proposers: prompt lookup (one-hot rows, copied
inside the run kernel), an n-gram draft (its rows summed inside the run kernel) and a
Markov draft (rows of its own, asked in Python); for a random EAGLE drafter, which
drafts inside its own kernel; and for Medusa's exact chain, whose whole run is one call.
Pearson's chi-square stays below its 0.1% critical value; the greedy rule at T > 0
(lossy), run through the same compiled steps, exceeds it at the same N.
Needs numba.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import TINY, chi2_critical, chi2_statistic, enumerate_sequences, random_params

from specdec_lite.drafting.eagle import EagleDraft, EagleWeights, eagle_shapes
from specdec_lite.drafting.proposers import ModelDraft, PromptLookup
from specdec_lite.engine import compiled_step
from specdec_lite.engine.decode import speculative_generate
from specdec_lite.models import fast
from specdec_lite.models.ngram import MarkovModel, NGramModel
from specdec_lite.models.transformer import TransformerModel
from specdec_lite.rules.distributions import Sampling

pytestmark = pytest.mark.skipif(not fast.available(), reason=f"needs {fast.INSTALL_HINT}")

PROMPT, LENGTH, N = [0, 2], 4, 3000
MARKOV = MarkovModel(np.array([[0.6, 0.3, 0.1], [0.2, 0.2, 0.6], [0.1, 0.7, 0.2]]))
NGRAM = NGramModel(3, 3).fit(np.random.default_rng(4).integers(0, 3, size=40))


def gpt(seed: int, scale: float) -> TransformerModel:
    params = random_params(TINY, seed)
    params["wte"] = params["wte"] * scale
    return TransformerModel(TINY, params, backend="numba")


def eagle(target: TransformerModel, seed: int = 5) -> EagleDraft:
    """A random EAGLE drafter for ``target``: its rows differ from the target's."""
    rng = np.random.default_rng(seed)
    arrays = {name: 0.5 * rng.standard_normal(shape)
              for name, shape in eagle_shapes(TINY.d_model).items()}
    return EagleDraft(target, EagleWeights.from_arrays(arrays, TINY.n_head))


@pytest.fixture(scope="module")
def pair() -> tuple[TransformerModel, TransformerModel]:
    return gpt(2, 3.0), gpt(7, 3.0)


def samples(target, draft, k: int, temperature: float, rule: str = "exact") -> list[tuple]:
    rng = np.random.default_rng(321)
    return [tuple(speculative_generate(target, draft, PROMPT, k=k, max_new_tokens=LENGTH,
                                       temperature=temperature, rule=rule,
                                       seed=rng).tokens.tolist())
            for _ in range(N)]


def test_the_runs_below_take_the_compiled_step(pair):
    target, draft = pair
    own = target.bound()
    own_draft = ModelDraft(draft).for_sequence(own)
    assert compiled_step.drafts_in_kernel(own_draft)
    for proposer in (own_draft, PromptLookup(), ModelDraft(MARKOV), ModelDraft(NGRAM)):
        assert isinstance(compiled_step.step_for(own, proposer, Sampling(1.0), "exact"),
                          compiled_step.CompiledStep)
    assert compiled_step.eagle_in_kernel(eagle(target).for_sequence(own), own) is not None
    assert compiled_step.ngram_in_kernel(ModelDraft(NGRAM)) is NGRAM


@pytest.mark.parametrize(("k", "temperature"), [(1, 1.0), (3, 1.0), (2, 0.6), (4, 1.5)])
def test_compiled_step_samples_the_target_law(pair, k, temperature):
    target, draft = pair
    expected = enumerate_sequences(target, PROMPT, LENGTH, temperature)
    stat, df = chi2_statistic(samples(target, draft, k, temperature), expected)
    assert stat < chi2_critical(df), f"chi2={stat:.1f} exceeds the 0.1% critical value (df={df})"


def test_the_greedy_rule_through_the_compiled_step_fails_the_same_test(pair):
    target, draft = pair
    expected = enumerate_sequences(target, PROMPT, LENGTH, 1.0)
    stat, df = chi2_statistic(samples(target, draft, 2, 1.0, rule="greedy"), expected)
    assert stat > chi2_critical(df), f"chi2={stat:.1f}: the lossy rule looks exact (df={df})"


@pytest.mark.parametrize(("proposer", "k", "temperature"),
                         [(PromptLookup(max_ngram=2), 3, 1.0), (PromptLookup(), 2, 0.6),
                          (ModelDraft(MARKOV), 2, 1.0), (ModelDraft(MARKOV), 3, 1.4),
                          (ModelDraft(NGRAM), 2, 1.0), (ModelDraft(NGRAM), 3, 0.6)],
                         ids=["lookup-k3-T1", "lookup-k2-T0.6", "markov-k2-T1", "markov-k3-T1.4",
                              "ngram-k2-T1", "ngram-k3-T0.6"])
def test_compiled_verification_of_other_proposers_samples_the_target_law(pair, proposer, k,
                                                                         temperature):
    target = pair[0]
    expected = enumerate_sequences(target, PROMPT, LENGTH, temperature)
    stat, df = chi2_statistic(samples(target, proposer, k, temperature), expected)
    assert stat < chi2_critical(df), f"chi2={stat:.1f} exceeds the 0.1% critical value (df={df})"


@pytest.mark.parametrize("model", [MARKOV, NGRAM], ids=["markov", "ngram"])
def test_the_greedy_rule_on_other_proposers_fails_the_same_test(pair, model):
    target = pair[0]
    expected = enumerate_sequences(target, PROMPT, LENGTH, 1.0)
    stat, df = chi2_statistic(samples(target, ModelDraft(model), 2, 1.0, rule="greedy"),
                              expected)
    assert stat > chi2_critical(df), f"chi2={stat:.1f}: the lossy rule looks exact (df={df})"


@pytest.mark.parametrize(("k", "temperature"), [(3, 1.0), (2, 0.6)], ids=["k3-T1", "k2-T0.6"])
def test_the_eagle_kernel_samples_the_target_law(pair, k, temperature):
    target = pair[0]
    expected = enumerate_sequences(target, PROMPT, LENGTH, temperature)
    stat, df = chi2_statistic(samples(target, eagle(target), k, temperature), expected)
    assert stat < chi2_critical(df), f"chi2={stat:.1f} exceeds the 0.1% critical value (df={df})"


def test_the_greedy_rule_through_the_eagle_kernel_fails_the_same_test(pair):
    target = pair[0]
    expected = enumerate_sequences(target, PROMPT, LENGTH, 1.0)
    stat, df = chi2_statistic(samples(target, eagle(target), 2, 1.0, rule="greedy"), expected)
    assert stat > chi2_critical(df), f"chi2={stat:.1f}: the lossy rule looks exact (df={df})"


@pytest.mark.parametrize(("depth", "temperature"), [(2, 1.0), (3, 0.6)], ids=["d2-T1", "d3-T0.6"])
def test_medusas_compiled_exact_chain_samples_the_target_law(pair, depth, temperature):
    from support import random_heads

    from specdec_lite.drafting.medusa import chain_tree
    from specdec_lite.engine.medusa_decode import medusa_generate

    target = pair[0]
    heads = random_heads(TINY, n_heads=depth, seed=9)
    expected = enumerate_sequences(target, PROMPT, LENGTH, temperature)
    rng = np.random.default_rng(321)
    runs = [tuple(medusa_generate(target, heads, PROMPT, max_new_tokens=LENGTH,
                                  temperature=temperature, rule="exact", tree=chain_tree(depth),
                                  seed=rng).tokens.tolist()) for _ in range(N)]
    stat, df = chi2_statistic(runs, expected)
    assert stat < chi2_critical(df), f"chi2={stat:.1f} exceeds the 0.1% critical value (df={df})"

