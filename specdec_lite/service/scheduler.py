"""The service's scheduler: a bounded queue in front of a continuously batched engine.

One background thread owns the models and runs the decode loop. Each turn it admits
waiting jobs into the running batch (up to ``max_batch`` sequences), advances every running
sequence by one speculative step (one batched target forward per engine), hands the new
tokens to whoever listens, and retires finished, failed or expired jobs. Requests therefore
join the running batch between steps instead of waiting for each other: this is continuous
batching. ``max_batch=1`` turns batching off (one sequence at a time, first come first
served), for comparison.

The HTTP layer never touches the models: it calls :meth:`Scheduler.submit` (which refuses
with :class:`QueueFull` past ``max_queue`` jobs, so the server can answer 429), and reads a
job's progress from :class:`Job` through a listener callback.

Engines are pluggable (:class:`StepEngine`): the scheduler keeps one per :func:`engine_key`,
``(method, k)``: each engine carries each sequence's own temperature and top-p, so
requests with different sampling settings share its steps (the batched methods share
every target forward too; Medusa advances each of its requests one step per turn).
An engine holds its caches for a whole batch, so idle ones are dropped (all but the
``max_idle_engines`` newest): clients sending many distinct temperatures must not make
the server hold one engine for each.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


class QueueFull(Exception):
    """The scheduler holds ``max_queue`` jobs already; retry after ``retry_after_s``."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"queue full, retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class Settings:
    """How one request is decoded (already validated by the API schema)."""

    method: str
    k: int
    max_new_tokens: int
    temperature: float
    top_p: float | None
    seed: int
    stop: tuple[tuple[int, ...], ...] = ()  # token sequences that end the text (excluded)
    policy: str = "fixed"  # how k is chosen at each step (draft_length.POLICIES)


def stop_cut(tokens: list[int], stops: tuple[tuple[int, ...], ...], start: int = 0) -> int | None:
    """Where ``tokens`` must end because a stop sequence begins there: the smallest index
    ``i >= start`` at which one of ``stops`` occurs whole, or None."""
    best = None
    for stop in stops:
        n = len(stop)
        for i in range(max(start, 0), len(tokens) - n + 1):
            if best is not None and i >= best:
                break
            if tuple(tokens[i:i + n]) == stop:
                best = i
                break
    return best


@dataclass
class StepUpdate:
    """What one engine step did for one sequence."""

    new_tokens: list[int]
    finished: bool
    n_target_calls: int = 1
    n_draft_calls: int = 0
    n_head_calls: int = 0
    n_proposed: int = 0
    n_accepted: int = 0
    n_checked: int = 0
    n_fallbacks: int = 0
    rng_state: dict | None = None  # the sequence's Generator state after the step
    steps: list = field(default_factory=list)  # the decode.Step records of the step


class StepEngine(Protocol):
    """A batch of sequences advanced together, one step at a time."""

    def add(self, key: str, prompt: np.ndarray, tokens: list[int], settings: Settings,
            rng_state: dict | None, steps: list | None = None) -> None: ...

    def remove(self, key: str) -> None: ...

    def step(self) -> dict[str, StepUpdate]: ...

    def __len__(self) -> int: ...


def engine_key(s: Settings) -> tuple:
    """The engine a job joins: one per (method, k); every sequence in it carries its own
    temperature and top-p."""
    return (s.method, s.k)


def same_request(a: Settings, b: Settings, seeded: bool) -> bool:
    """Whether ``b`` asks for what ``a`` was run with: every setting equal, and the seed
    too when ``b``'s request named one (an unseeded request gets a random seed)."""
    fields = ("method", "k", "policy", "max_new_tokens", "temperature", "top_p", "stop")
    return (all(getattr(a, f) == getattr(b, f) for f in fields)
            and (not seeded or a.seed == b.seed))


FAILURE_KINDS = ("deadline", "cancelled", "failed")


def failure_kind(error: str | None) -> str | None:
    """The kind of a failed job's ``error``, one of :data:`FAILURE_KINDS`: ``"deadline"``
    (it ran past its deadline), ``"cancelled"`` (DELETE, or its client left) or
    ``"failed"`` (the engine or the journal failed); None for no error. Every error the
    scheduler writes starts with its kind's word, so a job read back from the journal
    has its kind too."""
    if error is None:
        return None
    return next((kind for kind in FAILURE_KINDS[:2] if error.startswith(kind)), "failed")


