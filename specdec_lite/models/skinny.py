"""The skinny-matrix kernel: a few rows times a weight matrix, every weight read once.

Verifying a draft multiplies n = k + 1 rows (a handful) by every weight matrix of the
target. A BLAS is built for large products: for one row it streams the matrix through a
matrix-vector kernel, and for a few rows it either repeats that per row or copies (packs)
the weights first. Both read the weights more than once, so T(n) grows with n long
before the arithmetic is the limit. This kernel reads each weight once for all n rows:

* :func:`pack` lays w [d_in, d_out] out as **tiles** [n_tiles, d_in, tile]: tile t holds
  output columns t*tile .. (t+1)*tile - 1, one contiguous run of ``tile`` weights per
  input, so the kernel reads memory in order;
* for each input i, the kernel loads the tile's ``tile`` weights into vector registers
  once, and every one of up to ``rows`` rows of x adds x[r, i] times them to its own
  running sums, which stay in registers for the whole tile (``rows`` x ``tile`` sums).

The tile and the row block are sized to the vector registers: with AVX-512's 32
registers, tiles of 32 columns and blocks of 6 rows (24 registers of sums, 4 of
weights); with AVX2's 16, tiles of 16 and 6 rows (12 + 2). More rows than a block take
several passes over the weights.

Why the code is generated. numba has no vector types: LLVM's SLP vectoriser packs a
row's ``tile`` sums into vector registers, when the code spells them out as separate
variables and the vectoriser is on (numba leaves it off by default). So
:func:`kernel_source` writes the kernels out, one function per row count; the module is
saved once in a cache directory and compiled with numba's on-disk cache, so a later
process loads it. Without numba (the browser edition, the core install), :func:`rows_times`
computes the same product with numpy over the same tiles.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..checks import check_int
from . import fast

#: (tile, rows) by the vector registers the CPU has: see the module doc.
SHAPE_AVX512 = (32, 6)
SHAPE_AVX2 = (16, 6)
BACKENDS = ("numba", "numpy")
_CONTRACT = {"contract"}  # fused multiply-add; no reassociation, so no sum is reordered
_LOCK = threading.Lock()


@functools.cache
def tile_shape() -> tuple[int, int]:
    """(tile, rows) for this CPU: :data:`SHAPE_AVX512` where LLVM reports ``avx512f``,
    else :data:`SHAPE_AVX2`."""
    try:
        import llvmlite.binding as llvm  # comes with numba
        features = llvm.get_host_cpu_features()
        wide = bool(features.get("avx512f")) and bool(features.get("avx512vl"))
    except (ImportError, RuntimeError):
        wide = False
    return SHAPE_AVX512 if wide else SHAPE_AVX2


@dataclass(frozen=True)
class Packed:
    """A weight matrix [d_in, d_out] and its bias laid out for the kernel.

    ``tiles`` [n_tiles, d_in, tile] and ``bias`` [n_tiles * tile] are zero past d_out."""

    tiles: np.ndarray
    bias: np.ndarray
    d_in: int
    d_out: int

    @property
    def tile(self) -> int:
        """Output columns per tile."""
        return self.tiles.shape[2]


def pack(w: np.ndarray, b: np.ndarray | None = None, tile: int | None = None) -> Packed:
    """w [d_in, d_out] (and b [d_out], zeros if None) as float32 tiles of ``tile`` output
    columns (default: :func:`tile_shape`'s), the last tile padded with zeros. Done once
    per weight matrix."""
    w = np.asarray(w)
    if w.ndim != 2 or w.size == 0:
        raise ValueError(f"w must be a non-empty 2-D matrix [d_in, d_out], got shape {w.shape}")
    tile = tile_shape()[0] if tile is None else check_int(tile, "tile", minimum=1)
    d_in, d_out = w.shape
    n_tiles = -(-d_out // tile)
    padded = np.zeros((d_in, n_tiles * tile), dtype=np.float32)  # [i, nt * tile]
    padded[:, :d_out] = w
    bias = np.zeros(n_tiles * tile, dtype=np.float32)  # [nt * tile]
    if b is not None:
        b = np.asarray(b)
        if b.shape != (d_out,):
            raise ValueError(f"b must have shape ({d_out},) to match w, got {b.shape}")
        bias[:d_out] = b
    tiles = np.ascontiguousarray(padded.reshape(d_in, n_tiles, tile).transpose(1, 0, 2))
    return Packed(tiles=tiles, bias=bias, d_in=d_in, d_out=d_out)


def pack_stacked(w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pack` for a stack of matrices w [..., d_in, d_out] and biases b [..., d_out]
    (a model's layers): tiles [..., n_tiles, d_in, tile] and biases [..., n_tiles * tile]."""
    w, b = np.asarray(w), np.asarray(b)
    if w.ndim < 2 or b.shape != w.shape[:-2] + w.shape[-1:]:
        raise ValueError(f"w [..., i, o] and b [..., o] must stack alike, got {w.shape}, {b.shape}")
    flat = [pack(wi, bi) for wi, bi in zip(w.reshape(-1, *w.shape[-2:]),
                                           b.reshape(-1, b.shape[-1]), strict=True)]
    tiles = np.stack([p.tiles for p in flat]).reshape(*w.shape[:-2], *flat[0].tiles.shape)
    bias = np.stack([p.bias for p in flat]).reshape(*b.shape[:-1], -1)
    return tiles, bias


# ---------------------------------------------------------------- the generated kernels


def kernel_source(tile: int, rows: int) -> str:
    """The Python source of the kernels for ``tile`` columns and blocks of up to ``rows``
    rows: ``rows_1`` .. ``rows_<rows>`` (each multiplies that many rows, from row r0, by
    every tile) and ``tile_rows(x, tiles, bias, out)``, which covers all of x's rows in
    blocks. Plain Python: numba compiles it in :func:`compiled`.

    Whoever changes this source must also touch ``fast.py``: the compiled forward links
    the kernel into its own kernels, and numba's disk cache of those is keyed by
    ``fast.py`` alone, so it would keep the old kernel otherwise."""
    tile, rows = check_int(tile, "tile", minimum=1), check_int(rows, "rows", minimum=1)
    lanes = range(tile)
    out = [f"# Generated by specdec_lite.models.skinny.kernel_source({tile}, {rows}).", ""]
    for m in range(1, rows + 1):
        out += [f"def rows_{m}(x, tiles, bias, out, r0):",
                "    n_tiles, d_in = tiles.shape[0], tiles.shape[1]",
                "    for t in range(n_tiles):",
                f"        b = bias[t * {tile}:(t + 1) * {tile}]"]
        out += [f"        s{r}_{j} = b[{j}]" for r in range(m) for j in lanes]
        out += ["        for i in range(d_in):",
                "            w = tiles[t, i]"]
        out += [f"            w{j} = w[{j}]" for j in lanes]
        for r in range(m):
            out.append(f"            x{r} = x[r0 + {r}, i]")
            out += [f"            s{r}_{j} += x{r} * w{j}" for j in lanes]
        for r in range(m):
            out.append(f"        o = out[r0 + {r}, t * {tile}:(t + 1) * {tile}]")
            out += [f"        o[{j}] = s{r}_{j}" for j in lanes]
        out.append("")
    out += ["def tile_rows(x, tiles, bias, out):",
            "    n = x.shape[0]",
            "    r0 = 0",
            "    while r0 < n:",
            f"        m = min({rows}, n - r0)"]
    for m in range(1, rows + 1):
        out += [f"        {'if' if m == 1 else 'elif'} m == {m}:",
                f"            rows_{m}(x, tiles, bias, out, r0)"]
    out += ["        r0 += m", ""]
    return "\n".join(out)


def cache_dir() -> Path:
    """Where the generated kernels are saved: ``$SPECDEC_LITE_CACHE``, else
    ``~/.cache/specdec_lite``, else a folder in the system's temporary directory."""
    for root in (os.environ.get("SPECDEC_LITE_CACHE"), Path.home() / ".cache" / "specdec_lite",
                 Path(tempfile.gettempdir()) / "specdec_lite"):
        if not root:
            continue
        path = Path(root) / "skinny"
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(path, os.W_OK):
            return path
    raise OSError("no writable cache directory for the skinny kernels; set SPECDEC_LITE_CACHE")


def _write_once(source: str, tile: int, rows: int) -> Path:
    """The source saved as a module named by its hash (so a changed generator never
    loads a stale file), written atomically."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    path = cache_dir() / f"skinny_t{tile}_r{rows}_{digest}.py"
    if not path.exists():
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(source)
        os.replace(partial, path)
    return path


@functools.cache
def compiled(tile: int, rows: int) -> Callable:
    """``tile_rows`` for (tile, rows), compiled by numba with the SLP vectoriser on
    (ImportError without numba). The first call in a process compiles or loads it."""
    numba = fast.numba_module()
    if numba is None:
        raise ImportError(f"the skinny kernel needs numba: {fast.INSTALL_HINT}")
    from numba.core import config
    from numba.core.compiler_lock import global_compiler_lock

    path = _write_once(kernel_source(tile, rows), tile, rows)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # numba's cache finds the kernels' globals by module name
    spec.loader.exec_module(module)
    f32 = numba.float32
    arrays = (f32[:, ::1], f32[:, :, ::1], f32[::1], f32[:, ::1])
    options = {"cache": True, "nogil": True, "fastmath": _CONTRACT}
    with _LOCK, global_compiler_lock:
        saved, config.SLP_VECTORIZE = config.SLP_VECTORIZE, 1
        try:
            for m in range(1, rows + 1):  # tile_rows resolves these through the module
                name = f"rows_{m}"
                kernel = numba.njit(numba.void(*arrays, numba.int64), **options)
                setattr(module, name, kernel(getattr(module, name)))
            return numba.njit(numba.void(*arrays), **options)(module.tile_rows)
        finally:
            config.SLP_VECTORIZE = saved


def kernel_backend() -> str:
    """How :func:`rows_times` runs here by default: ``"numba"`` or ``"numpy"``."""
    return "numba" if fast.available() else "numpy"


def rows_times(x: np.ndarray, packed: Packed, backend: str | None = None,
               rows: int | None = None) -> np.ndarray:  # [n, i] -> [n, o]
    """x @ w + b for x [n, d_in] and ``packed = pack(w, b)``.

    ``backend``: ``"numba"`` (the register-blocked kernel), ``"numpy"`` (one BLAS product
    per tile, the same tiles) or None for :func:`kernel_backend`; ``rows``: the row block
    (default :func:`tile_shape`'s)."""
    if not isinstance(packed, Packed):
        raise TypeError(f"packed must come from skinny.pack, got {type(packed).__name__}")
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] != packed.d_in:
        raise ValueError(f"x must be [n, {packed.d_in}] with n >= 1, got shape {x.shape}")
    backend = kernel_backend() if backend is None else backend
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    rows = tile_shape()[1] if rows is None else check_int(rows, "rows", minimum=1)
    x = np.ascontiguousarray(x, dtype=np.float32)
    n, (n_tiles, _, tile) = x.shape[0], packed.tiles.shape
    if backend == "numpy":
        out = np.matmul(x, packed.tiles)  # [nt, n, tile]
        out = out.transpose(1, 0, 2).reshape(n, n_tiles * tile) + packed.bias
    else:
        out = np.empty((n, n_tiles * tile), dtype=np.float32)  # [n, nt * tile]
        compiled(tile, rows)(x, packed.tiles, packed.bias, out)
    return out if packed.d_out == out.shape[1] else np.ascontiguousarray(out[:, :packed.d_out])
