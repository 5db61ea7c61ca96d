"""Model contract tests: TableModel, MarkovModel and NGramModel against brute force.

NGramModel is compared with a direct pure-Python transcription of the formulas in
its docstring (Witten–Bell interpolation and add-k), on a small random corpus,
for every position of a query sequence, including the first positions where
fewer than order − 1 tokens of history exist (the longest available context
is used there).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from specdec_lite import (
    FastModel,
    MarkovModel,
    Model,
    NGramModel,
    TableModel,
    generate,
    speculative_generate,
)
from specdec_lite.models.ngram import check_model, model_rows

V = 5


def brute_counts(ids: list[int], max_m: int) -> list[Counter]:
    """counts[m][(context tuple, next)] for every context length m = 0..max_m."""
    counts = [Counter() for _ in range(max_m + 1)]
    for m in range(max_m + 1):
        for s in range(len(ids) - m):
            counts[m][(tuple(ids[s : s + m]), ids[s + m])] += 1
    return counts


def brute_probs(
    ids: list[int], tokens: list[int], order: int, smoothing: str, add_k: float = 0.1
) -> np.ndarray:
    counts = brute_counts(ids, order - 1)
    out = []
    for i in range(len(tokens)):
        history = tokens[: i + 1]
        longest = min(order - 1, len(history))
        if smoothing == "add-k":
            m = longest
            h = tuple(history[len(history) - m :]) if m else ()
            c_h = sum(c for (ctx, _), c in counts[m].items() if ctx == h)
            row = [(counts[m][(h, x)] + add_k) / (c_h + add_k * V) for x in range(V)]
        else:
            row = [1.0 / V] * V
            for m in range(longest + 1):
                h = tuple(history[len(history) - m :]) if m else ()
                c_h = sum(c for (ctx, _), c in counts[m].items() if ctx == h)
                u_h = sum(1 for (ctx, _), c in counts[m].items() if ctx == h and c > 0)
                if c_h > 0:
                    row = [(counts[m][(h, x)] + u_h * row[x]) / (c_h + u_h) for x in range(V)]
        out.append(row)
    return np.array(out)


@pytest.fixture(scope="module")
def corpus() -> list[int]:
    rng = np.random.default_rng(0)
    # skewed and context-dependent, so that some contexts are unseen at higher orders
    trans = rng.dirichlet(np.full(V, 0.3), size=V)
    ids = [0]
    for _ in range(150):
        ids.append(int(rng.choice(V, p=trans[ids[-1]])))
    return ids


@pytest.mark.parametrize("smoothing", ["witten-bell", "add-k"])
@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_ngram_matches_brute_force(corpus, order, smoothing):
    model = NGramModel(order, V, smoothing=smoothing, add_k=0.3).fit(np.array(corpus))
    rng = np.random.default_rng(order)
    for tokens in ([3], [4, 4], corpus[:12], rng.integers(0, V, size=15).tolist()):
        got = model.probs(np.array(tokens))
        assert got.shape == (len(tokens), V)
        want = brute_probs(corpus, tokens, order, smoothing, add_k=0.3)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-12)
        assert np.all(got > 0)


def test_ngram_row_i_depends_only_on_prefix(corpus):
    """Row i after tokens[:i+1] is the same whether or not later tokens are present."""
    model = NGramModel(3, V).fit(np.array(corpus))
    full = model.probs(np.array(corpus[:20]))
    for i in (0, 1, 2, 7, 19):
        np.testing.assert_allclose(model.probs(np.array(corpus[: i + 1]))[-1], full[i])


def test_ngram_fit_shorter_than_order():
    """A corpus shorter than the order must not crash: higher orders simply have no counts."""
    model = NGramModel(5, 3).fit(np.array([0, 1, 2]))
    got = model.probs(np.array([0, 1, 2, 0, 1]))
    want = brute_probs_v([0, 1, 2], [0, 1, 2, 0, 1], 5, 3)
    np.testing.assert_allclose(got, want)


def brute_probs_v(ids, tokens, order, vocab):
    global V
    saved, V = V, vocab
    try:
        return brute_probs(ids, tokens, order, "witten-bell")
    finally:
        V = saved


def test_ngram_errors():
    with pytest.raises(ValueError, match="before fit"):
        NGramModel(2, V).probs(np.array([0]))
    with pytest.raises(ValueError, match="order"):
        NGramModel(0, V)
    with pytest.raises(ValueError, match="smoothing"):
        NGramModel(2, V, smoothing="kneser-ney")
    with pytest.raises(ValueError, match="add_k"):
        NGramModel(2, V, smoothing="add-k", add_k=0)
    with pytest.raises(ValueError, match="token_ids"):
        NGramModel(2, V).fit(np.array([0, 7]))
    with pytest.raises(ValueError, match="tokens"):
        NGramModel(2, V).fit(np.array([0, 1, 2])).probs(np.array([5]))


def test_table_model():
    table = np.array([0.1, 0.2, 0.3, 0.4])
    model = TableModel(table)
    assert isinstance(model, Model) and model.vocab_size == 4
    rows = model.probs(np.array([0, 3, 2]))
    assert rows.shape == (3, 4)
    np.testing.assert_array_equal(rows, np.tile(table, (3, 1)))
    rows[0, 0] = 9.0  # returned rows are a copy
    assert model.table[0] == 0.1
    with pytest.raises(ValueError, match="table"):
        TableModel(np.array([0.5, 0.6]))
    with pytest.raises(ValueError, match="table"):
        TableModel(np.full((2, 2), 0.5))


def test_markov_model():
    trans = np.random.default_rng(3).dirichlet(np.ones(4), size=4)
    model = MarkovModel(trans)
    assert isinstance(model, Model) and model.vocab_size == 4
    tokens = np.array([2, 0, 3, 3])
    np.testing.assert_array_equal(model.probs(tokens), trans[tokens])
    with pytest.raises(ValueError, match="transition"):
        MarkovModel(np.full((2, 3), 1 / 3))
    with pytest.raises(ValueError, match="tokens"):
        model.probs(np.array([4]))
    with pytest.raises(ValueError, match="tokens"):
        model.probs(np.array([-1]))


# ---------------------------------------------------------------- the contract's checks


class FastTable:
    """A fast-path model whose ``last_probs`` breaks the contract in one way (``kind``)."""

    vocab_size = 4

    def __init__(self, kind: str, trusted: bool = False) -> None:
        self.kind, self.trusted_rows = kind, trusted

    def probs(self, tokens: np.ndarray) -> np.ndarray:
        return np.full((len(tokens), 4), 0.25)

    def last_probs(self, tokens: np.ndarray, n_rows: int = 1,
                   temperature: float = 1.0) -> np.ndarray:
        rows = np.full((n_rows, 4), 0.25)  # [n_rows, V]
        if self.kind == "nan":
            rows[-1, 0] = np.nan
        elif self.kind == "sum":
            rows[-1] = [0.5, 0.1, 0.1, 0.1]
        elif self.kind == "negative":
            rows[-1] = [1.5, -0.5, 0.0, 0.0]
        elif self.kind == "rows":
            rows = rows[:-1]
        elif self.kind == "width":
            rows = np.full((n_rows, 5), 0.2)
        elif self.kind == "list":
            rows = rows.tolist()
        return rows


def test_protocols_describe_the_library_models() -> None:
    ngram = NGramModel(2, V).fit(np.array([0, 1, 2, 3, 4, 0]))
    table = TableModel(np.full(V, 1 / V))
    assert isinstance(ngram, FastModel) and isinstance(ngram, Model)
    assert isinstance(table, Model) and not isinstance(table, FastModel)
    assert check_model(ngram, "target") == V
    with pytest.raises(TypeError, match="draft"):
        check_model(object(), "draft")


@pytest.mark.parametrize("kind", ["nan", "sum", "negative", "rows", "width", "list"])
def test_model_rows_checks_the_fast_path(kind: str) -> None:
    with pytest.raises(ValueError, match="target.last_probs"):
        model_rows(FastTable(kind), np.array([0, 1]), 1, "target", 1.0)
    with pytest.raises(ValueError, match="target.last_probs"):
        speculative_generate(FastTable(kind), TableModel(np.full(4, 0.25)), [0], k=2,
                             max_new_tokens=4, seed=0)
    with pytest.raises(ValueError, match="model.last_probs"):
        generate(FastTable(kind), [0], max_new_tokens=3, seed=0)


def test_trusted_rows_skip_only_the_value_check() -> None:
    rows = model_rows(FastTable("sum", trusted=True), np.array([0, 1]), 1, "target", 1.0)
    assert rows.shape == (1, 4)  # trusted: the values are taken as they are
    with pytest.raises(ValueError, match="shape"):
        model_rows(FastTable("rows", trusted=True), np.array([0, 1]), 2, "target", 1.0)
    good = model_rows(FastTable("ok"), np.array([0, 1]), 2, "target", 1.0)
    np.testing.assert_array_equal(good, np.full((2, 4), 0.25))

