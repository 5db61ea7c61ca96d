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

    def add(self, key, prompt, tokens, settings, rng_state, steps=None) -> None:
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


def test_every_failure_has_a_kind_and_one_http_status():
    """A job's failure kind follows from how it failed (deadline, DELETE or a client that
    left, the engine), whatever the reason's wording; the app maps each kind to one
    status."""
    pytest.importorskip("fastapi")
    from specdec_lite.service.app import FAILURE_STATUS, failure_status
    from specdec_lite.service.scheduler import FAILURE_KINDS

    scheduler = Scheduler(lambda *key: SlowEngine(), max_batch=2, max_queue=4)
    scheduler.start()
    try:
        late = job(0)
        late.deadline = time.monotonic() + 0.2  # 30 steps of 0.05 s outlast it
        left, deleted = scheduler.submit(job(1)), scheduler.submit(job(2))
        scheduler.submit(late)
        time.sleep(0.1)
        scheduler.cancel(left.id, "the client disconnected")  # no "cancelled" prefix given
        scheduler.cancel(deleted.id, "cancelled by DELETE")
        assert all(j.done.wait(30) for j in (late, left, deleted))
    finally:
        scheduler.stop()
    assert [j.failure for j in (late, left, deleted)] == ["deadline", "cancelled", "cancelled"]
    assert left.error == "cancelled: the client disconnected"
    assert [failure_status(j) for j in (late, left, deleted)] == [504, 409, 409]
    broken = job(3)
    broken.status, broken.error = "failed", "RuntimeError: the engine stopped"
    assert broken.failure == "failed" and failure_status(broken) == 500
    assert set(FAILURE_STATUS) == set(FAILURE_KINDS) and job(4).failure is None
