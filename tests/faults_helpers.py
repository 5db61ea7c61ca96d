"""Fault-injection helpers for tests/test_faults.py: models that hang, factories that fail.

They live in a module of their own so that a worker process (``ProcessVerifier``, which
starts workers with ``spawn``) can import them by name.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from specdec_lite.exactness import small_pair


class HangingModel:
    """``model`` whose ``n``-th forward pass (1-based, counted per object) blocks until
    ``release`` is set (or for an hour without one), for each ``n`` in ``hang_on``."""

    def __init__(self, model, hang_on, release: threading.Event | None = None) -> None:
        self.model, self.hang_on, self.release = model, set(hang_on), release
        self.vocab_size = model.vocab_size
        self.calls = 0

    def probs(self, tokens: np.ndarray) -> np.ndarray:
        self.calls += 1
        if self.calls in self.hang_on:
            if self.release is None:
                time.sleep(3600)
            else:
                self.release.wait(3600)
        return self.model.probs(tokens)


def small_target():
    """The small pair's target (V = 3), built in a worker."""
    return small_pair()[0]


def hanging_small_target():
    """The small target, hanging on its first call in each worker."""
    return HangingModel(small_pair()[0], hang_on={1})


def broken_factory():
    raise OSError("weights missing (injected)")


class TimeLimitExceeded(Exception):
    """A test ran past its time limit."""


def alarm_after(seconds: int):
    """Make SIGALRM raise :class:`TimeLimitExceeded` in ``seconds``; returns the undo function.
    (Every test of the fault, telemetry and journal files is bounded this way.)"""
    import signal

    def on_alarm(signum, frame):
        raise TimeLimitExceeded(f"test ran past its {seconds} s limit")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)

    def undo() -> None:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)

    return undo
