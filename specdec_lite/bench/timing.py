"""How the benchmark times: the forward meter, the isolated cost curve, the profile, and
the machine the numbers come from.

Timing rules. The caches are filled with the prompt before each run, so runs time the
decode phase only. One untimed warm-up pass of every method, then ``repeats`` passes; in
each pass, for each prompt, the methods run in a seeded shuffled order
(:func:`~specdec_lite.bench.config.schedule`). The garbage collector is off while a run is
timed; every clock read is ``time.perf_counter``.

The forwards. The target's and draft's ``forward``, the heads' ``logits`` and the
n-gram's ``last_probs`` are the model work; everything else is the engine. Each of these
models has an ``observer`` hook, called as ``observer(n, seconds)`` after every such
call; :class:`ForwardMeter` sets it for the duration of the runs and sums the calls per
model and size (:func:`in_run_costs`). The engine overhead of a run is
1 − forward time / wall time.

Cost curve. T(n) is the median time of one ``target.forward`` over n new tokens after a
cached prefix as long as the average decoding context (prompt + half the new tokens),
for n = 1 .. the largest verification block, timed in short back-to-back bursts (warm
caches, as in the decode loops; :func:`cost_curve`); r(n) = T(n)/T(1). The draft cost is
c = T_draft(1)/T(1) for the draft GPT and c_ngram for one n-gram ``last_probs`` row; one
Medusa heads call costs c_heads = T_heads/T(1). The meter's means inside the runs are the
same costs as the runs paid them, at every context length the decoders saw, with the
caches as decoding leaves them; the isolated curve is a few hundred forwards timed at one
moment after the runs, and on a machine whose speed drifts it moves between runs far
more than the in-run costs do.

Profile. :func:`profile_call` cProfiles one run and splits its time into the forwards
and the engine functions that cost the most (:func:`profile_split`).
"""

from __future__ import annotations

import cProfile
import ctypes
import gc
import os
import platform
import pstats
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..drafting.medusa import MedusaHeads
from ..engine import draft_kernels
from ..engine.kernel_time import in_kernel, kernel_timer
from ..engine.step_kernels import compiled_kernels
from ..models import fast, kernels
from ..models.ngram import NGramModel
from ..models.transformer import TransformerModel
from ..pretrained import Pretrained

BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


class ForwardMeter:
    """Counts and times the forwards of the models in ``models`` ({who: model}, a None
    model skipped) through their ``observer`` hook.

    Used as a context manager: the hooks are set on entry and cleared on exit. Per run
    (see ``reset``): ``seconds`` in all forwards, and ``calls`` and ``call_s``, the number
    and seconds of calls keyed by (who, tokens or rows of the call). A compiled run's
    forwards arrive together (``hook.many``) and are only kept until one of the three is
    read, so that the meter adds almost nothing to the run it times.
    """

    def __init__(self, models: dict[str, object]) -> None:
        self.models = {who: model for who, model in models.items() if model is not None}
        self.reset()

    def reset(self) -> None:
        self._seconds = 0.0
        self._calls: Counter = Counter()
        self._call_s: Counter = Counter()
        self._pending: list[tuple[str, np.ndarray, int]] = []  # (who, times, mark)

    def _settle(self) -> None:
        for who, times, mark in self._pending:
            mine = times[times[:, 0] == mark]  # [m, (mark, n, seconds)]
            ns, seconds = mine[:, 1].astype(np.int64), mine[:, 2]  # [m], [m]
            self._seconds += float(seconds.sum())
            for n in np.unique(ns).tolist():
                at = ns == n
                self._calls[(who, n)] += int(at.sum())
                self._call_s[(who, n)] += float(seconds[at].sum())
        self._pending.clear()

    @property
    def seconds(self) -> float:
        self._settle()
        return self._seconds

    @property
    def calls(self) -> Counter:
        self._settle()
        return self._calls

    @property
    def call_s(self) -> Counter:
        self._settle()
        return self._call_s

    def observer(self, who: str) -> Callable[[int, float], None]:
        """The hook for model ``who``: called as ``hook(n, seconds)`` it records one call
        over ``n`` tokens or rows; ``hook.many(times, mark)`` records a compiled run's
        calls at once (:func:`~specdec_lite.engine.compiled_step.report_times`)."""
        return _Hook(self, who)

    def __enter__(self) -> ForwardMeter:
        for who, model in self.models.items():
            if model.observer is not None:
                raise ValueError(f"{who} is already observed (the same model twice?)")
            model.observer = self.observer(who)
        return self

    def __exit__(self, *exc: object) -> None:
        for model in self.models.values():
            model.observer = None


