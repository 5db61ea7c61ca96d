"""The service survives ``kill -9`` (issue 14): every accepted request finishes, after a
restart on the same data directory, with exactly the tokens of an uninterrupted seeded run.

A server with a journal finishes one request, then gets 24 seeded requests with request
ids at once (some streamed), is killed with SIGKILL once some tokens have been generated
but before all are, and is started again on the same directory. Each request id is then
fetched (polled while 202; re-sent with its id if the killed server never accepted it)
and compared, tokens and statistics, with the library's in-process run. Bounded: well
under 90 s.
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest

pytest.importorskip("fastapi")  # the serve extra
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from support import (  # noqa: E402
    PROMPTS,
    expected_spec,
    load_models,
    metric,
    reference,
    scrape,
    spec_of,
)

from specdec_lite.engine.journal import Journal  # noqa: E402
from specdec_lite.service.launch import start_server  # noqa: E402

N_REQUESTS = 24
MAX_TOKENS = 120
KINDS = [("draft", 1.0, "fixed"), ("ngram", 1.0, "heuristic"), ("plain", 1.0, "fixed"),
         ("draft", 0.0, "fixed"), ("medusa", 0.0, "fixed"), ("ngram", 0.7, "fixed"),
         ("draft", 1.0, "heuristic"), ("draft", 1.0, "confidence")]


def _bodies() -> list[dict]:
    return [dict(prompt=PROMPTS[i % len(PROMPTS)], max_tokens=MAX_TOKENS, method=method,
                 temperature=t, k=3 + i % 2, seed=500 + i, request_id=f"crash-{i}",
                 stream=i % 3 == 0, policy=policy)
            for i, (method, t, policy) in enumerate(KINDS[i % len(KINDS)]
                                                    for i in range(N_REQUESTS))]


def _send(url: str, body: dict, outcomes: dict) -> None:
    """One client; the kill breaks its connection (or it finished first)."""
    try:
        reply = httpx.post(url + "/v1/completions", json=body, timeout=30)
        outcomes[body["request_id"]] = reply.status_code
    except httpx.HTTPError as exc:  # the server died under it
        outcomes[body["request_id"]] = type(exc).__name__


def _fetch(url: str, body: dict, deadline: float) -> dict:
    """The finished result of ``body``'s request id from the restarted server."""
    while time.monotonic() < deadline:
        reply = httpx.get(url + f"/v1/completions/{body['request_id']}", timeout=10)
        if reply.status_code == 200:
            return reply.json()
        if reply.status_code == 404:  # the killed server never accepted it: send it again
            again = httpx.post(url + "/v1/completions", json={**body, "stream": False},
                               timeout=30)
            assert again.status_code == 200, again.text
            return again.json()
        assert reply.status_code == 202, reply.text
        time.sleep(0.05)
    raise AssertionError(f"{body['request_id']} did not finish in time")


def test_kill_9_then_restart_finishes_every_request_exactly(tmp_path):
    start = time.monotonic()
    models = load_models()
    bodies = _bodies()
    data_dir, log = tmp_path / "data", tmp_path / "server.log"
    outcomes: dict[str, object] = {}

    server = start_server(data_dir=data_dir, max_batch=8, log_path=log)
    try:
        # one request finished before the crash: read back from the journal after it
        done_before = dict(prompt=PROMPTS[0], max_tokens=40, method="medusa", temperature=0.0,
                           k=4, seed=1, request_id="crash-before")
        reply = httpx.post(server.url + "/v1/completions", json=done_before, timeout=30)
        assert reply.status_code == 200, reply.text
        bodies.append(done_before)
        threads = [threading.Thread(target=_send, args=(server.url, b, outcomes))
                   for b in bodies[:N_REQUESTS]]
        for thread in threads:
            thread.start()
        # wait until some tokens are out (a few steps of the first batch), then kill -9
        wait_until = time.monotonic() + 30
        while time.monotonic() < wait_until:
            if metric(scrape(server.url), "specdec_tokens_total") >= 200:
                break
            time.sleep(0.01)
        else:
            raise AssertionError("no tokens were generated within 30 s")
    finally:
        server.kill()
    assert server.process.returncode == -9
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)

    with Journal(data_dir / "journal.sqlite3") as journal:  # what the kill interrupted
        unfinished = journal.unfinished()
        partial = [i for i in unfinished if journal.load(i).steps]
    assert unfinished, "the kill came after every request had finished"
    assert partial, "no interrupted request had committed steps (nothing to resume from)"

    with start_server(data_dir=data_dir, max_batch=8, log_path=log) as restarted:
        deadline = time.monotonic() + 60
        results = {b["request_id"]: _fetch(restarted.url, b, deadline) for b in bodies}
        samples = scrape(restarted.url)
    assert metric(samples, "specdec_requests_resumed_total") == len(unfinished)

    for body in bodies:
        data = results[body["request_id"]]
        gen = reference(models, body)
        assert data["id"] == body["request_id"]
        assert data["choices"][0]["text"] == models.tokenizer.decode(gen.tokens), body
        assert data["choices"][0]["finish_reason"] == "length"
        assert data["usage"]["completion_tokens"] == body["max_tokens"]
        assert spec_of(data) == pytest.approx(expected_spec(gen)), body["request_id"]
    assert time.monotonic() - start < 90
