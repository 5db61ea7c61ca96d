"""Which matrix-product path a block of n rows takes in the compiled forward.

:func:`specdec_lite.models.fast.linear_rows` reads a ``paths`` tuple (rowwise_max,
own_mask, small_mnk):

* ``own_mask``: bit n set means blocks of n rows go through the skinny kernel
  (:mod:`specdec_lite.models.skinny`), which reads each weight once for all the rows;
* ``rowwise_max``: other blocks of 2 .. rowwise_max rows multiply row by row (a BLAS
  kernel that packs its weights for every product of more rows, such as Haswell);
* ``small_mnk``: past this many multiply-adds, blocks of up to ``CHUNK_ROWS_MAX`` rows go
  in chunks that each stay on the small-matrix path of a SkylakeX-class kernel;
* everything else is one BLAS call.

The first is measured, not looked up. Whether a few rows run faster through the skinny
kernel or through the BLAS depends on the processor, the BLAS kernel and where the
weights sit (a product timed alone keeps its matrix in the L2 cache; inside a forward the
next matrix comes from further away), so :func:`measure_own_mask` times the model's own
forward both ways at every n up to :data:`OWN_ROWS_LIMIT` when it is compiled, and keeps
the faster path for each n. The other two follow the BLAS kernel
(:func:`matmul_paths`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from . import kernels

#: Blocks of up to this many rows may take the skinny kernel (a verification block or a
#: Medusa tree; a prompt takes the BLAS).
OWN_ROWS_LIMIT = 16
#: own_mask of :func:`matmul_paths`: "measure it on the model" (:func:`measure_own_mask`).
MEASURE = -1
# OpenBLAS's small-matrix path (SkylakeX class) takes an sgemm of M N K up to about 1e6
# without packing; past it, the product packs w and costs several times more.
SMALL_MNK = 1_000_000

Paths = tuple[int, int, int]


def matmul_paths(kernel: str | None, vendor: str | None = None) -> Paths:
    """(rowwise_max, :data:`MEASURE`, small_mnk) for the loaded BLAS ``kernel``:
    :func:`specdec_lite.models.kernels.rowwise_max_for` and, for kernels with a
    small-matrix path, :data:`SMALL_MNK`. ``vendor`` is not used: the measurement decides
    the skinny kernel's rows on every CPU."""
    small = SMALL_MNK if kernel in kernels.SMALL_MATRIX_KERNELS else 0
    return kernels.rowwise_max_for(kernel), MEASURE, small


def own_rows(own_mask: int) -> list[int]:
    """The block sizes ``own_mask`` sends to the skinny kernel, ascending."""
    return [n for n in range(1, 63) if own_mask > 0 and (own_mask >> n) & 1]


def _seconds(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure_own_mask(forward: Callable[[int, Paths], object], paths: Paths,
                     limit: int = OWN_ROWS_LIMIT, repeats: int = 5) -> int:
    """own_mask for ``paths``: bit n set where ``forward(n, paths)`` (one forward of n
    new rows) was faster with blocks of n rows on the skinny kernel than on the BLAS
    paths of ``paths``, n = 1 .. ``limit``; the fastest of ``repeats`` alternating runs
    each. Timings of this machine, now: about 160 forwards."""
    blas = (paths[0], 0, paths[2])
    mask = 0
    for n in range(1, limit + 1):
        own = (paths[0], 1 << n, paths[2])
        forward(n, own)  # untimed: the caches as a forward leaves them
        best_own = best_blas = math.inf
        for _ in range(repeats):
            best_own = min(best_own, _seconds(lambda n=n, own=own: forward(n, own)))
            best_blas = min(best_blas, _seconds(lambda n=n: forward(n, blas)))
        if best_own < best_blas:
            mask |= 1 << n
    return mask


_MEASURED: dict[tuple, int] = {}
_LOCK = threading.Lock()


def own_mask_for(key: tuple, forward: Callable[[int, Paths], object], paths: Paths) -> Paths:
    """``paths`` with its own_mask measured (:func:`measure_own_mask`) where it says
    :data:`MEASURE`: once per process for each ``key`` (a model's weight shapes), so a
    second model of the same shapes takes the first one's choice."""
    if paths[1] != MEASURE:  # fixed by whoever replaced matmul_paths (the tests)
        return paths
    key = (paths, key)
    with _LOCK:
        if key not in _MEASURED:
            _MEASURED[key] = measure_own_mask(forward, paths)
        return paths[0], _MEASURED[key], paths[2]
