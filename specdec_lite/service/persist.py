"""The service's crash-safe record of requests: :class:`JobJournal` over
:class:`specdec_lite.engine.journal.Journal` (SQLite, write-ahead logging).

A request is written when it is accepted (before it waits for a slot), each of its steps
with the Generator state after it when the step is done, and its end. After ``kill -9``
a new server on the same data directory reads every request still marked running back
as a :class:`~.scheduler.Job` with its tokens and Generator state, and the engine continues
it exactly where it stopped; finished results stay readable by request id.

A journal that cannot be written for a while (the disk stalls, or another process holds the
file's lock) loses nothing: steps and ends that could not be written wait, in order, in
memory and are written by the next :meth:`JobJournal.flush`, which the engine thread calls
each turn while the journal is :attr:`~JobJournal.behind`. Until then a crash would resume a
request from its last written step, and the same seed and Generator state give the same
tokens again. Only :meth:`JobJournal.accept` must succeed at once: a request the journal
could not record is refused (the server answers 503), never silently accepted.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

import numpy as np

from ..engine.journal import Entry, Journal
from ..engine.trace import step_counts
from .scheduler import Job, Settings, StepUpdate, stop_cut

#: How many times a server start resumes one request before setting it aside.
MAX_RESUMES = 3


def _settings_dict(s: Settings) -> dict:
    return dict(method=s.method, k=s.k, policy=s.policy, max_new_tokens=s.max_new_tokens,
                temperature=s.temperature, top_p=s.top_p, stop=[list(x) for x in s.stop])


class JobJournal:
    """One journal file shared by the HTTP side (accept, look up) and the engine thread
    (steps, ends); calls are serialised by a lock.

    ``busy_timeout_s`` is how long one write waits for a lock held elsewhere before it
    gives up for now: short, because the engine thread waits with it; what was not
    written stays pending (see the module).
    """

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 0.25,
                 synchronous: str = "NORMAL") -> None:
        self._owner = _own(Path(path))
        try:
            self.journal = Journal(path, busy_timeout_s=busy_timeout_s,
                                   synchronous=synchronous)
        except BaseException:
            os.close(self._owner)
            raise
        self._lock = threading.Lock()
        self._n_steps: dict[str, int] = {}  # steps written per running job
        # per job, in order: ("step", step, cause, draft_calls, rng_state) or ("end", error)
        self._pending: dict[str, list[tuple]] = {}
        self.last_error: str | None = None
        self.set_aside: list[str] = []  # unfinished rows :meth:`unfinished` could not read

    @property
    def behind(self) -> int:
        """How many steps and ends wait to be written (0: the journal is up to date)."""
        with self._lock:
            return sum(len(items) for items in self._pending.values())

    def accept(self, job: Job) -> None:
        """Record ``job`` as accepted; raises if the journal cannot (then refuse it)."""
        with self._lock:
            self.journal.begin(job.id, job.prompt, _settings_dict(job.settings),
                               job.settings.seed, np.random.default_rng(job.settings.seed))

    def progress(self, job: Job, update: StepUpdate) -> None:
        """Write the steps of ``update``; raises if they could not be written now (they
        stay pending). While the journal is behind, nothing is tried here: :meth:`flush`
        writes everything in order."""
        cause = "error" if update.n_fallbacks else None
        with self._lock:
            items = self._pending.setdefault(job.id, [])
            items.extend(("step", step, cause, update.n_draft_calls if i == 0 else 0,
                          update.rng_state) for i, step in enumerate(update.steps))
            if self.last_error is None:
                self._write(job.id)

    def finish(self, job: Job) -> None:
        """Write the end of ``job`` (finished, or failed with its error) after its steps."""
        with self._lock:
            self._pending.setdefault(job.id, []).append(("end", job.error))
            if self.last_error is None:
                self._write(job.id)

    def forget(self, job_id: str) -> None:
        """Drop the finished job ``job_id`` from the journal (to run its request again)."""
        with self._lock:
            self._pending.pop(job_id, None)
            self._n_steps.pop(job_id, None)
            self.journal.forget(job_id)

    def prune(self, max_age_s: float | None, max_rows: int | None) -> int:
        """Retention: drop ended requests older than ``max_age_s`` and all but the newest
        ``max_rows``; how many were dropped (see :meth:`Journal.prune`)."""
        with self._lock:
            older_than = None if max_age_s is None else time.time() - max_age_s
            return self.journal.prune(older_than, max_rows)

    def flush(self) -> None:
        """Write everything pending, job by job in order; raises at the first write that
        still fails (the rest stays pending)."""
        with self._lock:
            for job_id in list(self._pending):
                self._write(job_id)
            self.last_error = None

    def _write(self, job_id: str) -> None:
        """Write ``job_id``'s pending items in order, each removed once written."""
        items = self._pending[job_id]
        try:
            while items:
                kind, *args = items[0]
                if kind == "step":
                    idx = self._n_steps.get(job_id, 0)
                    self.journal.record_state(job_id, idx, *args)
                    self._n_steps[job_id] = idx + 1
                else:
                    if args[0]:
                        self.journal.fail(job_id, args[0])
                    else:
                        self.journal.finish(job_id)
                    self._n_steps.pop(job_id, None)
                items.pop(0)
        except Exception as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            raise
        del self._pending[job_id]

    def load(self, job_id: str, deadline_s: float) -> Job | None:
        """The journaled request ``job_id`` as a Job, or None if the journal lacks it or
        cannot read it."""
        with self._lock:
            try:
                return _job(self.journal.load(job_id), deadline_s)
            except (KeyError, TypeError, ValueError):
                return None

    def unfinished_ids(self) -> list[str]:
        """The ids of every accepted request not yet finished, oldest first."""
        with self._lock:
            return self.journal.unfinished()

    def resume_job(self, job_id: str, deadline_s: float,
                   max_resumes: int = MAX_RESUMES) -> Job | None:
        """The unfinished request ``job_id``, ready to continue; None if it is set aside: a
        row that cannot be read (damaged), or a request already resumed ``max_resumes``
        times (each resume is counted in the journal: one that kills the server every time
        must not do so for ever). A request set aside is marked failed with the reason and
        its id added to :attr:`set_aside`."""
        with self._lock:
            try:
                entry = self.journal.load(job_id)
                job = _job(entry, deadline_s)
                n = self.journal.count_resume(job_id)
                if n > max_resumes:
                    raise ValueError(f"resumed {n - 1} times already, given up")
            except (KeyError, TypeError, ValueError) as exc:
                self.set_aside.append(job_id)
                self.journal.fail(job_id, f"set aside at start: {exc}"[:500])
                return None
            self._n_steps[job.id] = len(entry.steps)
            return job

    def unfinished(self, deadline_s: float) -> list[Job]:
        """Every unfinished request that is not set aside (see :meth:`resume_job`)."""
        jobs = (self.resume_job(job_id, deadline_s) for job_id in self.unfinished_ids())
        return [job for job in jobs if job is not None]

    def close(self) -> None:
        with self._lock:
            self.journal.close()
            if self._owner is not None:
                os.close(self._owner)  # releases the lock
                self._owner = None


