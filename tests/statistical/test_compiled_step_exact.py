"""The compiled step is exact: speculative decoding with two small random GPTs on the numba
backend, whose every step runs in one compiled call (specdec_lite.engine.compiled_step),
samples whole continuations from the target's law, enumerated exactly from the same
compiled target. Pearson's chi-square stays below its 0.1% critical value; the greedy
rule at T > 0 (lossy), run through the same compiled step, exceeds it at the same N.
Needs numba.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import TINY, chi2_critical, chi2_statistic, enumerate_sequences, random_params

from specdec_lite.engine import compiled_step
from specdec_lite.engine.decode import speculative_generate
from specdec_lite.models import fast
from specdec_lite.models.transformer import TransformerModel
from specdec_lite.rules.distributions import Sampling

pytestmark = pytest.mark.skipif(not fast.available(), reason=f"needs {fast.INSTALL_HINT}")

PROMPT, LENGTH, N = [0, 2], 4, 3000


def gpt(seed: int, scale: float) -> TransformerModel:
    params = random_params(TINY, seed)
    params["wte"] = params["wte"] * scale
    return TransformerModel(TINY, params, backend="numba")


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
    proposer = compiled_step.ModelDraft(draft).for_sequence(own)
    assert isinstance(compiled_step.step_for(own, proposer, Sampling(1.0), "exact"),
                      compiled_step.CompiledStep)


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
