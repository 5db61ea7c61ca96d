"""The EAGLE drafter: the target's features, the drafter's cache, its proposals, loading,
and greedy identity on the shipped GPT."""

from __future__ import annotations

import numpy as np
import pytest
from support import CONFIG, random_params, tokens

from specdec_lite import EagleDraft
from specdec_lite.drafting.eagle import EagleWeights, eagle_forward, eagle_shapes
from specdec_lite.engine.decode import generate, speculative_generate
from specdec_lite.functional import softmax
from specdec_lite.models import fast
from specdec_lite.models.transformer import TransformerConfig, TransformerModel
from specdec_lite.pretrained import WEIGHTS_DIR, load_eagle, load_manifest, load_pretrained
from specdec_lite.rules.distributions import Sampling

N_HEAD = 2  # the random drafter's heads (CONFIG.d_model = 32)


def eagle_arrays(d: int = CONFIG.d_model, seed: int = 5, scale: float = 0.3) -> dict:
    rng = np.random.default_rng(seed)
    arrays = {name: scale * rng.standard_normal(shape) for name, shape in eagle_shapes(d).items()}
    for name in arrays:
        if name.endswith(".g"):
            arrays[name] += 1.0
    return arrays


@pytest.fixture
def target() -> TransformerModel:
    return TransformerModel(CONFIG, random_params(CONFIG))


@pytest.fixture
def drafter(target) -> EagleDraft:
    return EagleDraft(target, EagleWeights.from_arrays(eagle_arrays(), N_HEAD))


@pytest.fixture(scope="module")
def shipped():
    return load_pretrained()


