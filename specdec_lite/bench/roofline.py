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
The skinny kernel (:mod:`specdec_lite.models.skinny`) is the other way: the weights are
laid out once, when a layer is set up, in the order it reads them, and each weight is
read once for all the rows, whose running sums stay in vector registers. With numba
installed (the ``fast`` extra) it runs compiled; without it, as in the browser edition,
one numpy product per tile of the same layout gives the same result.

:func:`measure_rows_cost` times either kernel for n = 1 .. 8 rows on a random layer and
returns medians with bootstrap 95% intervals; :func:`measure_peak_flops` times a large
square product, the BLAS's best arithmetic rate; :func:`measure_sizes` runs the first
over layers from a few kilobytes to hundreds of megabytes, which ``python -m
specdec_lite.bench.roofline`` saves for the chapter. Timings describe this machine only.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ..checks import check_int, check_positive
from ..models import skinny
from . import timing
from .stats import bootstrap_ci

#: True in the browser edition (Pyodide): no numba, no /proc, less memory.
IN_BROWSER = sys.platform == "emscripten"
ITEMSIZE = 4  # bytes per float32 weight
KERNELS = ("numpy", "skinny")
#: (name, d_in, d_out) of the layers the chapter measures: from the book's target, small
#: enough for the caches, to a matrix of 256 MB that only main memory holds. The browser
#: edition measures two smaller ones.
LAYERS = (("target MLP", 192, 768), ("GPT-2 small MLP", 768, 3072), ("wide layer", 8192, 8192))
BROWSER_LAYERS = (("target MLP", 192, 768), ("wide layer", 1024, 4096))


def machine_line(short: bool = False, machine: dict | None = None) -> str:
    """The machine timings here describe, in one line: the CPU model, its cores, numpy and
    its BLAS with the kernel OpenBLAS loaded and the BLAS thread settings
    (:func:`specdec_lite.bench.timing.machine_info`); ``short``: the CPU and the kernel.
    ``machine``: a saved ``machine_info`` (of a results file) to describe instead of this
    one. The browser edition can only say that it runs in a browser."""
    if machine is None and IN_BROWSER:
        return f"a web browser (Pyodide, WebAssembly), numpy {np.__version__}"
    machine = timing.machine_info() if machine is None else machine
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
    kernel: str  # "numpy" or "skinny"
    backend: str  # what ran it: "numpy" (BLAS) or, for the skinny kernel, "numba" or "numpy"
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
    ``"skinny"`` (:func:`specdec_lite.models.skinny.rows_times` on weights laid out
    beforehand).

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
        backend, packed = skinny.kernel_backend(), skinny.pack(w)
        del w  # the packed copy is all the kernel reads
        calls_of = [lambda rows=x[:n]: skinny.rows_times(rows, packed, backend) for n in ns]
    calls_of[0]()  # untimed: compiles the kernel, fills the caches
    calls = [_calls_for(f, min_seconds) for f in calls_of]  # loops of about min_seconds
    seconds = np.empty((repeats, len(ns)))  # [repeats, N]
    for r in range(repeats):
        for j in rng.permutation(len(ns)):
            seconds[r, j] = _least_disturbed(calls_of[j], calls[j])
    return _summarise(name or f"{d_in}x{d_out}", d_in, d_out, kernel, backend, ns, seconds, seed)


