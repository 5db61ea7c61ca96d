"""The service's crash-safe record of requests: :class:`JobJournal` over
:class:`specdec_lite.journal.Journal` (SQLite, write-ahead logging).

A request is written when it is accepted (before it waits for a slot), each of its steps
with the Generator state after it when the step is done, and its end. After ``kill -9``
a new server on the same data directory reads every request still marked running back
as a :class:`~.scheduler.Job` with its tokens and Generator state, and the engine continues
it exactly where it stopped; finished results stay readable by request id.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from ..journal import Entry, Journal
from .scheduler import Job, Settings, StepUpdate


def _settings_dict(s: Settings) -> dict:
    return dict(method=s.method, k=s.k, max_new_tokens=s.max_new_tokens,
                temperature=s.temperature, top_p=s.top_p)


class JobJournal:
    """One journal file shared by the HTTP side (accept, look up) and the engine thread
    (steps, ends); calls are serialised by a lock."""

    def __init__(self, path: str | Path) -> None:
        self.journal = Journal(path)
        self._lock = threading.Lock()
        self._n_steps: dict[str, int] = {}

    def accept(self, job: Job) -> None:
        with self._lock:
            self.journal.begin(job.id, job.prompt, _settings_dict(job.settings),
                               job.settings.seed, np.random.default_rng(job.settings.seed))

    def progress(self, job: Job, update: StepUpdate) -> None:
        with self._lock:
            idx = self._n_steps.get(job.id, 0)
            cause = "error" if update.n_fallbacks else None
            for i, step in enumerate(update.steps):
                self.journal.record_state(job.id, idx + i, step, cause,
                                          update.n_draft_calls if i == 0 else 0,
                                          update.rng_state)
            self._n_steps[job.id] = idx + len(update.steps)

    def finish(self, job: Job) -> None:
        with self._lock:
            self._n_steps.pop(job.id, None)
            if job.error:
                self.journal.fail(job.id, job.error)
            else:
                self.journal.finish(job.id)

    def load(self, job_id: str, deadline_s: float) -> Job | None:
        """The journaled request ``job_id`` as a Job, or None if the journal lacks it."""
        with self._lock:
            try:
                entry = self.journal.load(job_id)
            except KeyError:
                return None
        return _job(entry, deadline_s)

    def unfinished(self, deadline_s: float) -> list[Job]:
        """Every accepted request not yet finished, oldest first, ready to continue."""
        with self._lock:
            entries = [self.journal.load(i) for i in self.journal.unfinished()]
        jobs = [_job(e, deadline_s) for e in entries]
        for job, entry in zip(jobs, entries, strict=True):
            self._n_steps[job.id] = len(entry.steps)
        return jobs

    def close(self) -> None:
        with self._lock:
            self.journal.close()


def _job(entry: Entry, deadline_s: float) -> Job:
    s = entry.settings
    settings = Settings(method=s["method"], k=s["k"], max_new_tokens=s["max_new_tokens"],
                        temperature=s["temperature"], top_p=s["top_p"], seed=entry.seed)
    tokens = [int(t) for t in entry.tokens][: settings.max_new_tokens]
    job = Job(id=entry.request_id, prompt=entry.prompt, settings=settings,
              deadline=time.monotonic() + deadline_s, tokens=tokens,
              rng_state=entry.rng_state if entry.steps else None)
    steps = entry.steps
    job.stats.update(
        n_target_calls=len(steps), n_draft_calls=entry.draft_calls,
        # Medusa calls its heads once per step after the first (the journal keeps no count)
        n_head_calls=max(len(steps) - 1, 0) if settings.method == "medusa" else 0,
        n_proposed=sum(len(x.proposed) for x in steps),
        n_accepted=sum(x.n_accepted for x in steps),
        n_checked=sum(min(x.n_accepted + 1, len(x.proposed)) for x in steps),
        n_fallbacks=sum(c is not None for c in entry.causes))
    if entry.status != "running":
        job.status, job.error = entry.status, entry.error
        job.done.set()
    return job