def _own(journal: Path) -> int:
    """Take the journal's owner lock (``<journal>.lock``, an exclusive ``flock`` held while
    the descriptor it returns is open): one server per data directory. A second one would
    resume the first one's running jobs; it is refused instead, naming the directory."""
    lock_path = journal.with_name(journal.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise ValueError(f"the data directory {journal.parent} is in use by another server "
                         f"(process {holder}); give each server its own --data-dir") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def _job(entry: Entry, deadline_s: float) -> Job:
    s = entry.settings
    settings = Settings(method=s["method"], k=s["k"], max_new_tokens=s["max_new_tokens"],
                        temperature=s["temperature"], top_p=s["top_p"], seed=entry.seed,
                        stop=tuple(tuple(x) for x in s.get("stop", ())),
                        policy=s.get("policy", "fixed"))
    tokens = [int(t) for t in entry.tokens][: settings.max_new_tokens]
    cut = stop_cut(tokens, settings.stop)
    if cut is not None:  # the steps keep every token the last step emitted
        tokens = tokens[:cut]
    job = Job(id=entry.request_id, prompt=entry.prompt, settings=settings,
              deadline=time.monotonic() + deadline_s, tokens=tokens,
              rng_state=entry.rng_state if entry.steps else None, stopped=cut is not None,
              steps=list(entry.steps))
    steps = entry.steps
    job.stats.update(
        n_target_calls=len(steps), n_draft_calls=entry.draft_calls,
        # Medusa calls its heads once per step after the first (the journal keeps no count)
        n_head_calls=max(len(steps) - 1, 0) if settings.method == "medusa" else 0,
        **step_counts(steps), n_fallbacks=sum(c is not None for c in entry.causes))
    if entry.status != "running":
        job.status, job.error = entry.status, entry.error
        job.done.set()
    return job
