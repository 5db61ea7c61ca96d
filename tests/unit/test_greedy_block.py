"""TransformerModel.greedy_block and the decoders' greedy drafting through it: the same
tokens, the same trace and the same call counts as drafting one probability row per token."""

from __future__ import annotations

import numpy as np
import pytest
from support import CONFIG, random_params

from specdec_lite import load_pretrained, speculative_generate
from specdec_lite.engine.decode import draft_block
from specdec_lite.models import fast
from specdec_lite.models.transformer import TransformerModel


class RowsOnly:
    """A model that answers ``probs``/``last_probs`` like ``model`` but has no
    ``greedy_block``, so the decoders draft it one row per token."""

    trusted_rows = True

    def __init__(self, model: TransformerModel) -> None:
        self.model, self.vocab_size, self.config = model, model.vocab_size, model.config

    def probs(self, tokens):
        return self.model.probs(tokens)

    def last_probs(self, tokens, n_rows=1, temperature=1.0):
        return self.model.last_probs(tokens, n_rows, temperature)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("k", [0, 1, 4])
def test_greedy_block_equals_k_argmax_rows(backend: str, k: int) -> None:
    if backend == "numba" and not fast.available():
        pytest.skip(f"needs {fast.INSTALL_HINT}")
    params = random_params(CONFIG)
    blocked = TransformerModel(CONFIG, params, backend=backend).bound()  # its cache is read
    rows = TransformerModel(CONFIG, params, backend=backend)
    prompt = np.random.default_rng(k).integers(0, CONFIG.vocab_size, 7)  # [7]
    got = blocked.greedy_block(prompt, k)  # [k]
    seq = prompt.copy()
    for _ in range(k):
        row = rows.last_probs(seq, 1, 0.0)[0]  # [V] one-hot of the first argmax
        seq = np.append(seq, int(row.argmax()))
    assert got.dtype == np.int64 and got.tolist() == seq[len(prompt):].tolist()
    # the last token is left for the next sync: the cache holds prompt + k - 1 tokens
    # (and k = 0 reads nothing at all)
    assert blocked.cache.length == (len(prompt) + k - 1 if k else 0)


def test_greedy_block_refuses_to_pass_the_window() -> None:
    model = TransformerModel(CONFIG, random_params(CONFIG))
    prompt = np.zeros(CONFIG.max_len - 2, dtype=np.int64)
    assert model.greedy_block(prompt, 3).shape == (3,)  # reads exactly max_len tokens
    with pytest.raises(ValueError, match="k"):
        model.greedy_block(prompt, 4)
    with pytest.raises(ValueError, match="k"):
        model.greedy_block(prompt, -1)


def test_draft_block_greedy_path_equals_row_path() -> None:
    params = random_params(CONFIG)
    draft = TransformerModel(CONFIG, params)
    seq = np.random.default_rng(3).integers(0, CONFIG.vocab_size, 9)  # [9]
    rng = np.random.default_rng(0)
    ctx, q = draft_block(draft, seq, 5, 0.0, None, None, rng)
    ctx_rows, q_rows = draft_block(RowsOnly(TransformerModel(CONFIG, params)), seq, 5, 0.0,
                                   None, None, rng)
    np.testing.assert_array_equal(ctx, ctx_rows)
    np.testing.assert_array_equal(q, q_rows)  # one-hot rows of the drafted tokens


def test_a_bad_greedy_block_answer_is_refused() -> None:
    class Broken(RowsOnly):
        def greedy_block(self, tokens, k):
            return np.full(k, self.vocab_size)  # out of range

    draft = Broken(TransformerModel(CONFIG, random_params(CONFIG)))
    with pytest.raises(ValueError, match="greedy_block"):
        draft_block(draft, np.zeros(3, dtype=np.int64), 2, 0.0, None, None,
                    np.random.default_rng(0))


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_speculative_greedy_trace_is_the_same_with_and_without_the_block(backend: str) -> None:
    if backend == "numba" and not fast.available():
        pytest.skip(f"needs {fast.INSTALL_HINT}")
    models = load_pretrained(backend=backend)
    prompt = np.array(models.tokenizer.encode("    def close(self):\n        if self."))
    runs = []
    for wrap in (lambda m: m, RowsOnly):
        runs.append(speculative_generate(models.target, wrap(models.draft), prompt, k=4,
                                         max_new_tokens=40, temperature=0.0, rule="greedy"))
    a, b = runs
    np.testing.assert_array_equal(a.tokens, b.tokens)
    assert a.steps == b.steps
    assert (a.n_target_calls, a.n_draft_calls) == (b.n_target_calls, b.n_draft_calls)
    assert 0 < a.n_accepted < a.n_proposed  # both accepted and rejected drafts were seen
