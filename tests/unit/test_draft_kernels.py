"""The compiled drafters of the run kernels (specdec_lite.engine.draft_kernels) against the
Python ones they mirror: prompt lookup's copy against proposers.lookup, an n-gram model's
row against NGramModel.last_probs (both smoothings, every temperature kind), and whole
runs with an n-gram draft against the Python step: the same tokens, steps, counts, draws,
target cache and metered forwards, at a fixed k and under the policies the kernels follow.
Their exactness against enumerated laws is in tests/statistical/test_compiled_step_exact.py.
Every test needs numba.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import CONFIG, random_params

from specdec_lite.bench.timing import ForwardMeter
from specdec_lite.drafting.proposers import ModelDraft, lookup
from specdec_lite.engine import compiled_step, draft_kernels
from specdec_lite.engine.decode import speculative_generate
from specdec_lite.models import fast
from specdec_lite.models.ngram import NGramModel
from specdec_lite.models.transformer import TransformerModel

pytestmark = pytest.mark.skipif(not fast.available(), reason=f"needs {fast.INSTALL_HINT}")

V = CONFIG.vocab_size
PROMPT = np.array([1, 5, 2, 7, 3, 1, 5, 2], dtype=np.int64)


@pytest.fixture(scope="module")
def kernels():
    return compiled_step.compiled_kernels()  # compiles draft_kernels' functions in place


@pytest.fixture(scope="module")
def target() -> TransformerModel:
    params = random_params(CONFIG, 0)
    params["wte"] *= 0.3  # flattened logits, so tokens vary
    return TransformerModel(CONFIG, params, backend="numba")


def fitted(order: int, smoothing: str = "witten-bell", seed: int = 2) -> NGramModel:
    """An n-gram model fitted on a random text with repeats, so contexts are seen."""
    rng = np.random.default_rng(seed)
    text = np.concatenate([rng.integers(0, V, size=40), np.tile(PROMPT, 6),
                           rng.integers(0, 4, size=60)])
    return NGramModel(order, V, smoothing=smoothing).fit(text)


def same_run(a, b) -> bool:
    return (a.tokens.tolist() == b.tokens.tolist() and a.steps == b.steps
            and (a.n_target_calls, a.n_draft_calls) == (b.n_target_calls, b.n_draft_calls))


@pytest.mark.parametrize("seed", range(4))
def test_the_kernels_lookup_copies_what_prompt_lookup_copies(kernels, seed):
    """On random sequences over small alphabets (many matches, some none), for every
    n-gram range and k."""
    rng = np.random.default_rng(seed)
    out = np.empty(8, dtype=np.int64)
    for _ in range(300):
        n = int(rng.integers(1, 30))
        buf = rng.integers(0, int(rng.integers(2, 6)), size=n + 5).astype(np.int64)
        max_ngram = int(rng.integers(1, 5))
        min_ngram = int(rng.integers(1, max_ngram + 1))
        k = int(rng.integers(1, 9))
        m = draft_kernels.lookup_draft(buf, n, k, max_ngram, min_ngram, out)
        expected = lookup(buf[:n], k, max_ngram, min_ngram)
        assert out[:m].tolist() == expected.tolist(), (buf[:n], k, max_ngram, min_ngram)


@pytest.mark.parametrize("smoothing", ["witten-bell", "add-k"])
@pytest.mark.parametrize("order", [1, 2, 4])
@pytest.mark.parametrize("temperature", [0.0, 0.5, 1.0, 1.7])
def test_the_kernels_ngram_row_is_last_probs(kernels, smoothing, order, temperature):
    """Bit for bit at T = 0 and 1 (the same sums in the same order), to an ulp or so at
    other temperatures (numba's and numpy's log and exp), after contexts seen and unseen
    and shorter than the order."""
    model = fitted(order, smoothing)
    tables = model.flat_tables()
    rng = np.random.default_rng(order)
    row, out = np.empty(V), np.empty(V)
    for n in range(1, 25):
        buf = np.concatenate([PROMPT, rng.integers(0, V, size=20)])[:n].astype(np.int64)
        draft_kernels.ngram_row(*tables, buf, n, row)
        draft_kernels.tempered(row, temperature, out)
        expected = model.last_probs(buf, 1, temperature)[0]
        if temperature in (0.0, 1.0):
            assert out.tolist() == expected.tolist(), n
        else:
            np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-300)


def test_the_flat_tables_are_laid_out_once_per_fit():
    model = fitted(3)
    tables = model.flat_tables()
    assert model.flat_tables() is tables
    model.fit(np.tile(PROMPT, 3))
    assert model.flat_tables() is not tables
    with pytest.raises(ValueError, match="before fit"):
        NGramModel(3, V).flat_tables()


@pytest.mark.parametrize(("temperature", "rule"),
                         [(0.0, "greedy"), (0.0, "exact"), (0.6, "exact"), (1.0, "exact"),
                          (1.0, "greedy"), (1.4, "exact")])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_an_ngram_draft_run_is_one_call_and_the_python_steps_run(target, kernels, python_step,
                                                                kernel_calls, temperature,
                                                                rule, k):
    draft = ModelDraft(fitted(3))
    for seed in range(3):
        def decode(seed=seed):
            return speculative_generate(target, draft, PROMPT, k=k, max_new_tokens=26,
                                        temperature=temperature, rule=rule, seed=seed)
        kernel_calls.clear()
        compiled = decode()
        assert kernel_calls == [kernels.ngram_run]
        python = python_step(decode)
        assert same_run(compiled, python), (seed, compiled.tokens, python.tokens)
        assert any(step.proposed for step in compiled.steps)


@pytest.mark.parametrize("policy", ["auto", "heuristic", "theory"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_an_ngram_draft_follows_the_kernels_policies_as_in_python(target, kernels, python_step,
                                                                 kernel_calls, policy,
                                                                 temperature):
    from specdec_lite.drafting.draft_length import AdaptiveK, AutoK, StepCosts, TheoryK

    chosen = {"auto": AutoK(StepCosts((1.0, 1.3, 1.6, 1.9)), alpha0=0.5, probe_every=4),
              "heuristic": AdaptiveK(start=2, k_max=6),
              "theory": TheoryK(c=0.1, k_max=5)}[policy]
    draft = ModelDraft(fitted(4))
    for seed in range(3):
        def decode(seed=seed):
            return speculative_generate(target, draft, PROMPT, k=chosen, max_new_tokens=28,
                                        temperature=temperature, seed=seed)
        kernel_calls.clear()
        compiled = decode()
        assert kernel_calls == [kernels.ngram_run]
        assert same_run(compiled, python_step(decode))
    assert len({len(step.proposed) for step in compiled.steps}) > 1  # k moved


def test_an_ngram_draft_keeps_the_generator_meter_and_cache_as_the_python_step(target,
                                                                              python_step):
    """The meter sees one draft row a drafted token and the same target forwards, with
    seconds from the kernel's clock; the Generator and the target cache end alike."""
    model = fitted(3)
    results = []
    for run in (lambda f: f(), python_step):
        cache, rng = target.new_state(), np.random.default_rng(21)
        with ForwardMeter({"target": target, "draft": model}) as meter:
            gen = run(lambda c=cache, r=rng: speculative_generate(
                target.bound(c), model, PROMPT, k=3, max_new_tokens=20, temperature=1.0,
                seed=r))
        results.append((rng.random(), dict(meter.calls), cache.length, cache.n_causal,
                        cache.tokens[: cache.length].tolist()))
        assert meter.calls[("draft", 1)] == gen.n_draft_calls > 0
        assert meter.call_s[("draft", 1)] > 0
    assert results[0] == results[1]


def test_where_the_ngram_draft_is_drafted_in_the_kernel():
    model = fitted(3)

    class Subclass(NGramModel):
        pass

    sub = Subclass(3, V).fit(np.tile(PROMPT, 3))
    assert compiled_step.ngram_in_kernel(ModelDraft(model)) is model
    for proposer in (None, ModelDraft(model, min_confidence=0.3), ModelDraft(sub),
                     ModelDraft(NGramModel(3, V))):
        assert compiled_step.ngram_in_kernel(proposer) is None


@pytest.mark.parametrize("compiled", [True, False])
def test_the_benchmarks_isolated_ngram_row_is_the_runs_row(kernels, compiled):
    """The cost curve times the row the runs compute: the kernel's on the compiled
    backend, last_probs on numpy; both are the model's row."""
    from specdec_lite.bench.timing import ngram_probe

    model = fitted(4)
    prefix = np.concatenate([PROMPT, PROMPT[:3]])
    row = ngram_probe(model, prefix, compiled=compiled)()
    assert row.tolist() == model.last_probs(prefix)[0].tolist()

