"""kernels.linear: x @ w + b on both paths (row by row for blocks of 2 .. rowwise_max rows,
else one matmul), whatever the loaded BLAS kernel chose, and a forward over a small block
after a cached prefix equals one token at a time."""

from __future__ import annotations

import numpy as np
import pytest
from support import CONFIG, random_params

from specdec_lite.models import kernels, transformer
from specdec_lite.models.kernels import linear
from specdec_lite.models.transformer import TransformerModel

ROWS = [1, 2, 3, 4, 5, 6, 7, 8, 9]
# 1: never row by row (the SkylakeX choice); 3: the Haswell/Zen choice; 8: a wider band
# than either, so rows 4 .. 8 take the row-by-row path too.
ROWWISE_LIMITS = [1, 3, 8]


def rowwise_rows(limit: int) -> set[int]:
    """The block sizes in ROWS that ``linear(..., rowwise_max=limit)`` multiplies row by row."""
    return {n for n in ROWS if 1 < n <= limit}


def test_rows_cover_both_paths_for_each_limit() -> None:
    assert rowwise_rows(1) == set()
    assert rowwise_rows(3) == {2, 3}
    assert rowwise_rows(8) == set(range(2, 9))
    assert all(max(ROWS) > limit for limit in ROWWISE_LIMITS)  # every limit also sees matmul


def test_transformer_reexports_the_building_blocks() -> None:
    assert transformer.linear is kernels.linear
    assert transformer.normalize is kernels.normalize
    assert transformer.gelu is kernels.gelu
    assert transformer.causal_bias is kernels.causal_bias
    assert transformer.LN_EPS == kernels.LN_EPS == 1e-5


def data(n: int, d_in: int, d_out: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d_in)).astype(np.float32)  # [n, d_in]
    w = rng.standard_normal((d_in, d_out)).astype(np.float32)  # [d_in, d_out]
    b = rng.standard_normal(d_out).astype(np.float32)  # [d_out]
    return x, w, b


@pytest.mark.parametrize("rowwise_max", ROWWISE_LIMITS)
@pytest.mark.parametrize("n", ROWS)
@pytest.mark.parametrize(("d_in", "d_out"), [(32, 96), (128, 32), (5, 1)])
def test_linear_equals_float64_reference(n: int, d_in: int, d_out: int, rowwise_max: int) -> None:
    x, w, b = data(n, d_in, d_out, seed=n)
    out = linear(x, w, b, rowwise_max=rowwise_max)  # [n, d_out]
    assert out.shape == (n, d_out) and out.dtype == np.float32
    np.testing.assert_allclose(out, x @ w + b, rtol=1e-5, atol=1e-5)
    want = x.astype(np.float64) @ w.astype(np.float64) + b  # [n, d_out], exact reference
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_the_default_limit_is_the_module_choice(n: int, monkeypatch) -> None:
    """Without ``rowwise_max``, linear reads kernels.ROWWISE_MAX when called: patched to
    each limit, the result is that limit's, bit for bit."""
    x, w, b = data(n, 64, 48, seed=10 + n)
    for limit in ROWWISE_LIMITS:
        monkeypatch.setattr(kernels, "ROWWISE_MAX", limit)
        np.testing.assert_array_equal(linear(x, w, b), linear(x, w, b, rowwise_max=limit))


@pytest.mark.parametrize("rowwise_max", ROWWISE_LIMITS)
@pytest.mark.parametrize("n", [2, 3])
def test_linear_non_contiguous_input(n: int, rowwise_max: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 2 * n)).astype(np.float32).T[:, ::2]  # [2n, 8] view
    x = x[:n]  # [n, 8], strided
    w = rng.standard_normal((8, 24)).astype(np.float32)  # [8, 24]
    b = rng.standard_normal(24).astype(np.float32)  # [24]
    assert not x.flags.c_contiguous
    want = x.astype(np.float64) @ w.astype(np.float64) + b  # [n, 24]
    np.testing.assert_allclose(linear(x, w, b, rowwise_max=rowwise_max), want,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rowwise_max", [1, 3])
@pytest.mark.parametrize("block", [2, 3, 4])
@pytest.mark.parametrize("prefix_len", [1, 9])
def test_block_after_prefix_equals_one_at_a_time(prefix_len: int, block: int, rowwise_max: int,
                                                 monkeypatch) -> None:
    """The numpy forward under each kernel's choice (the model calls ``linear`` without a
    limit, so the module's choice is patched)."""
    monkeypatch.setattr(kernels, "ROWWISE_MAX", rowwise_max)
    ids = np.random.default_rng(prefix_len).integers(0, CONFIG.vocab_size, prefix_len + block)
    prefix, new = ids[:prefix_len], ids[prefix_len:]  # [prefix_len], [block]
    blocked = TransformerModel(CONFIG, random_params(CONFIG)).bound()  # on a cache of its own
    blocked.forward(prefix)
    got = blocked.forward(new)  # logits [block, V], hidden [block, d]
    single = TransformerModel(CONFIG, random_params(CONFIG)).bound()
    single.forward(prefix)
    steps = [single.forward(new[i : i + 1]) for i in range(block)]
    np.testing.assert_allclose(got.logits, np.concatenate([s.logits for s in steps]), atol=1e-4)
    np.testing.assert_allclose(got.hidden, np.concatenate([s.hidden for s in steps]), atol=1e-4)
    assert got.logits.shape == (block, CONFIG.vocab_size) and got.logits.dtype == np.float32
    assert blocked.cache.length == single.cache.length == prefix_len + block
    np.testing.assert_allclose(blocked.cache.kv, single.cache.kv, atol=1e-5)
