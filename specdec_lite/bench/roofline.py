"""Memory-bound or compute-bound: the roofline of one layer's product, measured here.

A target forward over n new tokens multiplies n rows by every weight matrix of the model.
For one matrix w [d_in, d_out] of float32 that product does

    FLOPs = 2 n d_in d_out             (a multiply and an add per weight and row)

and must at least read every weight once, plus the rows that go in and come out:

    bytes = 4 (d_in d_out + n d_in + n d_out).

Their ratio, the **arithmetic intensity**, is about n / 2 FLOPs per byte: a matrix-vector
product (n = 1) does two operations for every four bytes it reads. The **roofline model**
(Williams, Waterman and Patterson, 2009) bounds the time of a product from below by both
resources a processor has,

    T(n) >= max(bytes / bandwidth, FLOPs / peak),

so while the intensity is below peak / bandwidth (the *ridge*) the product is
**memory-bound**: reading the weights takes longer than the arithmetic, and a few more
rows cost almost nothing. :func:`roofline_ratio` draws that bound as r(n) = T(n)/T(1).

Whether a real product follows the bound is up to its kernel. numpy hands ``x @ w`` to
its BLAS, which for one row streams the matrix through a matrix-vector kernel, and for
more rows may switch to a matrix-matrix kernel that first copies (packs) the weights.
:func:`stream_rows` is the other way: the weights are packed once, when a layer is set
up (:func:`pack_weights`), into the order the kernel reads them, and each block of
weights is read from memory once and used for every row while it sits in the cache.
With numba installed (the ``fast`` extra) it runs compiled; without it, as in the
browser edition, a numpy loop over the same blocks gives the same result.

:func:`measure_rows_cost` times either kernel for n = 1 .. 8 rows on a random layer and
returns medians with bootstrap 95% intervals; :func:`measure_peak_flops` times a large
square product, the BLAS's best arithmetic rate. Timings describe this machine only.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..checks import check_int, check_positive
from ..models import fast
from . import timing
from .stats import bootstrap_ci

#: True in the browser edition (Pyodide): no numba, no /proc, less memory.
IN_BROWSER = sys.platform == "emscripten"
ITEMSIZE = 4  # bytes per float32 weight
#: Inputs per packed block: a block of eight rows of x and one weight row's block fit the
#: L1 cache together, so every row reuses the block without reading memory again.
BLOCK = 256
KERNELS = ("numpy", "streaming")
#: (name, d_in, d_out) of the layers the chapter measures: from the book's target, small
#: enough for the caches, to a matrix of 256 MB that only main memory holds. The browser
#: edition measures two smaller ones.
LAYERS = (("target MLP", 192, 768), ("GPT-2 small MLP", 768, 3072), ("wide layer", 8192, 8192))
BROWSER_LAYERS = (("target MLP", 192, 768), ("wide layer", 1024, 4096))


def machine_line(short: bool = False) -> str:
    """The machine timings here describe, in one line: the CPU model, its cores, numpy and
    its BLAS with the kernel OpenBLAS loaded and the BLAS thread settings
    (:func:`specdec_lite.bench.timing.machine_info`); ``short``: the CPU and the kernel.
    The browser edition can only say that it runs in a browser."""
    if IN_BROWSER:
        return f"a web browser (Pyodide, WebAssembly), numpy {np.__version__}"
    machine = timing.machine_info()
    cpu, blas = machine["cpu_model"] or "an unnamed CPU", machine["blas"]
    if short:
        return f"{cpu}, BLAS kernel {blas['kernel']}"
    threads = ", ".join(f"{k}={v}" for k, v in machine["blas_threads"].items()) or "default"
    return (f"{cpu} ({machine['cpu_count']} cores), numpy {machine['numpy']} with "
            f"{blas['library']} {blas['version']}, kernel {blas['kernel']}, BLAS threads {threads}")


def default_layers() -> tuple[tuple[str, int, int], ...]:
    """The layers to measure on this platform: :data:`LAYERS`, or :data:`BROWSER_LAYERS`
    in the browser edition."""
    return BROWSER_LAYERS if IN_BROWSER else LAYERS


# ---------------------------------------------------------------- the roofline model


def _check_shape(n: object, d_in: object, d_out: object) -> tuple[int, int, int]:
    return (check_int(n, "n", minimum=1), check_int(d_in, "d_in", minimum=1),
            check_int(d_out, "d_out", minimum=1))


def layer_flops(n: int, d_in: int, d_out: int) -> int:
    """Floating-point operations of ``x @ w`` for x [n, d_in], w [d_in, d_out]."""
    n, d_in, d_out = _check_shape(n, d_in, d_out)
    return 2 * n * d_in * d_out


def layer_bytes(n: int, d_in: int, d_out: int, itemsize: int = ITEMSIZE) -> int:
    """The fewest bytes ``x @ w`` moves: every weight once, the n rows in and out."""
    n, d_in, d_out = _check_shape(n, d_in, d_out)
    itemsize = check_int(itemsize, "itemsize", minimum=1)
    return itemsize * (d_in * d_out + n * d_in + n * d_out)


def arithmetic_intensity(n: int, d_in: int, d_out: int, itemsize: int = ITEMSIZE) -> float:
    """FLOPs per byte moved by ``x @ w``: about 2 n / itemsize for a large matrix."""
    return layer_flops(n, d_in, d_out) / layer_bytes(n, d_in, d_out, itemsize)


def ridge_rows(bandwidth: float, peak_flops: float, itemsize: int = ITEMSIZE) -> float:
    """The number of rows at which a large matrix's product stops being memory-bound:
    where its intensity 2 n / itemsize reaches peak / bandwidth."""
    bandwidth = check_positive(bandwidth, "bandwidth")
    peak_flops = check_positive(peak_flops, "peak_flops")
    itemsize = check_int(itemsize, "itemsize", minimum=1)
    return itemsize * peak_flops / (2 * bandwidth)


def roofline_ratio(ns: Sequence[int], d_in: int, d_out: int, seconds_one_row: float,
                   peak_flops: float) -> np.ndarray:
    """r(n) = T(n)/T(1) [len(ns)] on the roofline through a measured one-row time: memory
    read at the rate the one-row product achieved (its bytes / ``seconds_one_row``),
    arithmetic at ``peak_flops``. Flat while memory-bound, then growing like n."""
    ns = _check_ns(ns)
    seconds_one_row = check_positive(seconds_one_row, "seconds_one_row")
    peak_flops = check_positive(peak_flops, "peak_flops")
    bandwidth = layer_bytes(1, d_in, d_out) / seconds_one_row  # bytes / s
    bound = np.array([max(layer_bytes(n, d_in, d_out) / bandwidth,
                          layer_flops(n, d_in, d_out) / peak_flops) for n in ns])  # [N]
    one = max(seconds_one_row, layer_flops(1, d_in, d_out) / peak_flops)
    return bound / one


# ---------------------------------------------------------------- the streaming kernel


def pack_weights(w: np.ndarray, block: int = BLOCK) -> np.ndarray:  # [i, o] -> [nb, o, block]
    """w [d_in, d_out] as float32 blocks [ceil(d_in / block), d_out, block]: block b holds
    inputs b*block .. (b+1)*block - 1 of every output, contiguous, zero-padded at the end.
    Done once per layer; :func:`stream_rows` then reads the blocks in memory order."""
    w = np.asarray(w)
    if w.ndim != 2 or w.size == 0:
        raise ValueError(f"w must be a non-empty 2-D matrix [d_in, d_out], got shape {w.shape}")
    block = check_int(block, "block", minimum=1)
    d_in, d_out = w.shape
    n_blocks = -(-d_in // block)
    padded = np.zeros((n_blocks * block, d_out), dtype=np.float32)  # [nb * block, o]
    padded[:d_in] = w
    return np.ascontiguousarray(padded.reshape(n_blocks, block, d_out).transpose(0, 2, 1))


def _pack_rows(x: np.ndarray, n_blocks: int, block: int) -> np.ndarray:  # [n, i] -> [nb, n, block]
    n, d_in = x.shape
    padded = x
    if d_in != n_blocks * block:
        padded = np.zeros((n, n_blocks * block), dtype=np.float32)  # [n, nb * block]
        padded[:, :d_in] = x
    return np.ascontiguousarray(padded.reshape(n, n_blocks, block).transpose(1, 0, 2))


def stream_blocks(xb, packed, out):  # xb [nb, n, B], packed [nb, o, B] -> out [n, o]
    """out = x @ w from the packed blocks. Each weight row's block ``w`` is read from
    memory once; four rows of x at a time multiply it while it is in the L1 cache, with
    four running sums that the compiler keeps in vector registers. Plain Python until
    numba compiles it (:func:`streaming_backend`)."""
    n_blocks, d_out, block = packed.shape
    n = xb.shape[1]
    out[:] = 0.0
    for b in range(n_blocks):
        xs, ws = xb[b], packed[b]  # [n, B], [o, B]
        for o in range(d_out):
            w = ws[o]  # [B]
            r = 0
            while r + 4 <= n:
                x0, x1, x2, x3 = xs[r], xs[r + 1], xs[r + 2], xs[r + 3]
                s0 = s1 = s2 = s3 = np.float32(0.0)
                for i in range(block):
                    s0 += x0[i] * w[i]
                    s1 += x1[i] * w[i]
                    s2 += x2[i] * w[i]
                    s3 += x3[i] * w[i]
                out[r, o] += s0
                out[r + 1, o] += s1
                out[r + 2, o] += s2
                out[r + 3, o] += s3
                r += 4
            while r < n:
                x0 = xs[r]
                s0 = np.float32(0.0)
                for i in range(block):
                    s0 += x0[i] * w[i]
                out[r, o] += s0
                r += 1


_COMPILED: list[Callable] = []  # the numba-compiled stream_blocks, once compiled


def _compiled_kernel() -> Callable | None:
    numba = fast.numba_module()
    if numba is None:
        return None
    if not _COMPILED:
        _COMPILED.append(numba.njit(cache=True, nogil=True, fastmath=fast.FASTMATH)(stream_blocks))
    return _COMPILED[0]


def streaming_backend() -> str:
    """How :func:`stream_rows` runs here: ``"numba"`` (compiled) or ``"numpy blocks"``."""
    return "numpy blocks" if fast.numba_module() is None else "numba"


def stream_rows(x: np.ndarray, packed: np.ndarray,
                backend: str | None = None) -> np.ndarray:  # [n, i] -> [n, o]
    """x @ w for x [n, d_in] and ``packed = pack_weights(w)``, reading each weight block
    once for all n rows. ``backend``: ``"numba"``, ``"numpy blocks"`` (one BLAS product per
    block, each on a cache-sized piece of w), ``"python"`` (the kernel uncompiled: slow,
    for tests) or None for :func:`streaming_backend`."""
    packed = np.asarray(packed)
    if packed.ndim != 3 or packed.dtype != np.float32:
        raise ValueError("packed must come from pack_weights (float32 [blocks, d_out, block]), "
                         f"got {packed.dtype} of shape {packed.shape}")
    n_blocks, d_out, block = packed.shape
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2 or x.shape[0] < 1 or not (n_blocks - 1) * block < x.shape[1] <= n_blocks * block:
        raise ValueError(f"x must be [n, d_in] with n >= 1 and d_in matching packed, got shape "
                         f"{x.shape} for {n_blocks} blocks of {block}")
    backend = streaming_backend() if backend is None else backend
    if backend not in ("numba", "numpy blocks", "python"):
        raise ValueError(f"backend must be 'numba', 'numpy blocks' or 'python', got {backend!r}")
    xb = _pack_rows(x, n_blocks, block)  # [nb, n, block]
    out = np.zeros((x.shape[0], d_out), dtype=np.float32)  # [n, o]
    if backend == "numpy blocks":
        for b in range(n_blocks):
            out += xb[b] @ packed[b].T  # [n, block] @ [block, o]
        return out
    kernel = stream_blocks if backend == "python" else _compiled_kernel()
    if kernel is None:
        raise ImportError(f"the numba backend needs numba: {fast.INSTALL_HINT}")
    kernel(xb, packed, out)
    return out


# ---------------------------------------------------------------- measuring


@dataclass(frozen=True)
class RowsCost:
    """The measured cost of one layer's product for n rows, n in ``ns``.

    ``seconds`` [repeats, N] holds every timing (seconds per call); ``median`` [N] and
    ``ci`` [N, 2] summarise it; ``ratio`` [N] is the median over repeats of
    T(n)/T(1) within each repeat, with its interval ``ratio_ci`` [N, 2]."""

    name: str
    d_in: int
    d_out: int
    kernel: str  # "numpy" or "streaming"
    backend: str  # what ran it: "numpy" (BLAS), "numba" or "numpy blocks"
    ns: np.ndarray  # [N]
    seconds: np.ndarray  # [repeats, N]
    median: np.ndarray  # [N]
    ci: np.ndarray  # [N, 2]
    ratio: np.ndarray  # [N]
    ratio_ci: np.ndarray  # [N, 2]

    @property
    def megabytes(self) -> float:
        """The weights' size in MB (float32)."""
        return ITEMSIZE * self.d_in * self.d_out / 1e6


