"""The verifier boundary: verification that may raise, hang or die, seen as a fault.

Verification is the target's half of a speculative step: one target forward over the
prefix and the k drafted tokens, then the acceptance rule (:func:`verify_step`). Here it
sits behind a *verifier*, any callable ``verifier(request, timeout) -> VerifyReply``:

* :class:`InProcessVerifier` (the default) runs it in this process: in the calling
  thread, or, when a time budget is given, in a helper thread it can walk away from;
* :class:`ProcessVerifier` runs it in a worker process that builds its own target from a
  picklable factory, so a crash (even ``SIGKILL``) or a hang of the verifier cannot take
  the engine with it: the engine sees a fault, and the worker is restarted.

A verifier reports a fault by raising: :class:`VerifierTimeout` (over the time budget),
:class:`VerifierCrashed` (the worker died), :class:`VerifierUnavailable` (a restarted
worker is not ready yet); any other exception is an ``"error"``. :func:`fault_cause`
names each. :class:`specdec_lite.engine.breaker.CircuitBreaker` decides when to stop asking a
failing verifier.

The random state crosses the boundary by value: a request carries the engine generator's
state (``bit_generator.state``, a JSON-able dict), the verifier draws from its own copy,
and a reply hands the advanced state back. A failed call therefore never leaves the
engine's generator half-advanced, and a run that meets no fault draws exactly what
:func:`specdec_lite.engine.decode.speculative_generate` draws. The decode loop built on this is
:func:`specdec_lite.engine.resilient.resilient_generate`.
"""

from __future__ import annotations

import multiprocessing
import pickle
import queue
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

import numpy as np

from ..checks import check_int, check_positive
from ..models.bound import fresh
from ..models.ngram import model_rows
from ..rules.distributions import truncate
from ..rules.verify import Verification, verify_checked

#: The causes a step can fall back for (``"circuit_open"``: the breaker skipped drafting).
CAUSES = ("error", "timeout", "crash", "unavailable", "circuit_open")


class VerifierFault(RuntimeError):
    """A verifier could not answer; subclasses name the cause."""

    cause = "error"


class VerifierTimeout(VerifierFault):
    """The verifier did not answer within the step's time budget."""

    cause = "timeout"


class VerifierCrashed(VerifierFault):
    """The verifier's worker process died (it is being restarted)."""

    cause = "crash"


class VerifierUnavailable(VerifierFault):
    """The verifier's worker is (re)starting and cannot take a request yet."""

    cause = "unavailable"


def fault_cause(exc: BaseException) -> str:
    """The fallback cause an exception from a verifier stands for (see :data:`CAUSES`)."""
    return exc.cause if isinstance(exc, VerifierFault) else "error"


# ---------------------------------------------------------------- the random state


def generator_state(rng: np.random.Generator) -> dict:
    """``rng``'s bit-generator state: a dict of ints and strings (JSON-able)."""
    return rng.bit_generator.state


def generator_from_state(state: dict) -> np.random.Generator:
    """A new Generator whose next draws are those of the generator ``state`` was read from."""
    name = state.get("bit_generator") if isinstance(state, dict) else None
    bit_generator = getattr(np.random, str(name), None)
    if not (isinstance(bit_generator, type) and issubclass(bit_generator, np.random.BitGenerator)):
        raise ValueError(f"state must be a numpy bit_generator.state dict, got {state!r:.80}")
    rng = np.random.Generator(bit_generator())
    rng.bit_generator.state = state
    return rng


# ---------------------------------------------------------------- one verification


@dataclass(frozen=True)
class VerifyRequest:
    """Everything verification needs, by value (it may travel to another process).

    ``context`` is the prefix followed by the k drafted tokens; ``draft_probs`` the warped
    draft rows q the drafts were sampled from; ``rule`` and ``params`` as
    :func:`specdec_lite.rules.verify.check_rule` returns them; ``rng_state`` the engine
    generator's state (:func:`generator_state`).
    """

    context: np.ndarray  # [n + k] int64
    draft_probs: np.ndarray  # [k, V] float64
    temperature: float
    top_k: int | None
    top_p: float | None
    rule: str
    params: dict
    rng_state: dict

    @property
    def k(self) -> int:
        return self.draft_probs.shape[0]


@dataclass(frozen=True)
class VerifyReply:
    """What the rule decided, and the generator's state after its draws."""

    verification: Verification
    rng_state: dict