class _Hook:
    """One model's observer of a :class:`ForwardMeter`."""

    def __init__(self, meter: ForwardMeter, who: str) -> None:
        self.meter, self.who = meter, who

    def __call__(self, n: int, seconds: float) -> None:
        meter = self.meter
        meter._seconds += seconds
        meter._calls[(self.who, n)] += 1
        meter._call_s[(self.who, n)] += seconds

    def many(self, times: np.ndarray, mark: int) -> None:
        """The calls in the rows of ``times`` [calls, (mark, tokens or rows, seconds)] whose
        first column is ``mark``, read when the meter is read: a run's record costs the
        run an append (the array is the caller's to leave unchanged)."""
        self.meter._pending.append((self.who, times, mark))


def in_run_costs(calls: Counter, call_s: Counter) -> dict:
    """Mean seconds per call as observed inside the runs: {who: [[n, seconds, calls]]}."""
    out: dict[str, list] = {}
    for (who, n), count in sorted(calls.items()):
        out.setdefault(who, []).append([n, call_s[(who, n)] / count, count])
    return out


def cost_curve(models: Pretrained, ngram: NGramModel | None, prefix: np.ndarray, n_max: int,
               repeats: int, seed: int,
               burst: int = 4) -> tuple[np.ndarray, float, float | None, float | None]:
    """Median seconds of target forwards over n = 1..n_max new tokens [n_max], of a draft
    forward over one token, of one heads call and of one n-gram draft row after ``prefix``
    (:func:`ngram_probe`; None for a model that is absent), after ``prefix`` is cached.

    Every repetition runs all probes in a seeded shuffled order; repetition 0 is warm-up.
    Each probe runs ``burst`` times back to back and the first, cold call is not counted:
    the decoders also call a model several times in a row (k drafts, one token after
    another), and a single call after a different model's forward pays for cold caches.
    """
    target, draft, heads = models.target.bound(), models.draft.bound(), models.heads
    new = np.resize(prefix[::-1], n_max)  # [n_max] any valid tokens
    hidden = target.hidden(prefix)[-1:]  # [1, d]
    draft.probs(prefix)
    probes: list[Callable[[], object]] = []
    for n in range(1, n_max + 1):
        probes.append(lambda n=n: target.forward(new[:n]))
    probes.append(lambda: draft.forward(new[:1]))
    if heads is not None:
        probes.append(lambda: heads.logits(hidden))
    if ngram is not None:
        probes.append(ngram_probe(ngram, prefix, compiled=models.target.compiled is not None))
    rng = np.random.default_rng(seed)
    times = np.zeros((repeats, len(probes), burst - 1))  # [repeats, probes, warm calls]
    for rep in range(repeats + 1):
        for i in rng.permutation(len(probes)):
            for j in range(burst):
                start = time.perf_counter()
                probes[i]()
                elapsed = time.perf_counter() - start
                target.rollback(len(prefix))
                draft.rollback(len(prefix))
                if rep and j:
                    times[rep - 1, i, j - 1] = elapsed
    med = list(np.median(times, axis=(0, 2)))
    heads_s = float(med.pop(n_max + 1)) if heads is not None else None
    ngram_s = float(med.pop(n_max + 1)) if ngram is not None else None
    return np.array(med[:n_max]), float(med[n_max]), heads_s, ngram_s


