"""What a running server holds: the models, the scheduler, the journal and the metrics.

:class:`Runtime` loads the shipped models once (weights are shared and read-only; each
sequence keeps its own KV cache), builds one scheduler over them and, with a data
directory, a journal. Its ``lifespan`` is the FastAPI lifespan: on start it resumes every
job the journal holds as accepted but unfinished (a server killed with ``kill -9`` and
started again finishes them), then starts the engine thread; on shutdown it stops it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from .engines import EngineFactory
from .persist import JobJournal
from .scheduler import Job, Scheduler
from .stats import ServiceMetrics


class Runtime:
    """Models, scheduler, journal and metrics of one server process."""

    def __init__(self, *, data_dir: str | Path | None, max_batch: int, max_queue: int,
                 deadline_s: float, factory: EngineFactory | None = None,
                 journal_sync: str = "NORMAL") -> None:
        self.factory = factory or EngineFactory.shipped()
        self.tokenizer = self.factory.tokenizer
        self.max_len = self.factory.max_len
        self.n_heads = self.factory.n_heads
        self.deadline_s = deadline_s
        self.metrics = ServiceMetrics()
        self.journal = (JobJournal(Path(data_dir) / "journal.sqlite3", synchronous=journal_sync)
                        if data_dir else None)
        self.scheduler = Scheduler(self.factory.make_engine, max_batch=max_batch,
                                   max_queue=max_queue, journal=self.journal,
                                   metrics=self.metrics)
        self.n_resumed = 0

    def finished_job(self, job_id: str) -> Job | None:
        """A finished job from the journal (also one an earlier process finished)."""
        if self.journal is None:
            return None
        job = self.journal.load(job_id, self.deadline_s)
        return job if job is not None and job.finished else None

    def resume(self) -> int:
        """Queue every accepted, unfinished job of the journal; how many there were."""
        if self.journal is None:
            return 0
        jobs = self.journal.unfinished(self.deadline_s)
        for job in jobs:
            self.scheduler.submit(job, force=True)
        self.metrics.resumed(len(jobs))
        return len(jobs)

    def metrics_text(self) -> tuple[str, str]:
        waiting, running = self.scheduler.load()
        return self.metrics.exposition(waiting, running)

    @contextlib.asynccontextmanager
    async def lifespan(self, app):
        self.n_resumed = self.resume()
        self.scheduler.start()
        try:
            yield
        finally:
            self.scheduler.stop()
            if self.journal is not None:
                self.journal.close()
