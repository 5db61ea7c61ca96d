"""The numpy building blocks of the GPT forward, and the matrix-product path chosen for the
BLAS kernel this process loaded.

Why the kernel matters. numpy hands ``x @ w`` to OpenBLAS, which picks a kernel for the
CPU at load time. For a block of n = 2 or 3 rows times a weight matrix the kernels differ:

* ``SkylakeX`` (and its successors ``Cooperlake``, ``SapphireRapids``) has a small-matrix
  path that multiplies without copying w first, so one ``x @ w`` over n rows is cheapest;
* ``Haswell`` and ``Zen`` (most AMD and older Intel CPUs) first copy ("pack") all of w for
  every n > 1, so for 2 or 3 rows one matrix-vector product per row is cheaper.

:func:`blas_kernel` asks the loaded OpenBLAS for its kernel's name (``None`` where it
cannot: another BLAS, or no ``/proc``, as in the browser edition) and :data:`ROWWISE_MAX`
is the choice :func:`linear` makes by default. ``OPENBLAS_CORETYPE=Haswell`` in the
environment makes OpenBLAS load the Haswell kernel on any x86-64 CPU, so one machine can
measure both.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

LN_EPS = 1e-5
SMALL_MATRIX_KERNELS = frozenset({"SkylakeX", "Cooperlake", "SapphireRapids"})
CORENAME_SYMBOLS = ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                    "openblas_get_corename64_", "openblas_get_corename")


@functools.cache
def blas_kernel() -> str | None:
    """The kernel name the OpenBLAS loaded by numpy chose for this CPU, e.g. ``"SkylakeX"``
    or ``"Haswell"``; None where it cannot be asked."""
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower()})
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in CORENAME_SYMBOLS:
            if hasattr(lib, name):
                getattr(lib, name).restype = ctypes.c_char_p
                return getattr(lib, name)().decode()
    return None


@functools.cache
def cpu_vendor() -> str | None:
    """The CPU's vendor string (``"GenuineIntel"``, ``"AuthenticAMD"``, ...) from
    /proc/cpuinfo; None where it cannot be read."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("vendor_id"):
                    return line.partition(":")[2].strip() or None
    except OSError:
        pass
    return None


def rowwise_max_for(kernel: str | None) -> int:
    """How many rows :func:`linear` multiplies row by row under ``kernel``: 1 (never) for
    the kernels with a small-matrix path, else 3."""
    return 1 if kernel in SMALL_MATRIX_KERNELS else 3


ROWWISE_MAX = rowwise_max_for(blas_kernel())  # this process's choice (see the module doc)


def normalize(x: np.ndarray) -> np.ndarray:  # [n, d] -> [n, d]
    """(x - mean) / sqrt(var + eps) over the last axis: LayerNorm without gain and bias.

    The means are ``np.add.reduce`` then a division by d exactly as ``x.mean`` does it
    (bit-identical), without ``mean``'s Python-level overhead.
    """
    d = np.intp(x.shape[-1])
    mean = np.add.reduce(x, axis=-1, keepdims=True)
    np.true_divide(mean, d, out=mean, casting="unsafe")
    centred = x - mean
    var = np.add.reduce(np.square(centred), axis=-1, keepdims=True)
    np.true_divide(var, d, out=var, casting="unsafe")
    return centred / np.sqrt(var + LN_EPS)


@functools.lru_cache(maxsize=64)
def causal_bias(n: int) -> np.ndarray:  # [n, n]
    """0 where token i may attend token j <= i, -inf above the diagonal (read-only)."""
    bias = np.where(np.tri(n, dtype=bool), np.float32(0), np.float32(-np.inf))
    bias.flags.writeable = False
    return bias


def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray,
           rowwise_max: int | None = None) -> np.ndarray:  # [n, i] -> [n, o]
    """x @ w + b, with w [i, o] and b [o].

    Blocks of 2 .. ``rowwise_max`` rows (default :data:`ROWWISE_MAX`, chosen for the
    loaded BLAS kernel) go through numpy's stacked matmul, one matrix-vector product per
    row, which never packs w; other blocks are one ``x @ w``.
    """
    limit = ROWWISE_MAX if rowwise_max is None else rowwise_max
    if 1 < x.shape[0] <= limit:
        return np.matmul(x[:, None, :], w)[:, 0] + b
    return x @ w + b


def gelu(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the tanh approximation."""
    cube = x * x * x  # not x**3: float32 power is an order of magnitude slower
    return 0.5 * x * (1.0 + np.tanh(np.float32(0.7978845608) * (x + np.float32(0.044715) * cube)))


def fold_gain(gain: np.ndarray, shift: np.ndarray, w: np.ndarray,
              b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fold LayerNorm's affine part into the next linear map.

    (normalize(x) * gain + shift) @ w + b == normalize(x) @ (gain[:, None] * w) + (shift @ w + b)
    """
    return gain[:, None] * w, shift @ w + b  # [d, k], [k]
