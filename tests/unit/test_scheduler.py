"""The service scheduler's Retry-After comes from the queue's state: how long jobs have been
taking and how many run at once (specdec_lite.service.scheduler.Scheduler.retry_after_s).

A fake engine emits one token per step and sleeps a fixed time per step, so a job's run
time is known: 30 tokens at 0.05 s a step take about 1.5 s.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from specdec_lite.service.scheduler import Job, QueueFull, Scheduler, Settings, StepUpdate

STEP_S = 0.05
N_TOKENS = 30


class SlowEngine:
    """One token per step for every sequence, ``STEP_S`` seconds a step."""

    def __init__(self) -> None:
        self.jobs: dict[str, int] = {}  # key -> tokens still to emit

    def add(self, key, prompt, tokens, settings, rng_state) -> None:
        self.jobs[key] = settings.max_new_tokens - len(tokens)

    def remove(self, key) -> None:
        self.jobs.pop(key, None)

    def step(self) -> dict[str, StepUpdate]:
        time.sleep(STEP_S)
        updates = {}
        for key in list(self.jobs):
            self.jobs[key] -= 1
            updates[key] = StepUpdate(new_tokens=[1], finished=self.jobs[key] <= 0)
        return updates

    def __len__(self) -> int:
        return len(self.jobs)


def job(i: int) -> Job:
    return Job(id=f"j{i}", prompt=np.array([1, 2]), deadline=time.monotonic() + 60,
               settings=Settings("plain", 0, N_TOKENS, 1.0, None, i))


def test_retry_after_follows_how_long_jobs_take():
    scheduler = Scheduler(lambda *key: SlowEngine(), max_batch=1, max_queue=2)
    assert scheduler.retry_after_s() == 1  # nothing measured yet
    scheduler.start()
    try:
        first = scheduler.submit(job(0))
        assert first.done.wait(30) and first.status == "finished"
        run_s = scheduler.mean_run_s
        assert run_s == pytest.approx(N_TOKENS * STEP_S, rel=0.5)
        scheduler.submit(job(1))  # runs
        scheduler.submit(job(2))  # waits: the queue holds max_queue = 2 jobs
        with pytest.raises(QueueFull) as full:
            scheduler.submit(job(3))
        # one job runs at a time, so a place frees about once a job's run time
        assert full.value.retry_after_s == math.ceil(run_s) >= 2
    finally:
        scheduler.stop()
