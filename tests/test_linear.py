"""transformer.linear: x @ w + b on both paths (row by row up to ROWWISE_MAX rows, else one
matmul), and a forward over a small block after a cached prefix equals one token at a time."""

from __future__ import annotations

import numpy as np
import pytest
from test_transformer import CONFIG, random_params

from specdec_lite.transformer import ROWWISE_MAX, TransformerModel, linear

ROWS = [1, 2, 3, 4, 5, 6, 7, 8]


def test_rows_cover_both_paths() -> None:
    assert 2 <= ROWWISE_MAX < max(ROWS)
    assert {2, 3} <= {n for n in ROWS if 1 < n <= ROWWISE_MAX}


@pytest.mark.parametrize("n", ROWS)
@pytest.mark.parametrize(("d_in", "d_out"), [(32, 96), (128, 32), (5, 1)])
def test_linear_equals_matmul(n: int, d_in: int, d_out: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, d_in)).astype(np.float32)  # [n, d_in]
    w = rng.standard_normal((d_in, d_out)).astype(np.float32)  # [d_in, d_out]
    b = rng.standard_normal(d_out).astype(np.float32)  # [d_out]
    out = linear(x, w, b)  # [n, d_out]
    assert out.shape == (n, d_out) and out.dtype == np.float32
    np.testing.assert_allclose(out, x @ w + b, rtol=1e-5, atol=1e-5)
    want = x.astype(np.float64) @ w.astype(np.float64) + b  # [n, d_out], exact reference
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [2, 3])
def test_linear_non_contiguous_input(n: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 2 * n)).astype(np.float32).T[:, ::2]  # [2n, 8] view
    x = x[:n]  # [n, 8], strided
    w = rng.standard_normal((8, 24)).astype(np.float32)  # [8, 24]
    b = rng.standard_normal(24).astype(np.float32)  # [24]
    assert not x.flags.c_contiguous
    np.testing.assert_allclose(linear(x, w, b), x @ w + b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("block", [2, 3, 4])
@pytest.mark.parametrize("prefix_len", [1, 9])
def test_block_after_prefix_equals_one_at_a_time(prefix_len: int, block: int) -> None:
    ids = np.random.default_rng(prefix_len).integers(0, CONFIG.vocab_size, prefix_len + block)
    prefix, new = ids[:prefix_len], ids[prefix_len:]  # [prefix_len], [block]
    blocked = TransformerModel(CONFIG, random_params(CONFIG))
    blocked.forward(prefix)
    got = blocked.forward(new)  # logits [block, V], hidden [block, d]
    single = TransformerModel(CONFIG, random_params(CONFIG))
    single.forward(prefix)
    steps = [single.forward(new[i : i + 1]) for i in range(block)]
    np.testing.assert_allclose(got.logits, np.concatenate([s.logits for s in steps]), atol=1e-4)
    np.testing.assert_allclose(got.hidden, np.concatenate([s.hidden for s in steps]), atol=1e-4)
    assert got.logits.shape == (block, CONFIG.vocab_size) and got.logits.dtype == np.float32
    assert blocked.cache.length == single.cache.length == prefix_len + block
    np.testing.assert_allclose(blocked.cache.kv, single.cache.kv, atol=1e-5)