def reference_rows(drafter: EagleDraft, context: np.ndarray, drafted: np.ndarray,
                   temperature: float) -> np.ndarray:
    """The rows q [k, V] of ``drafted`` after ``context``, recomputed from scratch: every
    entry in one forward, fresh caches, the features from a fresh target."""
    fresh = TransformerModel(CONFIG, random_params(CONFIG))
    n, k = len(context), len(drafted)
    features = fresh.hidden(context[:-1])  # [n-1, d]
    kv = np.zeros((2, N_HEAD, CONFIG.max_len, CONFIG.d_model // N_HEAD), dtype=np.float32)
    real = eagle_forward(drafter.weights, features,
                         drafter.embed(context[1:], np.arange(1, n)), kv, 0)  # [n-1, d]
    predicted = [real[-1]]
    for i in range(k - 1):  # one entry at a time: each reads the prediction before it
        predicted.append(eagle_forward(drafter.weights, predicted[-1][None],
                                       drafter.embed(drafted[i : i + 1], np.array([n + i])),
                                       kv, n - 1 + i)[0])
    logits = np.stack(predicted) @ fresh.unembed  # [k, V]
    return softmax(logits / temperature)


# ---------------------------------------------------------------- the target's features


def test_hidden_from_start_reads_the_cache_without_a_forward(target) -> None:
    run = target.bound()  # the feature reads below share one cache
    ids = tokens(20)
    full = run.hidden(ids)  # [20, d]
    forwarded = []
    target.observer = lambda n, seconds: forwarded.append(n)
    np.testing.assert_array_equal(run.hidden(ids, start=12), full[12:])
    assert forwarded == []  # what the cache holds: no forward at all
    longer = np.r_[ids, tokens(3, seed=8)]
    np.testing.assert_allclose(run.hidden(longer, start=20),
                               TransformerModel(CONFIG, random_params(CONFIG)).hidden(
                                   longer)[20:], atol=1e-5)
    assert forwarded == [3]  # only the three new rows
    np.testing.assert_array_equal(run.hidden(ids[:15], start=15), full[15:15])
    with pytest.raises(ValueError, match="start"):
        run.hidden(ids, start=21)


def test_features_are_trimmed_with_the_cache_on_rollback(target) -> None:
    target = target.bound()
    ids, other = tokens(20), tokens(20, seed=7)
    target.hidden(ids)
    target.rollback(8)
    np.testing.assert_allclose(target.hidden(np.r_[ids[:8], other[8:]], start=8),
                               TransformerModel(CONFIG, random_params(CONFIG)).hidden(
                                   np.r_[ids[:8], other[8:]])[8:], atol=1e-5)


# ---------------------------------------------------------------- the drafter's forward


def test_eagle_forward_in_pieces_equals_one_block(drafter) -> None:
    rng = np.random.default_rng(0)
    features = rng.standard_normal((12, CONFIG.d_model)).astype(np.float32)
    embeddings = rng.standard_normal((12, CONFIG.d_model)).astype(np.float32)
    shape = (2, N_HEAD, CONFIG.max_len, CONFIG.d_model // N_HEAD)
    whole = eagle_forward(drafter.weights, features, embeddings, np.zeros(shape, np.float32), 0)
    kv = np.zeros(shape, dtype=np.float32)
    pieces = [eagle_forward(drafter.weights, features[a:b], embeddings[a:b], kv, a)
              for a, b in ((0, 5), (5, 6), (6, 12))]
    np.testing.assert_allclose(np.concatenate(pieces), whole, atol=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
def test_proposals_are_the_rows_recomputed_from_scratch(drafter, temperature) -> None:
    """After steps of a real run (drafter cache reused, target cache rolled back), a
    proposal's tokens and rows q equal a from-scratch recomputation."""
    prompt = tokens(6)
    gen = speculative_generate(drafter.target, drafter, prompt, k=3, max_new_tokens=12,
                               temperature=temperature, seed=3)
    context = np.r_[prompt, gen.tokens]
    draft = drafter.propose(context, 4, Sampling.checked(temperature), np.random.default_rng(9))
    assert draft.tokens.shape == (4,) and draft.n_calls == 4
    want = reference_rows(drafter, context, draft.tokens, temperature or 1.0)  # [4, V]
    if temperature == 0:  # greedy: one-hot rows on the argmax of each recomputed row
        np.testing.assert_array_equal(draft.tokens, want.argmax(axis=1))
        np.testing.assert_array_equal(draft.q, np.eye(CONFIG.vocab_size)[draft.tokens])
    else:
        np.testing.assert_allclose(draft.q, want, atol=1e-5)


def test_a_context_that_changes_is_caught_up_from_where_it_agrees(target) -> None:
    weights = EagleWeights.from_arrays(eagle_arrays(), N_HEAD)
    reused = EagleDraft(target, weights).for_sequence(target)  # one drafter cache throughout
    sampling, a, b = Sampling.checked(1.0), tokens(15), tokens(15, seed=4)
    for context in (a, b[:9], np.r_[a[:6], b[6:12]], a[:14], a):
        fresh_each_time = EagleDraft(TransformerModel(CONFIG, random_params(CONFIG)), weights)
        got = reused.propose(context, 3, sampling, np.random.default_rng(1))
        want = fresh_each_time.propose(context, 3, sampling, np.random.default_rng(1))
        np.testing.assert_array_equal(got.tokens, want.tokens)
        np.testing.assert_allclose(got.q, want.q, atol=1e-5)


def test_top_k_and_top_p_cut_the_drafters_rows(drafter) -> None:
    context = tokens(10)
    draft = drafter.propose(context, 3, Sampling.checked(1.0, top_k=2),
                            np.random.default_rng(0))
    assert ((draft.q > 0).sum(axis=1) <= 2).all()
    np.testing.assert_allclose(draft.q.sum(axis=1), 1.0)


def test_reading_features_costs_no_target_forward_after_the_first_step(drafter) -> None:
    """The target forwards once per step (its verification) plus once on the first
    step, where the drafter reads the prompt (a forward the verification then skips)."""
    calls = []
    drafter.target.observer = lambda n, seconds: calls.append(n)
    prompt = tokens(7)
    gen = speculative_generate(drafter.target, drafter, prompt, k=3, max_new_tokens=20,
                               temperature=1.0, seed=0)
    assert len(calls) == gen.n_target_calls + 1
    assert calls[0] == len(prompt) - 1  # the drafter's read of the prompt


def test_no_draft_without_a_feature_or_room(drafter) -> None:
    sampling, rng = Sampling.checked(1.0), np.random.default_rng(0)
    assert len(drafter.propose(tokens(1), 3, sampling, rng).tokens) == 0
    assert len(drafter.propose(tokens(5), 0, sampling, rng).tokens) == 0
    near_end = tokens(CONFIG.max_len - 1)
    draft = drafter.propose(near_end, 5, sampling, rng)  # room for 2 more positions
    assert len(draft.tokens) == 2 and draft.q.shape == (2, CONFIG.vocab_size)
    gen = speculative_generate(drafter.target, drafter, tokens(1), k=3, max_new_tokens=8,
                               temperature=0)
    assert gen.steps[0].proposed == () and len(gen.tokens) == 8


def test_speculative_greedy_with_the_drafter_is_target_greedy(drafter) -> None:
    prompt = tokens(5)
    want = generate(drafter.target, prompt, max_new_tokens=30, temperature=0).tokens
    got = speculative_generate(drafter.target, drafter, prompt, k=4, max_new_tokens=30,
                               temperature=0)
    np.testing.assert_array_equal(got.tokens, want)


@pytest.mark.skipif(not fast.available(), reason=f"needs {fast.INSTALL_HINT}")
def test_the_compiled_target_records_the_same_features(drafter) -> None:
    context = tokens(12)
    sampling = Sampling.checked(1.0)
    want = drafter.propose(context, 3, sampling, np.random.default_rng(2))
    compiled = TransformerModel(CONFIG, random_params(CONFIG), backend="numba")
    got = EagleDraft(compiled, drafter.weights).propose(context, 3, sampling,
                                                        np.random.default_rng(2))
    np.testing.assert_array_equal(got.tokens, want.tokens)
    np.testing.assert_allclose(got.q, want.q, atol=1e-4)


@pytest.mark.skipif(not fast.available(), reason=f"needs {fast.INSTALL_HINT}")
def test_the_compiled_layer_is_the_numpy_layer(drafter) -> None:
    """On a numba target the drafter's layer runs compiled (the GPT's kernels): the same
    predictions to float32 rounding, in one block or entry by entry, with the same keys
    and values cached."""
    compiled = EagleDraft(TransformerModel(CONFIG, random_params(CONFIG), backend="numba"),
                          drafter.weights)
    rng = np.random.default_rng(4)
    d, d_head = CONFIG.d_model, CONFIG.d_model // N_HEAD
    features, embeddings = rng.standard_normal((2, 7, d)).astype(np.float32)
    caches = [np.zeros((2, N_HEAD, CONFIG.max_len, d_head), np.float32) for _ in range(2)]
    for start, stop in ((0, 5), (5, 6), (6, 7)):  # a block, then single entries
        want = eagle_forward(drafter.weights, features[start:stop], embeddings[start:stop],
                             caches[0], start)
        got = compiled.layer(features[start:stop], embeddings[start:stop], caches[1], start)
        np.testing.assert_allclose(got, want, atol=1e-4)
    np.testing.assert_allclose(caches[1], caches[0], atol=1e-4)
    assert compiled._compiled is not None and drafter._compiled is None


@pytest.mark.skipif(not fast.available(), reason=f"needs {fast.INSTALL_HINT}")
def test_the_compiled_shipped_drafter_is_greedy_identical() -> None:
    shipped = load_pretrained(backend="numba")
    prompt = shipped.tokenizer.encode("    def __init__(self")
    eagle = load_eagle(shipped.target)
    want = generate(shipped.target, prompt, max_new_tokens=40, temperature=0).tokens
    got = speculative_generate(shipped.target, eagle, prompt, k=3, max_new_tokens=40,
                               temperature=0)
    np.testing.assert_array_equal(got.tokens, want)
    assert eagle._compiled is not None and got.tau > 1.5


# ---------------------------------------------------------------- bad input


def test_bad_targets_and_weights_are_refused(target) -> None:
    weights = EagleWeights.from_arrays(eagle_arrays(), N_HEAD)
    with pytest.raises(TypeError, match="target"):
        EagleDraft(object(), weights)
    with pytest.raises(TypeError, match="weights"):
        EagleDraft(target, eagle_arrays())
    with pytest.raises(ValueError, match="d_model"):
        EagleDraft(target, EagleWeights.from_arrays(eagle_arrays(16), N_HEAD))
    arrays = eagle_arrays()
    del arrays["block.fc.b"]
    with pytest.raises(ValueError, match="block.fc.b"):
        EagleWeights.from_arrays(arrays, N_HEAD)
    arrays = eagle_arrays() | {"in_proj.w": np.zeros((3, 3))}
    with pytest.raises(ValueError, match="in_proj.w"):
        EagleWeights.from_arrays(arrays, N_HEAD)
    with pytest.raises(ValueError, match="n_head"):
        EagleWeights.from_arrays(eagle_arrays(), 3)
    drafter = EagleDraft(target, weights)
    with pytest.raises(ValueError, match="context"):
        drafter.propose(np.array([1, CONFIG.vocab_size]), 2, Sampling.checked(1.0),
                        np.random.default_rng(0))
    with pytest.raises(ValueError, match="k"):
        drafter.propose(tokens(4), -1, Sampling.checked(1.0), np.random.default_rng(0))


# ---------------------------------------------------------------- the shipped drafter


def test_the_shipped_drafter_is_small_half_precision_and_checked() -> None:
    entry = load_manifest()["models"]["eagle"]
    assert entry["dtype"] == "float16" and entry["finished"]
    assert (WEIGHTS_DIR / entry["file"]).stat().st_size < 2 * 1024 * 1024
    with np.load(WEIGHTS_DIR / entry["file"]) as archive:
        assert {archive[name].dtype for name in archive.files} == {np.dtype(np.float16)}
    assert entry["target_sha256"] == load_manifest()["models"]["target"]["sha256"]


def test_load_eagle_refuses_a_target_it_does_not_fit(shipped) -> None:
    with pytest.raises(ValueError, match="d_model"):
        load_eagle(TransformerModel(CONFIG, random_params(CONFIG)))
    small = TransformerConfig(vocab_size=96, n_layer=1, n_head=6, d_model=192, max_len=64)
    with pytest.raises(ValueError, match="max_len"):
        load_eagle(TransformerModel(small, random_params(small)))
    with pytest.raises(TypeError, match="target"):
        load_eagle(shipped.draft.config)


@pytest.mark.parametrize("text", ["    def __init__(self", "import os\nimport sys\n"])
def test_shipped_drafter_is_greedy_identical_and_accepted(shipped, text) -> None:
    prompt = shipped.tokenizer.encode(text)
    eagle = load_eagle(shipped.target)
    want = generate(shipped.target, prompt, max_new_tokens=40, temperature=0).tokens
    got = speculative_generate(shipped.target, eagle, prompt, k=3, max_new_tokens=40,
                               temperature=0)
    np.testing.assert_array_equal(got.tokens, want)
    assert got.tau > 1.0  # the trained drafter's tokens are accepted at all


# ---------------------------------------------------------------- in the batched engine

LENGTHS = (40, 17, 33, 24)  # new tokens of the four batched sequences: they leave apart


def test_batched_eagle_equals_each_sequence_alone(shipped) -> None:
    """Four sequences of different lengths share a BatchEngine of two slots with the
    shipped drafter, so they join, leave and move slots mid-run: each has its own drafter
    state and reads its features from its slot of the batched target cache, and gets the
    tokens and steps ``speculative_generate`` gives it alone, greedy and at T = 1; greedy
    output is the target's. Reading the features costs no target forward: the target
    forwards each prompt once and then each step's block (the last token and the drafts),
    nothing more (features read from another sequence's slot would be recomputed there)."""
    from specdec_lite import BatchEngine

    eagle = load_eagle(shipped.target)
    prompts = [shipped.tokenizer.encode(t) for t in
               ("def __init__(self", "import os\n", "    return ", "for i in range(")]
    for temperature in (0.0, 1.0):
        rule = "greedy" if temperature == 0 else "exact"
        engine = BatchEngine(shipped.target, eagle, k=3, temperature=temperature,
                             rule=rule, max_batch=2)
        for i, prompt in enumerate(prompts):
            engine.add(prompt, max_new_tokens=LENGTHS[i], seed=i, request_id=i)
        rows: list[int] = []
        shipped.target.observer = lambda n, seconds, rows=rows: rows.append(n)
        try:
            result = engine.run()
        finally:
            shipped.target.observer = None
        assert sum(rows) == sum(len(p) for p in prompts) + sum(
            len(step.proposed) + 1 for i in range(len(prompts)) for step in result[i].steps)
        for i, prompt in enumerate(prompts):
            alone = speculative_generate(shipped.target, eagle, prompt, k=3,
                                         max_new_tokens=LENGTHS[i], temperature=temperature,
                                         seed=i, rule=rule)
            assert result[i].tokens.tolist() == alone.tokens.tolist()
            assert result[i].steps == alone.steps
            assert result[i].n_draft_calls == alone.n_draft_calls
            if temperature == 0:
                plain = generate(shipped.target, prompt, max_new_tokens=LENGTHS[i],
                                 temperature=0)
                assert result[i].tokens.tolist() == plain.tokens.tolist()


def test_propose_with_keeps_sequences_apart(drafter, target) -> None:
    """Two drafter states over one drafter: interleaving two contexts gives each the
    proposal it gets alone, and a wrong state is refused."""
    a, b = tokens(9, seed=1), tokens(11, seed=2)
    sampling = Sampling.checked(0.0, None, None)
    alone = [drafter.propose_with(drafter.new_state(), lambda t, s: target.hidden(t, start=s),
                                  ctx, 3, sampling, np.random.default_rng(0)).tokens
             for ctx in (a, b)]
    states = [drafter.new_state(), drafter.new_state()]
    for _ in range(2):  # twice, so the second round reuses each state's entries
        for state, ctx, expected in zip(states, (a, b), alone, strict=True):
            got = drafter.propose_with(state, lambda t, s: target.hidden(t, start=s), ctx, 3,
                                       sampling, np.random.default_rng(0))
            assert got.tokens.tolist() == expected.tolist()
    with pytest.raises(TypeError, match="state"):
        drafter.propose_with(object(), lambda t, s: None, a, 3, sampling,
                             np.random.default_rng(0))