def verify_step(target: object, request: VerifyRequest) -> VerifyReply:
    """One verification: score ``request.context`` with one target call (its last k + 1
    rows, warped as the drafts were), then apply the rule with
    :func:`specdec_lite.rules.verify.verify_checked`, drawing from a copy of the request's
    generator state."""
    k = request.k
    p = truncate(model_rows(target, request.context, k + 1, "target", request.temperature),
                 request.top_k, request.top_p)  # [k + 1, V]
    rng = generator_from_state(request.rng_state)
    drafted = request.context[len(request.context) - k:]  # [k]
    result = verify_checked(drafted, request.draft_probs, p, rng, request.rule, request.params)
    return VerifyReply(result, generator_state(rng))


# ---------------------------------------------------------------- in this process


class _Worker:
    """One daemon thread running submitted calls in order; abandoned if a call hangs."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._run, daemon=True, name="specdec-verifier").start()

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            fn, args, future = job
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                future.set_exception(exc)

    def submit(self, fn: Callable, *args: object) -> Future:
        future: Future = Future()
        self.jobs.put((fn, args, future))
        return future

    def stop(self) -> None:
        self.jobs.put(None)  # the thread ends after its current call, if that ever returns


class InProcessVerifier:
    """Verification in this process, against ``target``.

    Without a time budget (``timeout=None``) it runs in the calling thread. With one, it
    runs in a helper thread and a call that takes longer raises :class:`VerifierTimeout`;
    the late call cannot be stopped (Python threads cannot be killed), so that helper is
    abandoned and the next call gets a new one. The abandoned call keeps reading
    ``target`` in its own thread, on a cache no other thread reads (each thread's calls
    get a cache of their own; see :meth:`_call`), which is safe. For a verifier that can
    be stopped for real, use :class:`ProcessVerifier`.

    ``step(target, request) -> reply`` is the work done per call (:func:`verify_step`); a
    batched engine passes its own, for a request that carries a whole batch.
    """

    def __init__(self, target: object, *, step: Callable = verify_step) -> None:
        if not callable(step):
            raise TypeError(f"step must be callable, got {type(step).__name__}")
        self.target, self.step = target, step
        self._worker: _Worker | None = None
        self._readers = threading.local()

    def _call(self, request: VerifyRequest) -> VerifyReply:
        """One verification, on the calling thread's reader of the target: for one sequence
        (the default ``step``), a GPT target on a cache of this verifier and thread
        (:func:`~specdec_lite.models.bound.fresh`), so an abandoned helper never shares
        one with the next; for a batched step, the target as it is."""
        if self.step is not verify_step:
            return self.step(self.target, request)
        reader = getattr(self._readers, "target", None)
        if reader is None:
            reader = self._readers.target = fresh(self.target)
        return self.step(reader, request)

    def __call__(self, request: VerifyRequest, timeout: float | None = None) -> VerifyReply:
        if timeout is None:
            return self._call(request)
        if self._worker is None:
            self._worker = _Worker()
        future = self._worker.submit(self._call, request)
        try:
            return future.result(timeout)
        except FutureTimeout:
            self._worker.stop()
            self._worker = None
            raise VerifierTimeout(f"verification took longer than {timeout} s") from None

    def close(self) -> None:
        if self._worker is not None:
            self._worker.stop()
            self._worker = None


# ---------------------------------------------------------------- in a worker process


def _worker_main(conn, factory: Callable, item: int | None, step: Callable) -> None:
    """The worker process: build the target, say ``ready``, answer requests until None."""
    try:
        built = factory()
        target = built if item is None else built[item]
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, then exit
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return  # the parent went away
        if message is None:
            return
        request_id, request = message
        try:
            conn.send((request_id, "ok", step(target, request)))
        except Exception as exc:  # noqa: BLE001 - a raising verifier is a fault, not a death
            conn.send((request_id, "error", f"{type(exc).__name__}: {exc}"))


def _kill(process) -> None:
    if process.is_alive():
        process.kill()
    process.join(5)


class ProcessVerifier:
    """Verification in a worker process that builds its own target.

    ``factory`` is a picklable callable (a module-level function) returning the target,
    or a tuple from which ``item`` picks it: ``ProcessVerifier(gpt_pair, item=1)`` for
    :func:`specdec_lite.teaching.example.gpt_pair`'s ``(tokenizer, target, draft)``. The worker
    starts at construction and the constructor waits up to ``start_timeout`` seconds for
    it to be ready (a factory that raises gives a ``RuntimeError`` with its message).

    A call sends the request and waits at most ``timeout`` seconds. A worker that dies
    (before or during a call) raises :class:`VerifierCrashed`; one that does not answer in
    time is killed and raises :class:`VerifierTimeout` (a late answer would otherwise be
    read as the next one). Either way a new worker is started at once, without waiting:
    until it is ready, calls raise :class:`VerifierUnavailable` (the engine falls back),
    so a restart never stalls a step. ``restarts`` counts them; :meth:`wait_ready` blocks
    until the current worker is ready. ``start_method`` is a :mod:`multiprocessing` one
    (``"spawn"`` by default: the worker shares nothing with the engine but the factory).
    ``step`` is the work per call, as for :class:`InProcessVerifier` (picklable too).

    One caller at a time: the engine thread that owns it (calls are not locked).
    """

    def __init__(self, factory: Callable, item: int | None = None, *,
                 step: Callable = verify_step, start_method: str = "spawn",
                 start_timeout: float = 60.0) -> None:
        if not callable(factory):
            raise TypeError(f"factory must be callable, got {type(factory).__name__}")
        if not callable(step):
            raise TypeError(f"step must be callable, got {type(step).__name__}")
        self.factory, self.step = factory, step
        self.item = None if item is None else check_int(item, "item", 0)
        self.start_timeout = check_positive(start_timeout, "start_timeout")
        self._context = multiprocessing.get_context(start_method)
        self.restarts = 0
        self._request_id = 0
        self._process = self._conn = None
        self._ready = False
        self._start()
        try:
            self.wait_ready(self.start_timeout)
        except RuntimeError:
            self._finalizer()  # do not leave a half-started worker behind
            raise

    @property
    def pid(self) -> int | None:
        """The current worker's process id."""
        return None if self._process is None else self._process.pid

    def _start(self) -> None:
        parent, child = self._context.Pipe()
        process = self._context.Process(target=_worker_main,
                                        args=(child, self.factory, self.item, self.step),
                                        daemon=True, name="specdec-verifier")
        process.start()
        child.close()  # only the worker holds its end: its death then reads as EOF here
        self._process, self._conn, self._ready = process, parent, False
        self._finalizer = weakref.finalize(self, _kill, process)

    def _restart(self) -> None:
        self._finalizer()  # kill and reap the old worker
        self._conn.close()
        self.restarts += 1
        self._start()

    def _take_ready(self, timeout: float) -> bool:
        """Read the worker's first message if it comes within ``timeout`` seconds."""
        if self._ready:
            return True
        try:
            if not self._conn.poll(timeout):
                return False
            status, detail = self._conn.recv()
        except (EOFError, OSError):
            status, detail = "failed", "the worker died while starting"
        if status != "ready":
            raise RuntimeError(f"the verifier worker could not build its target: {detail}")
        self._ready = True
        return True

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until the current worker has built its target (``RuntimeError`` if it
        does not within ``timeout`` seconds, or if its factory failed)."""
        if not self._take_ready(timeout):
            raise RuntimeError(f"the verifier worker was not ready within {timeout} s")

    def __call__(self, request: VerifyRequest, timeout: float | None = None) -> VerifyReply:
        if self._process is None:
            raise RuntimeError("the verifier is closed")
        if not self._process.is_alive():
            self._restart()
            raise VerifierCrashed("the verifier worker had died; restarting it")
        try:
            ready = self._take_ready(0)
        except RuntimeError as exc:  # a restarted worker failed to build: try again later
            self._restart()
            raise VerifierUnavailable(str(exc)) from None
        if not ready:
            raise VerifierUnavailable("the verifier worker is still starting")
        self._request_id += 1
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self._conn.send((self._request_id, request))
            while True:
                wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not self._conn.poll(wait):
                    break
                request_id, status, body = self._conn.recv()
                if request_id == self._request_id:
                    if status == "ok":
                        return body
                    raise RuntimeError(f"the verifier raised {body}")
        except (EOFError, OSError, pickle.UnpicklingError):  # dead, or cut off mid-answer
            self._restart()
            raise VerifierCrashed("the verifier worker died during a call; restarting it") \
                from None
        self._restart()  # a worker that is still computing would answer late
        raise VerifierTimeout(f"verification took longer than {timeout} s; worker restarted")

    def close(self) -> None:
        """Stop the worker (asks it to exit, then kills it if it does not)."""
        if self._process is None:
            return
        try:
            self._conn.send(None)
        except OSError:
            pass
        self._process.join(1)
        self._finalizer()
        self._conn.close()
        self._process = None

    def __enter__(self) -> ProcessVerifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
