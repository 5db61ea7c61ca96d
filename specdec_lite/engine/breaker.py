"""The circuit breaker: stop asking a failing verifier for a while, then try again.

:func:`specdec_lite.engine.resilient.resilient_generate` asks :meth:`CircuitBreaker.allow` before
each step and reports the verification's outcome; while the breaker is open the loop
decodes plainly and does not draft, so a verifier that keeps failing costs nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..checks import check_int, check_positive


class CircuitBreaker:
    """Stops drafting after ``failures`` consecutive failed verifications, for a cool-down.

    *Closed* (the normal state): every step may draft. After ``failures`` failures in a
    row it *opens*: :meth:`allow` answers False (the engine decodes plainly, without
    asking the verifier) for ``cooldown_steps`` calls, or for ``cooldown_s`` seconds of
    ``clock`` when that is given instead. Then it is *half-open*: one step may try again;
    a success closes it, a failure opens it for another cool-down. ``trips`` counts the
    openings. ``clock`` (default :func:`time.monotonic`) is injectable for tests.

    One breaker can serve many sequences (calls are locked); an engine asks
    :meth:`allow` once per sequence step, so ``cooldown_steps`` counts those.
    """

    def __init__(self, failures: int = 3, *, cooldown_steps: int | None = 8,
                 cooldown_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.failures = check_int(failures, "failures", 1)
        if cooldown_s is not None:
            self.cooldown_s, self.cooldown_steps = check_positive(cooldown_s, "cooldown_s"), None
        elif cooldown_steps is not None:
            self.cooldown_steps = check_int(cooldown_steps, "cooldown_steps", 1)
            self.cooldown_s = None
        else:
            raise ValueError("cooldown_steps or cooldown_s must be given")
        self.clock = clock
        self.state = "closed"
        self.trips = 0
        self._failed = 0  # consecutive failures while closed
        self._opened_at = 0.0
        self._skipped = 0  # steps refused since opening
        self._trial = False  # a half-open trial is out
        self._lock = threading.Lock()

    def allow(self) -> bool:
        """May this step draft and verify? (False: decode it plainly.)"""
        with self._lock:
            if self.state == "open":
                if self.cooldown_s is not None:
                    over = self.clock() - self._opened_at >= self.cooldown_s
                else:
                    self._skipped += 1
                    over = self._skipped > self.cooldown_steps
                if not over:
                    return False
                self.state, self._trial = "half_open", False
            if self.state == "half_open":
                if self._trial:
                    return False  # another sequence's trial is out
                self._trial = True
            return True

    def record_success(self) -> None:
        with self._lock:
            self.state, self._failed, self._trial = "closed", 0, False

    def record_failure(self) -> None:
        with self._lock:
            self._failed += 1
            if self.state == "half_open" or self._failed >= self.failures:
                self.state, self._failed, self._trial = "open", 0, False
                self._opened_at, self._skipped = self.clock(), 0
                self.trips += 1