def ngram_probe(ngram: NGramModel, prefix: np.ndarray, *, compiled: bool) -> Callable:
    """One n-gram draft row after ``prefix``, as the runs compute it: on the compiled
    backend the run kernels' row (:func:`specdec_lite.engine.draft_kernels.ngram_row` and
    its temperature), else ``last_probs``."""
    if not compiled:
        return lambda: ngram.last_probs(prefix)[0]
    compiled_kernels()  # compiles the drafting functions in place
    tables, row, out = ngram.flat_tables(), np.empty(ngram.vocab_size), np.empty(ngram.vocab_size)
    n = len(prefix)

    def probe() -> np.ndarray:  # [V]
        draft_kernels.ngram_row(*tables, prefix, n, row)
        draft_kernels.tempered(row, 1.0, out)
        return out

    return probe


def _profile_key(function: Callable) -> tuple[str, int, str]:
    code = function.__code__
    return code.co_filename, code.co_firstlineno, code.co_name


# the forwards as cProfile names them: (file, first line, function)
# (a compiled step's kernel is counted whole: its forwards and a few microseconds of draws)
FORWARDS = frozenset(_profile_key(f) for f in (TransformerModel.forward, MedusaHeads.logits,
                                                NGramModel.last_probs, in_kernel))


def overhead_split(runs: list[Callable[[], Callable[[], object]]], meter: ForwardMeter) -> dict:
    """Where the wall clock of ``runs`` goes (each prepares a run, untimed, and returns the
    run to time), timed with no profiler, the garbage collector off, ``meter`` active:
    ``forwards`` (the metered forwards), ``compiled`` (the rest of the time inside compiled
    calls: draws, rows, acceptance, cache bookkeeping) and ``python`` (the rest: the
    decoders' Python around the calls, the meter's bookkeeping included), as shares of the
    summed wall clock of the ``runs`` (their number) runs."""
    wall = forward = compiled = 0.0
    for prepare in runs:
        work = prepare()
        meter.reset()
        gc.collect()
        gc.disable()
        try:
            with kernel_timer() as timer:
                start = time.perf_counter()
                work()
                spent = time.perf_counter() - start
        finally:
            gc.enable()
        wall, forward = wall + spent, forward + meter.seconds
        compiled += max(timer.seconds, meter.seconds)  # forwards outside the calls (numpy)
    return {"runs": len(runs), "wall_s": wall, "forwards": forward / wall,
            "compiled": (compiled - forward) / wall, "python": (wall - compiled) / wall}


def profile_call(work: Callable[[], object]) -> dict:
    """cProfile ``work()``: wall and forward seconds and the top engine functions."""
    profiler = cProfile.Profile()
    profiler.enable()
    work()
    profiler.disable()
    total, forward, engine = profile_split(pstats.Stats(profiler).stats, FORWARDS.__contains__)
    return {"wall_s": total, "forward_s": forward, "engine": engine}


def profile_split(stats: dict, is_forward: Callable[[tuple], bool],
                  top: int = 8) -> tuple[float, float, list[tuple[str, float]]]:
    """Split a cProfile run (``pstats.Stats(...).stats``) into forward and engine time.

    ``is_forward(func)`` marks the model forwards. A function's time counts as forward to
    the extent its callers' does (cProfile keeps caller→callee edges, not the call tree,
    so shared helpers are split in proportion to the edges' cumulative time).
    Returns (total seconds, forward seconds, the ``top`` engine functions by own time).
    """
    inside = {f: 1.0 for f in stats if is_forward(f)}
    for _ in range(20):  # propagate down the call graph (its depth is small)
        for f, (_, _, _, ct, callers) in stats.items():
            if not is_forward(f):
                share = sum(edge[3] * inside.get(c, 0.0) for c, edge in callers.items())
                inside[f] = min(1.0, share / ct) if ct > 0 else 0.0
    total = sum(tt for _, _, tt, _, _ in stats.values())
    forward = sum(stats[f][3] for f in stats if is_forward(f))
    engine = Counter()
    for f, (_, _, tt, _, _) in stats.items():
        engine[function_name(f)] += tt * (1.0 - inside[f])
    return total, forward, [(name, s) for name, s in engine.most_common(top) if s > 0]