def _check_ns(ns: Sequence[int]) -> np.ndarray:
    values = [check_int(n, "ns", minimum=1) for n in ns]
    if not values or values[0] != 1 or len(set(values)) != len(values):
        raise ValueError(f"ns must start at 1 and hold distinct row counts, got {list(ns)}")
    return np.array(values)


def _seconds_per_call(f: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        f()
    return (time.perf_counter() - start) / calls


def _clock_tick() -> float:
    """The smallest step of ``time.perf_counter`` seen now: well under a microsecond
    natively, about a millisecond in a browser, which rounds its clock."""
    start = now = time.perf_counter()
    while now == start:
        now = time.perf_counter()
    return now - start


def _calls_for(f: Callable[[], object], min_seconds: float) -> int:
    """How many calls of ``f`` take about ``min_seconds``, or 30 ticks of the clock if
    that is longer (so that each of :func:`_least_disturbed`'s three loops spans ten):
    doubled from one until a loop lasts a quarter of that. A call shorter than a tick is
    then never timed as zero."""
    min_seconds = max(min_seconds, 30 * _clock_tick())
    calls = 1
    while True:
        seconds = _seconds_per_call(f, calls) * calls
        if seconds >= min_seconds / 4 or calls >= 1 << 20:
            return max(1, math.ceil(min_seconds * calls / max(seconds, 1e-9)))
        calls *= 2


def _least_disturbed(f: Callable[[], object], calls: int, loops: int = 3) -> float:
    """Seconds per call: the fastest of ``loops`` loops of ``calls // loops`` calls when
    there are that many (a loop another process interrupted is slower, never faster),
    else one loop of ``calls``."""
    if calls < loops:
        return _seconds_per_call(f, calls)
    return min(_seconds_per_call(f, calls // loops) for _ in range(loops))


def measure_rows_cost(d_in: int, d_out: int, ns: Sequence[int] = tuple(range(1, 9)),
                      kernel: str = "numpy", repeats: int = 5, seed: int = 0,
                      min_seconds: float = 3e-3, name: str = "") -> RowsCost:
    """Time ``x @ w`` for a random float32 w [d_in, d_out] and x of n rows, n in ``ns``
    (starting at 1), with ``kernel`` ``"numpy"`` (numpy's matmul, so its BLAS) or
    ``"streaming"`` (:func:`stream_rows` on weights packed beforehand).

    Every n is run once first (compiling, warming the caches); then ``repeats`` times
    each n in an order shuffled by ``seed``. Each timing covers at least ``min_seconds``
    of calls, split into three loops when a call is that short, and keeps the fastest
    loop. Medians and bootstrap 95% intervals over the repeats."""
    d_in, d_out = check_int(d_in, "d_in", minimum=1), check_int(d_out, "d_out", minimum=1)
    ns = _check_ns(ns)
    repeats = check_int(repeats, "repeats", minimum=2)
    seed = check_int(seed, "seed", minimum=0)
    min_seconds = check_positive(min_seconds, "min_seconds")
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    rng = np.random.default_rng(seed)
    w = rng.random((d_in, d_out), dtype=np.float32)  # [i, o]
    w -= 0.5
    x = rng.random((int(ns.max()), d_in), dtype=np.float32) - 0.5  # [max n, i]
    if kernel == "numpy":
        backend, calls_of = "numpy", [lambda rows=x[:n]: rows @ w for n in ns]
    else:
        backend, packed = streaming_backend(), pack_weights(w)
        del w  # the packed copy is all the kernel reads
        calls_of = [lambda rows=x[:n]: stream_rows(rows, packed, backend) for n in ns]
    calls_of[0]()  # untimed: compiles the kernel, fills the caches
    calls = [_calls_for(f, min_seconds) for f in calls_of]  # loops of about min_seconds
    seconds = np.empty((repeats, len(ns)))  # [repeats, N]
    for r in range(repeats):
        for j in rng.permutation(len(ns)):
            seconds[r, j] = _least_disturbed(calls_of[j], calls[j])
    ratios = seconds / seconds[:, :1]  # [repeats, N], T(n)/T(1) within a repeat
    return RowsCost(
        name=name or f"{d_in}x{d_out}", d_in=d_in, d_out=d_out, kernel=kernel,
        backend=backend, ns=ns, seconds=seconds, median=np.median(seconds, axis=0),
        ci=np.array([bootstrap_ci(seconds[:, j], seed=seed) for j in range(len(ns))]),
        ratio=np.median(ratios, axis=0),
        ratio_ci=np.array([bootstrap_ci(ratios[:, j], seed=seed) for j in range(len(ns))]))


def measure_peak_flops(size: int = 1024, repeats: int = 3, seed: int = 0) -> float:
    """FLOP/s of numpy's float32 product of two random [size, size] matrices, the fastest
    of ``repeats``: about the best arithmetic rate the BLAS reaches on one core."""
    size = check_int(size, "size", minimum=1)
    repeats = check_int(repeats, "repeats", minimum=1)
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    a, b = (rng.random((size, size), dtype=np.float32) for _ in range(2))  # [size, size]
    a @ b  # warm-up
    calls = _calls_for(lambda: a @ b, 1e-2)  # one product may be shorter than the clock's tick
    best = min(_seconds_per_call(lambda: a @ b, calls) for _ in range(repeats))
    return layer_flops(size, size, size) / best


def format_rows_cost(costs: Sequence[RowsCost], peak_flops: float) -> str:
    """One line per measured layer and kernel: its size, T(1) and the median r(n); then,
    per layer, the roofline's r(n) through the faster kernel's T(1) (a bound computed from
    two measurements, not a timing)."""
    peak_flops = check_positive(peak_flops, "peak_flops")
    if not costs:
        raise ValueError("costs must hold at least one RowsCost")
    ns = costs[0].ns
    head = f"{'layer':16} {'MB':>6}  {'kernel':9} {'T(1)':>9}  " + " ".join(
        f"{f'r({n})':>5}" for n in ns[1:])
    lines = [head, "-" * len(head)]
    layers = list(dict.fromkeys((c.name, c.d_in, c.d_out) for c in costs))
    for name, d_in, d_out in layers:
        mine = [c for c in costs if (c.name, c.d_in, c.d_out) == (name, d_in, d_out)]
        for c in mine:
            one = c.median[0]
            shown = f"{one * 1e3:.2f} ms" if one >= 1e-4 else f"{one * 1e6:.1f} µs"
            lines.append(f"{name:16} {c.megabytes:6.1f}  {c.kernel:9} {shown:>9}  "
                         + " ".join(f"{x:5.2f}" for x in c.ratio[1:]))
        fastest = min(c.median[0] for c in mine)
        bound = roofline_ratio(ns, d_in, d_out, fastest, peak_flops)
        lines.append(f"{'':16} {'':6}  {'roofline':9} {'':9}  "
                     + " ".join(f"{x:5.2f}" for x in bound[1:]))
    return "\n".join(lines)