def _summarise(name: str, d_in: int, d_out: int, kernel: str, backend: str, ns: np.ndarray,
               seconds: np.ndarray, seed: int) -> RowsCost:
    ratios = seconds / seconds[:, :1]  # [repeats, N], T(n)/T(1) within a repeat
    return RowsCost(
        name=name, d_in=d_in, d_out=d_out, kernel=kernel, backend=backend, ns=ns,
        seconds=seconds, median=np.median(seconds, axis=0),
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


def by_layer(costs: Sequence[RowsCost]) -> list[list[RowsCost]]:
    """``costs`` grouped by layer (name and shape), each group its kernels' costs, in the
    order the layers first appear."""
    keys = list(dict.fromkeys((c.name, c.d_in, c.d_out) for c in costs))
    return [[c for c in costs if (c.name, c.d_in, c.d_out) == key] for key in keys]


def layer_roofline(layer: Sequence[RowsCost], peak_flops: float) -> np.ndarray:
    """The roofline's r(n) [N] of one layer (its kernels' costs, as :func:`by_layer`
    groups them), through the fastest kernel's T(1)."""
    first = layer[0]
    return roofline_ratio(first.ns, first.d_in, first.d_out,
                          min(c.median[0] for c in layer), peak_flops)


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
    for mine in by_layer(costs):
        for c in mine:
            one = c.median[0]
            shown = f"{one * 1e3:.2f} ms" if one >= 1e-4 else f"{one * 1e6:.1f} µs"
            lines.append(f"{c.name:16} {c.megabytes:6.1f}  {c.kernel:9} {shown:>9}  "
                         + " ".join(f"{x:5.2f}" for x in c.ratio[1:]))
        bound = layer_roofline(mine, peak_flops)
        lines.append(f"{'':16} {'':6}  {'roofline':9} {'':9}  "
                     + " ".join(f"{x:5.2f}" for x in bound[1:]))
    return "\n".join(lines)


# ---------------------------------------------------------------- from caches to main memory

#: (d_in, d_out) of the layers :func:`measure_sizes` runs: from 0.15 MB, which stays in a
#: core's L2 cache, to 1.07 GB, larger than any processor's last-level cache.
SIZES = ((192, 192), (192, 768), (768, 3072), (2048, 2048), (4096, 4096), (8192, 8192),
         (16384, 16384))


def measure_sizes(sizes: Sequence[tuple[int, int]] = SIZES,
                  ns: Sequence[int] = tuple(range(1, 9)), repeats: int = 7,
                  seed: int = 0) -> dict:
    """:func:`measure_rows_cost` for both kernels on every layer of ``sizes``, with the
    machine (:func:`specdec_lite.bench.timing.machine_info`), the peak of a large product
    and the settings: what ``python -m specdec_lite.bench.roofline --json`` saves."""
    pairs = [(check_int(i, "d_in", minimum=1), check_int(o, "d_out", minimum=1))
             for i, o in sizes]
    costs = [measure_rows_cost(d_in, d_out, ns=ns, kernel=kernel, repeats=repeats, seed=seed)
             for d_in, d_out in pairs for kernel in KERNELS]
    return {"timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": timing.machine_info(),
            "skinny_tile": list(skinny.tile_shape()), "peak_flops": measure_peak_flops(),
            "settings": {"ns": [int(n) for n in ns], "repeats": repeats, "seed": seed},
            "costs": [{"name": c.name, "d_in": c.d_in, "d_out": c.d_out, "kernel": c.kernel,
                       "backend": c.backend, "seconds": c.seconds.tolist()} for c in costs]}


def costs_of(data: dict) -> list[RowsCost]:
    """The :class:`RowsCost` of every layer and kernel in a :func:`measure_sizes` result
    (or its JSON), summarised again from the saved timings; ``ValueError`` names what is
    missing."""
    try:
        ns, seed, rows = _check_ns(data["settings"]["ns"]), data["settings"]["seed"], data["costs"]
        costs = []
        for c in rows:
            seconds = np.array(c["seconds"], dtype=float)  # [repeats, N]
            if seconds.ndim != 2 or seconds.shape[1] != len(ns) or not np.all(seconds > 0):
                raise ValueError("not a roofline sizes result: every cost needs positive "
                                 "seconds [repeats, len(ns)]")
            costs.append(_summarise(c["name"], c["d_in"], c["d_out"], c["kernel"],
                                    c["backend"], ns, seconds, seed))
    except (KeyError, TypeError) as err:
        raise ValueError(f"not a roofline sizes result: lacks {err}") from None
    if not costs:
        raise ValueError("not a roofline sizes result: no costs")
    return costs


def read_sizes(path: str | Path) -> tuple[dict, list[RowsCost]]:
    """A file :func:`main` wrote: its contents and their :func:`costs_of`. ``ValueError``
    names the file and what is wrong with it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        return data, costs_of(data)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m specdec_lite.bench.roofline",
                                     description="r(n) of numpy's product and the skinny "
                                     "kernel on layers from the caches to main memory")
    parser.add_argument("--json", metavar="PATH", help="write the timings as JSON")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.repeats < 2:
        parser.error("--repeats must be >= 2")
    if args.json and not Path(args.json).parent.is_dir():
        parser.error(f"--json {args.json}: no folder {Path(args.json).parent}")
    data = measure_sizes(repeats=args.repeats, seed=args.seed)
    print("measured on", machine_line())
    print(format_rows_cost(costs_of(data), data["peak_flops"]))
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