def function_name(func: tuple[str, int, str]) -> str:
    """``module:function`` for a cProfile key; C functions as ``numpy.ufunc.reduce`` etc."""
    path, _, name = func
    if path != "~":
        return f"{Path(path).stem}:{name}"
    method = re.fullmatch(r"<method '(\w+)' of '([\w.]+)' objects>", name)
    if method:
        return f"{method[2]}.{method[1]}"
    builtin = re.fullmatch(r"<built-in method ([\w.]+)>", name)
    return builtin[1] if builtin else name


_PINNED_THREADS: int | None = None  # set by pin_blas_threads


def pin_blas_threads(n: int = 1) -> bool:
    """Limit the OpenBLAS that numpy loaded to ``n`` threads now (what OPENBLAS_NUM_THREADS=n
    does at start-up). Small matrices run slower, and far noisier, on several threads.
    Returns False where no OpenBLAS is found (then set the environment variable)."""
    global _PINNED_THREADS
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return False
    done = False
    for path in paths:
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                     "openblas_set_num_threads64_", "openblas_set_num_threads"):
            if hasattr(lib, name):
                getattr(lib, name)(ctypes.c_int(n))
                done = True
                break
    if done:
        _PINNED_THREADS = n
    return done


def blas_info() -> dict:
    """The BLAS of the running numpy: library name and version from numpy's build
    configuration, the kernel the library chose for this CPU (OpenBLAS reports it at run
    time; None where it cannot be asked), the matrix-product path chosen for that kernel
    (``rowwise_max``: blocks of 2 .. that many rows multiply row by row) and whether the
    compiled backend (numba) is installed. Which block sizes a compiled model sends to the
    skinny kernel is measured per model: a benchmark records it with the models."""
    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    kernel, vendor = kernels.blas_kernel(), kernels.cpu_vendor()
    return {"library": blas.get("name"), "version": blas.get("version"),
            "kernel": kernel, "rowwise_max": kernels.ROWWISE_MAX,
            "cpu_vendor": vendor,
            "coretype_env": os.environ.get("OPENBLAS_CORETYPE"),
            "numba": fast.numba_version()}


def cache_sizes(cpu: str = "/sys/devices/system/cpu/cpu0") -> dict[str, int]:
    """The data caches one core sees, in bytes, by level: ``{"L1": ..., "L2": ...,
    "L3": ...}`` as Linux reports them (a last-level cache is shared by the cores, and in a
    virtual machine by other tenants); empty where the system does not say."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    sizes = {}
    for index in sorted(Path(cpu, "cache").glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and size:
            sizes[f"L{level}"] = int(size.rstrip("KMG")) * units.get(size[-1], 1)
    return sizes


def machine_info() -> dict:
    """Platform, CPU model, numpy version, the BLAS library and the kernel it chose, BLAS
    thread settings, the data caches' sizes and load average."""
    cpu = platform.processor() or None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"platform": platform.platform(), "python": platform.python_version(),
            "cpu_model": cpu, "cpu_count": os.cpu_count(), "numpy": np.__version__,
            "blas": blas_info(),
            "blas_threads": {v: os.environ[v] for v in BLAS_VARS if v in os.environ}
            | ({"set at run time": str(_PINNED_THREADS)} if _PINNED_THREADS else {}),
            "caches": cache_sizes(),
            "load_average": [round(x, 2) for x in os.getloadavg()]}
