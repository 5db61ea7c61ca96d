"""The batched engine's target forward behind the verifier boundary: the worker's cache
follows the engine's sequences, a run through a worker writes what an in-process run
writes, and a killed or hanging worker costs a plain step, never the run."""

from __future__ import annotations

import os
import signal
from functools import partial

import numpy as np
import pytest
from support import alarm_after, hanging_small_target

from specdec_lite import load_pretrained
from specdec_lite.engine.batch import BatchEngine
from specdec_lite.engine.batch_boundary import _CACHES, RowsRequest, rows_step
from specdec_lite.engine.faults import InProcessVerifier, ProcessVerifier
from specdec_lite.models.corpus import load_text
from specdec_lite.pretrained import shipped_target
from specdec_lite.teaching.exactness import small_pair


@pytest.fixture(scope="module")
def shipped():
    models = load_pretrained()
    text = load_text("heldout")
    prompts = [models.tokenizer.encode(text[i * 977 : i * 977 + 12 + 9 * i]) for i in range(6)]
    return models, prompts


def test_the_workers_cache_follows_sequences_that_join_and_leave(shipped) -> None:
    models, prompts = shipped
    target = models.target
    _CACHES.clear()
    ctx = {i: np.asarray(p) for i, p in enumerate(prompts)}
    for step, ids in enumerate([(0, 1, 2), (0, 1, 2, 3), (1, 3), (3, 1, 4, 5), (5,)]):
        for i in ids:  # each sequence grows by two tokens per step (one drafted)
            ctx[i] = np.concatenate([ctx[i], [(7 * step + i) % 90 + 3, 40]])
        request = RowsRequest("e", 4, ids, tuple(ctx[i] for i in ids), (2,) * len(ids),
                              (1.0,) * len(ids))
        rows = rows_step(target, request)
        for i, row in zip(ids, rows, strict=True):
            alone = target.last_probs(ctx[i], 2, 1.0)  # [2, V], one sequence, its own cache
            np.testing.assert_allclose(row, alone, atol=1e-5)
        assert sorted(_CACHES["e"][1]) == sorted(ids)  # one slot per live sequence


def run(engine, prompts, n=40):
    for i, p in enumerate(prompts):
        engine.add(p, max_new_tokens=n, seed=i, request_id=i)
    return engine.run()


def test_in_process_boundary_changes_nothing(shipped) -> None:
    models, prompts = shipped
    _CACHES.clear()
    for t, rule in ((0.0, "greedy"), (1.0, "exact")):
        plain = run(BatchEngine(models.target, models.draft, k=3, temperature=t, rule=rule,
                                max_batch=4), prompts)
        bounded = run(BatchEngine(models.target, models.draft, k=3, temperature=t, rule=rule,
                                  max_batch=4, name=f"t{t}",
                                  verifier=InProcessVerifier(models.target, step=rows_step)),
                      prompts)
        for i in plain:
            assert bounded[i].tokens.tolist() == plain[i].tokens.tolist(), (t, i)
    # behind a verifier the engine's own copy of the target reads nothing without a fault
    engine = BatchEngine(models.target, models.draft, k=3, max_batch=4, name="idle",
                         verifier=InProcessVerifier(models.target, step=rows_step))
    for i, p in enumerate(prompts[:3]):
        engine.add(p, max_new_tokens=10, seed=i)
    engine.step()
    assert not engine._target_rows.cache.length.any()


def test_a_killed_worker_costs_plain_steps_not_the_run(shipped) -> None:
    models, prompts = shipped
    undo = alarm_after(240)
    try:
        with ProcessVerifier(partial(shipped_target, "numpy"), step=rows_step) as worker:
            engine = BatchEngine(models.target, models.draft, k=3, temperature=0.0,
                                 rule="greedy", max_batch=4, fall_back=True, verifier=worker,
                                 verify_timeout=30.0)
            for i, p in enumerate(prompts):
                engine.add(p, max_new_tokens=40, request_id=i)
            done = {}
            for _ in range(3):
                done.update(engine.step())
            os.kill(worker.pid, signal.SIGKILL)
            while not engine.idle:
                done.update(engine.step())
            assert worker.restarts >= 1
            assert engine.fallback_causes.get("crash", 0) >= 1, engine.fallback_causes
    finally:
        undo()
    reference = run(BatchEngine(models.target, models.draft, k=3, temperature=0.0,
                                rule="greedy", max_batch=4), prompts)
    for i in reference:  # greedy: the fallback steps write the same tokens
        assert done[i].tokens.tolist() == reference[i].tokens.tolist(), i
    assert any(s.extra == "sample" or not s.proposed for g in done.values() for s in g.steps)


def test_a_hanging_worker_times_out_and_the_run_finishes() -> None:
    target, draft = small_pair()[:2]
    undo = alarm_after(120)
    try:
        with ProcessVerifier(hanging_small_target, step=rows_step) as worker:
            engine = BatchEngine(target, draft, k=2, max_batch=3, fall_back=True,
                                 verifier=worker, verify_timeout=0.5)
            done = run(engine, [[0, 1], [2], [1, 1, 0]], n=12)
    finally:
        undo()
    assert all(len(g.tokens) == 12 for g in done.values())
    assert engine.fallback_causes.get("timeout", 0) >= 1, engine.fallback_causes
    assert worker.restarts >= 1


def test_a_bad_verifier_is_refused(shipped) -> None:
    models, _ = shipped
    with pytest.raises(TypeError, match="verifier must be callable"):
        BatchEngine(models.target, models.draft, k=2, verifier=42)
    with pytest.raises(ValueError, match="verify_timeout"):
        BatchEngine(models.target, models.draft, k=2, verify_timeout=0)
