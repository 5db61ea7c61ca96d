"""NGramModel.last_probs against probs: the same rows, the same errors, the same decodes.

``last_probs(tokens, n_rows, temperature)`` must equal
``apply_temperature(probs(tokens)[-n_rows:], temperature)`` up to rounding, for both
smoothings, every order, sequences shorter than the order, and on the real corpus.
The decoders call it when a model has it, so speculative decoding with an NGramModel
must give the same tokens as with a wrapper that exposes only ``probs``.
"""

from __future__ import annotations

import numpy as np
import pytest

from specdec_lite.engine.decode import speculative_generate
from specdec_lite.models.corpus import load_text
from specdec_lite.models.ngram import NGramModel
from specdec_lite.models.tokenizer import CharTokenizer
from specdec_lite.rules.distributions import apply_temperature

V = 6
SMOOTHINGS = ["witten-bell", "add-k"]
TEMPERATURES = [0.0, 0.5, 1.0, 2.0]
ATOL = 1e-12


def markov_corpus(n: int, seed: int, vocab: int = V) -> np.ndarray:
    """[n] ids from a skewed random Markov chain: many contexts stay unseen at high orders."""
    rng = np.random.default_rng(seed)
    trans = rng.dirichlet(np.full(vocab, 0.3), size=vocab)  # [V, V]
    ids = [0]
    for _ in range(n - 1):
        ids.append(int(rng.choice(vocab, p=trans[ids[-1]])))
    return np.array(ids)


CORPUS = markov_corpus(300, seed=0)  # [300]


def queries(order: int, seed: int) -> list[np.ndarray]:
    """Sequences of length 1, shorter than, equal to and longer than the order."""
    rng = np.random.default_rng(seed)
    lengths = sorted({1, 2, 3, max(order - 2, 1), max(order - 1, 1), order, 3 * order + 5})
    from_corpus = [CORPUS[10 : 10 + n] for n in lengths]  # mostly seen contexts
    uniform = [rng.integers(0, V, n) for n in lengths]  # many unseen contexts
    return from_corpus + uniform


def prefix_probs(model: NGramModel, tokens: np.ndarray) -> np.ndarray:
    """``model.probs(tokens)`` [n, V], read off a sequence padded to at least ``order`` tokens.

    Row i depends only on ``tokens[: i + 1]``, so padding changes nothing: an independent
    reference for short sequences (``test_probs_short_sequence`` compares the two).
    """
    n = len(tokens)
    padded = np.concatenate([tokens, np.zeros(max(model.order - n, 0), dtype=np.int64)])
    return model.probs(padded)[:n]


def assert_matches_probs(model: NGramModel, tokens: np.ndarray, temperature: float) -> None:
    full = prefix_probs(model, tokens)  # [n, V]
    for n_rows in range(1, min(4, len(tokens)) + 1):
        got = model.last_probs(tokens, n_rows, temperature)  # [n_rows, V]
        want = apply_temperature(full[-n_rows:], temperature)  # [n_rows, V]
        assert got.shape == (n_rows, model.vocab_size) and got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)
        if temperature == 0:
            np.testing.assert_array_equal(got, want)  # the same first argmax, exactly


