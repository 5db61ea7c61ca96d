"""The time a process spends inside compiled calls. Every call of a compiled kernel by the
engine goes through :func:`in_kernel`; a :func:`kernel_timer` open around some work sums
the seconds of the calls made meanwhile, in any thread, and lists the kernels called. The
benchmark's profile sets that time against the forwards' (timed inside the calls) and the
wall clock (around them), to split a run's engine overhead into the compiled calls' own
work and the Python around them."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator


class KernelTimer:
    """The seconds spent inside compiled calls while it is open, and the kernels called,
    in order."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls: list = []


_OPEN_TIMERS: list[KernelTimer] = []


@contextlib.contextmanager
def kernel_timer() -> Iterator[KernelTimer]:
    """A :class:`KernelTimer` summing the compiled calls made while the block runs."""
    timer = KernelTimer()
    _OPEN_TIMERS.append(timer)
    try:
        yield timer
    finally:
        _OPEN_TIMERS.remove(timer)


def in_kernel(kernel: object, *args: object) -> tuple:
    """``kernel(*args)``, in a Python frame of its own (the benchmark's cProfile finds the
    compiled calls by it), timed for every open :func:`kernel_timer`."""
    if not _OPEN_TIMERS:
        return kernel(*args)
    start = time.perf_counter()
    try:
        return kernel(*args)
    finally:
        spent = time.perf_counter() - start
        for timer in _OPEN_TIMERS:
            timer.seconds += spent
            timer.calls.append(kernel)


__all__ = ["KernelTimer", "in_kernel", "kernel_timer"]