@dataclass
class Job:
    """One accepted request and everything generated for it so far."""

    id: str
    prompt: np.ndarray  # [n_prompt] token ids
    settings: Settings
    deadline: float  # time.monotonic() after which the job fails with "deadline"
    tokens: list[int] = field(default_factory=list)
    status: str = "queued"  # queued | running | finished | failed
    stopped: bool = False  # finished at a stop sequence (OpenAI's finish_reason "stop")
    error: str | None = None
    stats: dict[str, int] = field(default_factory=lambda: dict(
        n_target_calls=0, n_draft_calls=0, n_head_calls=0, n_proposed=0, n_accepted=0,
        n_checked=0, n_fallbacks=0))
    rng_state: dict | None = None
    steps: list = field(default_factory=list)  # a resumed job's steps (decode.Step) so far
    listeners: list[Callable[[Job, list[int]], None]] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    submitted_at: float = field(default_factory=time.monotonic)
    started_at: float | None = None  # when it joined the running batch

    @property
    def finished(self) -> bool:
        return self.status in ("finished", "failed")

    @property
    def failure(self) -> str | None:
        """Why the job failed, as a kind (:func:`failure_kind`); None if it did not."""
        return failure_kind(self.error)


class Scheduler:
    """Runs jobs on engines made by ``make_engine(method, k, temperature, top_p,
    max_batch)`` in one thread.

    ``journal`` (optional) is told about every job, step and result so that a restarted
    server can finish what a killed one had accepted; ``metrics`` (optional) is told about
    steps and outcomes. Both are duck-typed; see :mod:`specdec_lite.service.app`.
    """

    def __init__(self, make_engine: Callable[..., StepEngine], *,
                 max_batch: int = 16, max_queue: int = 64, journal=None, metrics=None,
                 idle_sleep_s: float = 0.002, max_idle_engines: int = 4) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        self._make_engine = make_engine
        self.max_batch = max_batch
        self.max_queue = max_queue
        self.journal = journal
        self.metrics = metrics
        self._idle_sleep_s = idle_sleep_s
        self.max_idle_engines = max_idle_engines
        self._lock = threading.RLock()
        self._waiting: deque[Job] = deque()
        self._running: dict[str, Job] = {}
        self._jobs: dict[str, Job] = {}
        self._done: OrderedDict[str, Job] = OrderedDict()  # the latest finished jobs
        self._engines: dict[tuple, StepEngine] = {}
        self._engine_of: dict[str, tuple] = {}
        self._cancels: dict[str, str] = {}  # job id -> why, for the engine thread to apply
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.n_steps = 0
        self.last_error: str | None = None
        self.mean_run_s: float | None = None  # running mean of admission-to-end times

    # -- the HTTP side --------------------------------------------------------------

    def submit(self, job: Job, *, force: bool = False) -> Job:
        """Queue ``job`` (or return the live job with the same id). ``force`` skips the
        queue bound, for jobs resumed from the journal, which were accepted already.

        The journal records the job before it is queued, outside the scheduler's lock (a
        slow disk must not stall the engine thread); if it cannot, the job is not accepted
        and the journal's error is raised."""
        with self._lock:
            known = self._jobs.get(job.id) or self._done.get(job.id)
            if known is not None:
                return known
            if not force and len(self._jobs) >= self.max_queue:
                raise QueueFull(retry_after_s=self.retry_after_s())
            self._jobs[job.id] = job  # holds its place (and its id) while it is journaled
        if self.journal is not None and not force:
            try:
                self.journal.accept(job)
            except BaseException:
                with self._lock:
                    self._jobs.pop(job.id, None)
                raise
        with self._lock:
            self._waiting.append(job)
        return job

    def cancel(self, job_id: str, reason: str = "cancelled") -> Job | None:
        """Stop the live job ``job_id``: at the engine thread's next turn it leaves the
        queue or its engine (its batch slot and caches are freed) and fails with
        ``reason`` (given the prefix ``"cancelled: "`` if it lacks it, so its kind is
        ``"cancelled"``), keeping the tokens it has. Returns the job, or None if it is not
        live (unknown, or already finished)."""
        if not reason.startswith("cancelled"):
            reason = f"cancelled: {reason}"
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.finished:
                return None
            self._cancels.setdefault(job_id, reason)
            return job

    def forget(self, job_id: str) -> bool:
        """Drop the failed job ``job_id`` (here and in the journal), so that a request with
        its id runs again; False (nothing done) unless it failed."""
        with self._lock:
            job = self._done.get(job_id)
            if job is not None and job.status != "failed":
                return False
            self._done.pop(job_id, None)
        if self.journal is not None:
            self.journal.forget(job_id)
        return True

    def retry_after_s(self) -> int:
        """Seconds until a queue place is likely to free: with r jobs running, each taking
        about ``mean_run_s``, one ends about every ``mean_run_s / r`` seconds. 1 before any
        job has finished; at most 60."""
        if self.mean_run_s is None:
            return 1
        running = max(len(self._running), 1)
        return int(min(max(math.ceil(self.mean_run_s / running), 1), 60))

    def get(self, job_id: str) -> Job | None:
        """The live or recently finished job ``job_id``, if this process has it."""
        with self._lock:
            return self._jobs.get(job_id) or self._done.get(job_id)

    def load(self) -> tuple[int, int]:
        """(waiting, running) job counts."""
        with self._lock:
            return len(self._waiting), len(self._running)

    # -- the engine thread ----------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="specdec-engine",
                                            daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._turn()
            except Exception as exc:  # e.g. the journal's disk failed: keep serving
                self.last_error = f"{type(exc).__name__}: {exc}"
                if self.metrics is not None:
                    self.metrics.error("scheduler")
                time.sleep(0.1)

    def _turn(self) -> None:
        """One turn of the engine thread: catch the journal up, admit, expire, one step
        per engine."""
        if self.journal is not None and self.journal.behind:
            try:
                self.journal.flush()
            except Exception:  # still unwritable: it stays behind, nothing is dropped
                pass
        self._apply_cancels()
        self._admit()
        if not self._running:
            time.sleep(self._idle_sleep_s)
            return
        self._expire()
        for key, engine in list(self._engines.items()):
            if len(engine):
                self._step(key, engine)
        self._drop_idle_engines()

    def _drop_idle_engines(self) -> None:
        idle = [key for key, engine in self._engines.items() if not len(engine)]
        for key in idle[: max(len(idle) - self.max_idle_engines, 0)]:  # oldest first
            del self._engines[key]

    def _admit(self) -> None:
        with self._lock:
            while self._waiting and len(self._running) < self.max_batch:
                job = self._waiting.popleft()
                if job.finished:
                    continue
                if job.stopped:  # resumed after its stop sequence was written: it is done
                    self._finish(job, None)
                    continue
                s = job.settings
                key = engine_key(s)
                engine = self._engines.get(key)
                if engine is None:
                    engine = self._engines[key] = self._make_engine(
                        s.method, s.k, s.temperature, s.top_p, self.max_batch)
                try:
                    engine.add(job.id, job.prompt, list(job.tokens), s, job.rng_state,
                               job.steps)
                except Exception as exc:  # a job the engine refuses fails alone
                    self._finish(job, f"{type(exc).__name__}: {exc}")
                    continue
                job.status = "running"
                job.started_at = time.monotonic()
                self._running[job.id] = job
                self._engine_of[job.id] = key

    def _apply_cancels(self) -> None:
        with self._lock:
            cancels, self._cancels = self._cancels, {}
            queued = [job for job in self._waiting if job.id in cancels]
            for job in queued:
                self._waiting.remove(job)
            # a job still being journaled is in neither list yet: keep its cancel for later
            later = set(cancels) - {job.id for job in queued} - set(self._running)
            self._cancels.update({i: cancels[i] for i in later if i in self._jobs})
        for job in queued:
            self._finish(job, cancels[job.id])
        for job_id, reason in cancels.items():
            job = self._running.get(job_id)
            if job is not None:
                self._retire(job, reason)

    def _expire(self) -> None:
        now = time.monotonic()
        for job in [j for j in self._running.values() if now > j.deadline]:
            self._retire(job, "deadline exceeded")

    def _step(self, key: tuple, engine: StepEngine) -> None:
        start = time.perf_counter()
        try:
            updates = engine.step()
        except Exception as exc:  # the engine failed as a whole: fail its jobs, keep serving
            self.last_error = f"{type(exc).__name__}: {exc}"
            for job_id, k in list(self._engine_of.items()):
                if k == key:
                    self._retire(self._running[job_id], self.last_error)
            self._engines.pop(key, None)
            if self.metrics is not None:
                self.metrics.error("engine")
            return
        elapsed = time.perf_counter() - start
        self.n_steps += 1
        if self.metrics is not None:
            self.metrics.step(len(updates), elapsed)
        for job_id, update in updates.items():
            job = self._running.get(job_id)
            if job is None:
                continue
            room = job.settings.max_new_tokens - len(job.tokens)
            n_before = len(job.tokens)
            self._append(job, [int(t) for t in update.new_tokens[:room]])
            new = job.tokens[n_before:]  # what the step added, up to a stop sequence
            for name in job.stats:
                job.stats[name] += getattr(update, name)
            job.rng_state = update.rng_state
            if self.metrics is not None:
                self.metrics.sequence_step(job.id, update, len(new), elapsed,
                                           job.settings.method)
            self._journal(self.journal.progress if self.journal else None, job, update)
            for listener in list(job.listeners):
                listener(job, new)
            if job.stopped or update.finished or len(job.tokens) >= job.settings.max_new_tokens:
                self._retire(job, None)

    @staticmethod
    def _append(job: Job, new: list[int]) -> None:
        """Add ``new`` to the job's tokens, cut before a stop sequence if one completes.
        One list operation either way, so a reader on another thread never sees a stop
        sequence whole (a stream holds back the last few tokens, which may start one)."""
        stops = job.settings.stop
        if stops:
            longest = max(len(s) for s in stops)
            tokens = job.tokens + new
            cut = stop_cut(tokens, stops, start=len(job.tokens) - longest + 1)
            if cut is not None:
                job.stopped = True
                if cut < len(job.tokens):
                    del job.tokens[cut:]
                else:
                    job.tokens.extend(tokens[len(job.tokens):cut])
                return
        job.tokens.extend(new)

    def _journal(self, write: Callable | None, *args) -> None:
        """Call a journal write; one that fails leaves the journal behind (its writes
        wait, in order, for the next flush) and is counted, but never stops the step:
        every other job of the step still gets its tokens."""
        if write is None:
            return
        try:
            write(*args)
        except Exception as exc:
            self.last_error = f"journal: {type(exc).__name__}: {exc}"
            if self.metrics is not None:
                self.metrics.error("journal")

    def health(self) -> tuple[str, str | None]:
        """("ok" | "degraded" | "engine stopped", why): degraded while the journal has
        writes it could not make yet."""
        if not self.alive:
            return "engine stopped", self.last_error
        if self.journal is not None and self.journal.behind:
            return "degraded", f"journal behind by {self.journal.behind} writes: " \
                               f"{self.journal.last_error}"
        return "ok", None

    def _retire(self, job: Job, error: str | None) -> None:
        key = self._engine_of.pop(job.id, None)
        if key is not None and key in self._engines:
            self._engines[key].remove(job.id)
        self._finish(job, error)
        self._running.pop(job.id, None)  # after: /health counts it until its result is read

    def _finish(self, job: Job, error: str | None) -> None:
        job.status = "failed" if error else "finished"
        job.error = error
        if error is None and job.started_at is not None:  # a running mean over ~10 jobs
            run_s = time.monotonic() - job.started_at
            self.mean_run_s = run_s if self.mean_run_s is None else \
                0.9 * self.mean_run_s + 0.1 * run_s
        self._journal(self.journal.finish if self.journal else None, job)
        if self.metrics is not None:
            self.metrics.outcome(job)
        for listener in list(job.listeners):
            listener(job, [])
        with self._lock:
            self._jobs.pop(job.id, None)
            self._done[job.id] = job
            while len(self._done) > 1024:
                self._done.popitem(last=False)
        job.done.set()