@pytest.mark.parametrize("temperature", TEMPERATURES)
@pytest.mark.parametrize("order", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("smoothing", SMOOTHINGS)
def test_matches_probs_random_corpus(smoothing: str, order: int, temperature: float) -> None:
    model = NGramModel(order, V, smoothing=smoothing, add_k=0.3).fit(CORPUS)
    for tokens in queries(order, seed=order):
        assert_matches_probs(model, tokens, temperature)


@pytest.mark.parametrize("smoothing", SMOOTHINGS)
def test_temperature_zero_is_one_hot_of_first_argmax(smoothing: str) -> None:
    model = NGramModel(3, V, smoothing=smoothing).fit(CORPUS)
    tokens = np.random.default_rng(7).integers(0, V, 20)  # [20]
    rows = model.last_probs(tokens, 4, 1.0)  # [4, V]
    hot = model.last_probs(tokens, 4, 0.0)  # [4, V]
    np.testing.assert_array_equal(hot, np.eye(V)[rows.argmax(axis=1)])


def test_ties_at_temperature_zero_go_to_lowest_id() -> None:
    """Unseen contexts under add-k give a uniform row: every token ties, id 0 wins."""
    model = NGramModel(3, V, smoothing="add-k").fit(np.array([0, 1, 0, 1, 0]))
    hot = model.last_probs(np.array([5, 5]), 1, 0.0)  # context (5, 5) never seen
    np.testing.assert_array_equal(hot, np.eye(V)[[0]])


@pytest.mark.parametrize("smoothing", SMOOTHINGS)
def test_fit_shorter_than_order(smoothing: str) -> None:
    """Orders with no counts at all (corpus shorter than the context) fall back cleanly."""
    model = NGramModel(5, 3, smoothing=smoothing).fit(np.array([0, 1, 2]))
    for tokens in (np.array([0]), np.array([0, 1, 2, 0, 1]), np.array([2, 2, 2])):
        for temperature in TEMPERATURES:
            assert_matches_probs(model, tokens, temperature)


def test_probs_short_sequence() -> None:
    """``probs`` itself on a sequence much shorter than the order (it used to raise for
    3 <= len(tokens) <= order - 3)."""
    model = NGramModel(6, 2).fit(np.array([0, 1] * 5))
    tokens = np.array([0, 1, 0])  # [3]
    np.testing.assert_allclose(model.probs(tokens), prefix_probs(model, tokens), atol=ATOL)


def test_accepts_lists_and_other_int_dtypes() -> None:
    model = NGramModel(3, V).fit(CORPUS)
    want = model.last_probs(np.array([1, 2, 3]), 2)  # [2, V]
    np.testing.assert_array_equal(model.last_probs([1, 2, 3], 2), want)
    np.testing.assert_array_equal(model.last_probs(np.array([1, 2, 3], np.int32), 2), want)
    np.testing.assert_array_equal(model.last_probs(np.array([1, 2, 3]), np.int64(2)), want)


@pytest.fixture(scope="module")
def real() -> tuple[CharTokenizer, NGramModel, NGramModel]:
    """Order-8 Witten–Bell on the training split, order-8 add-k on a slice of it."""
    tokenizer = CharTokenizer.ascii()
    ids = tokenizer.encode(load_text("train"))  # [~4M]
    witten_bell = NGramModel(8, tokenizer.vocab_size).fit(ids)
    add_k = NGramModel(8, tokenizer.vocab_size, smoothing="add-k").fit(ids[:200_000])
    return tokenizer, witten_bell, add_k


@pytest.mark.parametrize("temperature", TEMPERATURES)
def test_matches_probs_real_corpus(real, temperature: float) -> None:
    tokenizer, witten_bell, add_k = real
    heldout = tokenizer.encode(load_text("heldout")[5000:5200])  # [200]
    for model in (witten_bell, add_k):
        for n in (1, 2, 5, 7, 8, 9, 40, 200):
            assert_matches_probs(model, heldout[:n], temperature)


@pytest.mark.parametrize(("n_rows", "error"), [(0, ValueError), (4, ValueError),
                                               (-1, ValueError), (True, TypeError),
                                               (1.0, TypeError)])
def test_bad_n_rows_raise(n_rows, error) -> None:
    model = NGramModel(3, V).fit(CORPUS)
    with pytest.raises(error, match="n_rows"):
        model.last_probs(np.array([1, 2, 3]), n_rows)


def test_empty_tokens_raise() -> None:
    with pytest.raises(ValueError, match="n_rows"):
        NGramModel(3, V).fit(CORPUS).last_probs(np.array([], dtype=np.int64))


def test_before_fit_raises() -> None:
    with pytest.raises(ValueError, match="before fit"):
        NGramModel(3, V).last_probs(np.array([0, 1]))


@pytest.mark.parametrize(
    ("bad", "error"),
    [([0, V], ValueError), ([-1, 0], ValueError), ([[0, 1]], ValueError),
     ([0.0, 1.0], TypeError), ([True, False], TypeError)],
)
def test_bad_tokens_raise(bad: list, error: type) -> None:
    model = NGramModel(3, V).fit(CORPUS)
    with pytest.raises(error, match="tokens"):
        model.last_probs(np.array(bad))


class ProbsOnly:
    """Exposes only ``vocab_size`` and ``probs``, so the decoder takes the full-probs path."""

    def __init__(self, model: NGramModel) -> None:
        self.vocab_size = model.vocab_size
        self._model = model

    def probs(self, tokens: np.ndarray) -> np.ndarray:
        return self._model.probs(tokens)


@pytest.fixture(scope="module")
def pair() -> tuple[np.ndarray, NGramModel, NGramModel]:
    """A corpus [2000], an order-4 Witten–Bell target and an order-2 add-k draft."""
    ids = markov_corpus(2000, seed=1)  # [2000]
    return ids, NGramModel(4, V).fit(ids), NGramModel(2, V, smoothing="add-k").fit(ids[:500])


@pytest.mark.parametrize("wrapped", ["draft", "target", "both"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_speculative_decode_same_tokens(pair, temperature: float, wrapped: str) -> None:
    ids, target, draft = pair
    other_target = ProbsOnly(target) if wrapped in ("target", "both") else target
    other_draft = ProbsOnly(draft) if wrapped in ("draft", "both") else draft
    for seed, prompt in enumerate([[0], [1, 2], ids[100:110].tolist()]):
        fast = speculative_generate(target, draft, np.array(prompt), k=3, max_new_tokens=30,
                                    temperature=temperature, seed=seed)
        slow = speculative_generate(other_target, other_draft, np.array(prompt), k=3,
                                    max_new_tokens=30, temperature=temperature, seed=seed)
        assert len(fast.tokens) == 30
        np.testing.assert_array_equal(fast.tokens, slow.tokens)
        assert fast.steps == slow.steps
