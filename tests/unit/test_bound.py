"""Every decoder runs on caches of its own (``model.bound``): the models keep no
sequence state, a run's tokens do not depend on what was asked of the models before, and
a caller can start it from a cache it filled (the benchmark does, to keep the prompt's
forward out of the timing)."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from specdec_lite import generate, load_pretrained, medusa_generate, speculative_generate
from specdec_lite.bench.draft_cost import TimedProposer
from specdec_lite.drafting.proposers import ModelDraft, PromptLookup
from specdec_lite.engine.resilient import resilient_generate
from specdec_lite.models.bound import BoundModel, fresh
from specdec_lite.pretrained import load_eagle, load_early_exit
from specdec_lite.rules.distributions import Sampling


@pytest.fixture(scope="module")
def shipped():
    models = load_pretrained()
    return models, load_eagle(models.target), load_early_exit()


DECODERS = {
    "generate": lambda m, e, x, p, t: generate(m.target, p, max_new_tokens=24, temperature=t,
                                              seed=3),
    "draft model": lambda m, e, x, p, t: speculative_generate(
        m.target, m.draft, p, k=3, max_new_tokens=24, temperature=t, seed=3),
    "confidence stop": lambda m, e, x, p, t: speculative_generate(
        m.target, ModelDraft(m.draft, min_confidence=0.5), p, k=4, max_new_tokens=24,
        temperature=t, seed=3),
    "eagle": lambda m, e, x, p, t: speculative_generate(m.target, e, p, k=3, max_new_tokens=24,
                                                        temperature=t, seed=3),
    "early exit": lambda m, e, x, p, t: speculative_generate(
        m.target, x, p, k=3, max_new_tokens=24, temperature=t, seed=3),
    "lookup": lambda m, e, x, p, t: speculative_generate(
        m.target, PromptLookup(), p, k=3, max_new_tokens=24, temperature=t, seed=3),
    "medusa": lambda m, e, x, p, t: medusa_generate(
        m.target, m.heads, p, max_new_tokens=24, temperature=t,
        rule="greedy" if t == 0 else "exact", seed=3),
    "resilient": lambda m, e, x, p, t: resilient_generate(
        m.target, m.draft, p, k=3, max_new_tokens=24, temperature=t, seed=3),
}


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("name", list(DECODERS))
def test_a_run_depends_on_nothing_asked_before(shipped, name, temperature) -> None:
    models, eagle, early_exit = shipped
    decode = DECODERS[name]
    prompt = models.tokenizer.encode("def __init__(self")
    other = models.tokenizer.encode("import numpy as np\nx = np.zeros(")
    alone = decode(models, eagle, early_exit, prompt, temperature)
    for model in (models.target, models.draft, early_exit):
        model.probs(other)  # direct calls: each on a cache it then drops
        assert not hasattr(model, "cache")  # nothing kept between calls
    eagle.propose(other, 2, Sampling.checked(temperature, None, None), np.random.default_rng(0))
    busy = decode(models, eagle, early_exit, prompt, temperature)
    assert busy.tokens.tolist() == alone.tokens.tolist()
    assert busy.steps == alone.steps


def test_a_bound_cache_starts_the_run_where_it_is(shipped) -> None:
    """The prompt held in the cache is not forwarded again; the tokens are a fresh run's."""
    models = shipped[0]
    target, prompt = models.target, models.tokenizer.encode("for i in range(")
    cache = target.new_state()
    target.probs(prompt, cache=cache)
    rows: list[int] = []
    target.observer = lambda n, seconds: rows.append(n)
    try:
        warm = generate(target.bound(cache), prompt, max_new_tokens=20, temperature=0)
        warm_rows = sum(rows)
        rows.clear()
        cold = generate(target, prompt, max_new_tokens=20, temperature=0)
        cold_rows = sum(rows)
    finally:
        target.observer = None
    assert warm.tokens.tolist() == cold.tokens.tolist()
    assert warm_rows == 19  # one row per new token but the last, which nobody reads
    assert cold_rows == len(prompt) + 19
    assert cache.length == len(prompt) + 19  # the caller's cache went along


def test_medusa_runs_on_the_cache_it_is_given(shipped) -> None:
    models = shipped[0]
    prompt = models.tokenizer.encode("class Foo(object):\n    ")
    cache = models.target.new_state()
    on_cache = medusa_generate(models.target.bound(cache), models.heads, prompt,
                               max_new_tokens=20, temperature=0)
    plain = generate(models.target, prompt, max_new_tokens=20, temperature=0)
    assert on_cache.tokens.tolist() == plain.tokens.tolist()
    # the cache holds the prompt and what the run committed: each emitted token but the
    # last, and past max_new_tokens the rest of the last step's accepted path
    assert cache.tokens[: len(prompt)].tolist() == prompt.tolist()
    held = cache.tokens[len(prompt) : cache.n_causal].tolist()
    assert len(held) >= 19 and held[:20] == plain.tokens[: len(held)].tolist()


def test_a_timed_draft_model_is_timed_on_the_runs_cache(shipped) -> None:
    models = shipped[0]
    prompt = models.tokenizer.encode("def __init__(self")
    timer = TimedProposer(ModelDraft(models.draft))
    gen = speculative_generate(models.target, timer, prompt, k=3, max_new_tokens=30,
                               temperature=1.0, seed=5)
    plain = speculative_generate(models.target, models.draft, prompt, k=3, max_new_tokens=30,
                                 temperature=1.0, seed=5)
    assert gen.tokens.tolist() == plain.tokens.tolist()
    assert timer.tokens == gen.n_proposed > 0 and timer.seconds > 0


def test_a_bound_model_is_a_model(shipped) -> None:
    target = shipped[0].target
    prompt = shipped[0].tokenizer.encode("x = ")
    bound = target.bound()
    assert isinstance(bound, BoundModel) and fresh(bound) is bound
    assert bound.bound() is bound and bound.bound(bound.cache) is bound
    assert bound.vocab_size == target.vocab_size and bound.config is target.config
    np.testing.assert_array_equal(bound.probs(prompt), target.probs(prompt))
    assert bound.n_committed == len(prompt)
    for twin in (copy.copy(bound), pickle.loads(pickle.dumps(bound))):
        np.testing.assert_array_equal(twin.probs(prompt), bound.probs(prompt))
    assert fresh(shipped[0].draft) is not shipped[0].draft
    ngram_like = object()
    assert fresh(ngram_like) is ngram_like  # a model without caches is used as it is
    with pytest.raises(TypeError, match="cache must be a KVCache"):
        target.bound("not a cache")
