"""What a running server holds: the models, the scheduler, the journal and the metrics.

:class:`Runtime` loads the shipped models once (weights are shared and read-only; each
sequence keeps its own KV cache), builds one scheduler over them and, with a data
directory, a journal. Its ``lifespan`` is the FastAPI lifespan: on start it resumes every
job the journal holds as accepted but unfinished (a server killed with ``kill -9`` and
started again finishes them), then starts the engine thread; on shutdown it stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from pathlib import Path

from .engines import EngineFactory
from .persist import JobJournal
from .scheduler import Job, Scheduler
from .stats import ServiceMetrics


class Runtime:
    """Models, scheduler, journal and metrics of one server process."""

    def __init__(self, *, data_dir: str | Path | None, max_batch: int, max_queue: int,
                 deadline_s: float, factory: EngineFactory | None = None,
                 journal_sync: str = "NORMAL", retention_s: float | None = None,
                 retention_rows: int | None = None) -> None:
        self.factory = factory or EngineFactory.shipped()
        self.tokenizer = self.factory.tokenizer
        self.max_len = self.factory.max_len
        self.n_heads = self.factory.n_heads
        self.methods = self.factory.methods
        self.deadline_s = deadline_s
        self.metrics = ServiceMetrics()
        self.journal = (JobJournal(Path(data_dir) / "journal.sqlite3", synchronous=journal_sync)
                        if data_dir else None)
        self.scheduler = Scheduler(self.factory.make_engine, max_batch=max_batch,
                                   max_queue=max_queue, journal=self.journal,
                                   metrics=self.metrics)
        self.n_resumed = 0
        self.deferred: deque[str] = deque()  # unfinished journal ids not yet queued
        self.retention_s, self.retention_rows = retention_s, retention_rows
        self.n_pruned = 0

    def finished_job(self, job_id: str) -> Job | None:
        """A finished job from the journal (also one an earlier process finished)."""
        if self.journal is None:
            return None
        job = self.journal.load(job_id, self.deadline_s)
        return job if job is not None and job.finished else None

    def resume(self) -> int:
        """Queue the accepted, unfinished jobs of the journal, as many as the queue bound
        leaves room for; the rest wait in :attr:`deferred` (ids only, nothing loaded) and
        join as places free (:meth:`resume_more`). Returns how many were queued."""
        if self.journal is None:
            return 0
        self.deferred = deque(self.journal.unfinished_ids())
        return self.resume_more()

    def resume_more(self) -> int:
        """Queue deferred jobs while the queue has room; how many were queued."""
        n = 0
        while self.deferred:
            waiting, running = self.scheduler.load()
            if waiting + running >= self.scheduler.max_queue:
                break
            job = self.journal.resume_job(self.deferred.popleft(), self.deadline_s)
            if job is not None:
                self.scheduler.submit(job, force=True)
                n += 1
        self.n_resumed += n
        self.metrics.resumed(n)
        return n

    async def _resume_rest(self) -> None:
        while self.deferred:
            await asyncio.sleep(0.2)
            await asyncio.to_thread(self.resume_more)

    def metrics_text(self) -> tuple[str, str]:
        waiting, running = self.scheduler.load()
        return self.metrics.exposition(waiting, running)

    def prune(self) -> int:
        """Apply the journal's retention (at start, then hourly); how many were dropped."""
        if self.journal is None or (self.retention_s is None and self.retention_rows is None):
            return 0
        n = self.journal.prune(self.retention_s, self.retention_rows)
        self.n_pruned += n
        return n

    async def _prune_hourly(self) -> None:
        while True:
            await asyncio.sleep(3600)
            with contextlib.suppress(Exception):  # a busy disk: try again next hour
                await asyncio.to_thread(self.prune)

    @contextlib.asynccontextmanager
    async def lifespan(self, app):
        self.prune()
        self.resume()
        self.factory.worker()  # a worker-process verifier is ready before the first step
        self.scheduler.start()
        tasks = [asyncio.create_task(self._prune_hourly()),
                 asyncio.create_task(self._resume_rest())]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            self.scheduler.stop()
            self.factory.close()
            if self.journal is not None:
                self.journal.close()
