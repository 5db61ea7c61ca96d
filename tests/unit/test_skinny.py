"""specdec_lite.models.skinny: the layout against hand-placed weights, the product against a
float64 reference for every row count across the row blocks and a last tile that needs
padding, on both backends and several (tile, rows) shapes; the compiled code's vector
instructions (the SLP vectoriser was on); the cached module; bad inputs."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from support import imports_module

from specdec_lite.models import fast, skinny

needs_numba = pytest.mark.skipif(not fast.available(), reason=f"needs {fast.INSTALL_HINT}")
BACKENDS = ["numpy", pytest.param("numba", marks=needs_numba)]


def _layer(n: int, d_in: int, d_out: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, d_in)).astype(np.float32),
            rng.standard_normal((d_in, d_out)).astype(np.float32),
            rng.standard_normal(d_out).astype(np.float32))


def test_pack_puts_each_weight_in_its_tile_and_pads_with_zeros():
    w = np.arange(15, dtype=np.float32).reshape(3, 5)  # [d_in 3, d_out 5]
    b = np.arange(5, dtype=np.float32) + 100
    packed = skinny.pack(w, b, tile=2)  # 3 tiles of 2 columns, the last half empty
    assert packed.tiles.shape == (3, 3, 2) and packed.tiles.dtype == np.float32
    assert packed.tiles.flags.c_contiguous and (packed.d_in, packed.d_out, packed.tile) == (3, 5, 2)
    for t in range(3):
        for i in range(3):
            for j in range(2):
                col = 2 * t + j
                assert packed.tiles[t, i, j] == (w[i, col] if col < 5 else 0.0)
    np.testing.assert_array_equal(packed.bias, [100, 101, 102, 103, 104, 0])
    np.testing.assert_array_equal(skinny.pack(w, tile=5).bias, np.zeros(5))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("tile, rows", [(4, 3), (8, 2), (None, None)])
def test_rows_times_equals_the_float64_product_for_every_row_count(backend, tile, rows):
    x, w, b = _layer(13, 37, 21, seed=3)  # 21 columns: the last tile is padded
    packed = skinny.pack(w, b, tile=tile)
    block = skinny.tile_shape()[1] if rows is None else rows
    for n in range(1, 13):  # every remainder of every block size used here
        out = skinny.rows_times(x[:n], packed, backend=backend, rows=block)
        assert out.shape == (n, 21) and out.dtype == np.float32 and out.flags.c_contiguous
        np.testing.assert_allclose(out, x[:n].astype(np.float64) @ w + b, rtol=1e-4, atol=1e-4)


@needs_numba
def test_both_backends_agree_on_the_default_shape():
    x, w, b = _layer(7, 192, 768, seed=1)
    packed = skinny.pack(w, b)
    np.testing.assert_allclose(skinny.rows_times(x, packed, backend="numba"),
                               skinny.rows_times(x, packed, backend="numpy"), rtol=1e-4, atol=1e-4)


@needs_numba
@pytest.mark.skipif(not re.match(r"(x86_64|AMD64|i[3-6]86)", __import__("platform").machine()),
                    reason="checks x86 vector instructions")
def test_the_compiled_kernel_multiplies_whole_vectors(tmp_path, monkeypatch):
    """The kernel is fast only if LLVM packed each row's sums into vector registers: its
    machine code must hold packed fused multiply-adds (``vfmadd...ps``), not one scalar
    ``vfmadd...ss`` per sum, which is what it compiles to with the SLP vectoriser off."""
    monkeypatch.setenv("SPECDEC_LITE_CACHE", str(tmp_path))  # compiled now, so inspectable
    skinny.compiled.cache_clear()
    try:
        kernel = skinny.compiled(8, 2)
        x, w, b = _layer(2, 16, 8)
        packed = skinny.pack(w, b, tile=8)
        out = np.empty((2, 8), dtype=np.float32)
        kernel(x, packed.tiles, packed.bias, out)
        np.testing.assert_allclose(out, x.astype(np.float64) @ w + b, rtol=1e-4, atol=1e-4)
        module = sys.modules[kernel.py_func.__module__]
        asm = "\n".join(module.rows_2.inspect_asm().values())
        packed_fma = re.findall(r"vfmadd\w*ps\s[^\n]*%[yz]mm", asm)
        scalar_fma = re.findall(r"vfmadd\w*ss\s", asm)
        assert len(packed_fma) >= 2 and len(packed_fma) > len(scalar_fma), (packed_fma, scalar_fma)
    finally:
        skinny.compiled.cache_clear()


def test_the_generated_module_is_written_once_and_named_by_its_source(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDEC_LITE_CACHE", str(tmp_path))
    assert skinny.cache_dir() == tmp_path / "skinny"
    source = skinny.kernel_source(4, 2)
    first = skinny._write_once(source, 4, 2)
    assert first.read_text() == source and first.parent == tmp_path / "skinny"
    assert skinny._write_once(source, 4, 2) == first
    assert skinny._write_once(skinny.kernel_source(4, 3), 4, 3) != first
    assert sorted(p.suffix for p in first.parent.iterdir()) == [".py", ".py"]  # no partial file
    compile(source, "kernel", "exec")  # valid Python
    assert source.count("def rows_") == 2 and "def tile_rows(" in source


def test_tile_shape_fits_the_vector_registers():
    tile, rows = skinny.tile_shape()
    assert (tile, rows) in (skinny.SHAPE_AVX512, skinny.SHAPE_AVX2)
    registers = 32 if (tile, rows) == skinny.SHAPE_AVX512 else 16
    assert rows * tile // 8 + tile // 8 <= registers  # sums and weights, 8 floats a register


def test_importing_skinny_does_not_import_numba():
    assert not imports_module("import specdec_lite.models.skinny", "numba")


def test_rows_times_without_numba_uses_numpy(monkeypatch):
    x, w, b = _layer(3, 16, 8)
    packed = skinny.pack(w, b)
    monkeypatch.setattr(fast, "numba_module", lambda: None)
    assert skinny.kernel_backend() == "numpy"
    np.testing.assert_allclose(skinny.rows_times(x, packed), x @ w + b, rtol=1e-5, atol=1e-5)
    with pytest.raises(ImportError, match="numba"):
        skinny.compiled.__wrapped__(32, 6)


@pytest.mark.parametrize("call, error, match", [
    (lambda x, w, p: skinny.rows_times(x, w), TypeError, "packed must come from skinny.pack"),
    (lambda x, w, p: skinny.rows_times(x[:, :7], p), ValueError, r"x must be \[n, 16\]"),
    (lambda x, w, p: skinny.rows_times(x[:0], p), ValueError, "n >= 1"),
    (lambda x, w, p: skinny.rows_times(x[0], p), ValueError, "x must be"),
    (lambda x, w, p: skinny.rows_times(x, p, backend="fortran"), ValueError, "backend"),
    (lambda x, w, p: skinny.rows_times(x, p, rows=0), ValueError, "rows must be >= 1"),
    (lambda x, w, p: skinny.pack(np.ones(3)), ValueError, "w must be"),
    (lambda x, w, p: skinny.pack(w, tile=0), ValueError, "tile must be >= 1"),
    (lambda x, w, p: skinny.pack(w, tile=2.0), TypeError, "tile"),
    (lambda x, w, p: skinny.pack(w, np.ones(3)), ValueError, r"b must have shape \(8,\)"),
    (lambda x, w, p: skinny.kernel_source(0, 2), ValueError, "tile"),
])
def test_bad_inputs_name_the_parameter(call, error, match):
    x, w, _ = _layer(2, 16, 8)
    with pytest.raises(error, match=match):
        call(x, w, skinny.pack(w))
