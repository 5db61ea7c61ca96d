"""The service loses nothing when its journal stalls, and frees what a departed client held
(issue 26), against real server processes on free 127.0.0.1 ports. Every wait is bounded.

- A journal file locked by another connection for a while: every request still gets the
  tokens of an uninterrupted seeded run; `/health` answers at once and says "degraded"
  while writes wait, `/ready` is 503 meanwhile; a request that arrives then is refused
  with 503 (never accepted unrecorded); after the lock the journal catches up, so a server
  restarted on the same directory returns every result whole.
- A client that leaves (a stream closed after its first event, a plain request that gave
  up) cancels its request: the queue and the batch empty within about a second, the
  outcome is counted as cancelled, and new requests are served, not refused with 429.
- ``DELETE /v1/completions/{id}`` cancels a live request; its waiting client gets 409.
- A request that failed (504 past its deadline) runs again when it is sent again, also after
  a restart with a longer deadline, and gives the uninterrupted run's text.
- One server per data directory: a second one exits with one line naming the directory,
  and the first serves on; the directory is 0700 and its files 0600.
- ``--api-key``: /v1/* answers 401 without the key; a foreign Host header gets 400; /docs
  and /openapi.json are off by default.
- A journal row that cannot be read is set aside at start (counted in /health), not fatal:
  the other unfinished requests resume and finish.
- The speculative counts under vLLM's metric names equal the library's own step records.
- Retention: at start the journal drops ended requests past the age and count limits (never a
  running one), and says how many in /health.
- Resume at start stays within the queue bound; a request resumed too often is set aside.
- SIGTERM drains: every accepted request finishes whole, the process exits once done, and
  a restart has nothing to resume.
- Medusa requests advance a step per turn: past the deadline they end part of the way with
  504, and Medusa requests with different temperatures share the engine.
"""

from __future__ import annotations

import signal
import socket
import sqlite3
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

pytest.importorskip("fastapi")  # the serve extra
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from support import PROMPTS, load_models, metric, reference, reference_text, scrape  # noqa: E402

from specdec_lite.engine.journal import Journal  # noqa: E402
from specdec_lite.service.launch import start_server  # noqa: E402

pytestmark = pytest.mark.server

TIMEOUT = 60.0


def _wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout_s} s: {what}")


def _health(url: str) -> tuple[float, httpx.Response]:
    start = time.monotonic()
    reply = httpx.get(url + "/health", timeout=10)
    return time.monotonic() - start, reply


@pytest.fixture(scope="module")
def models():
    return load_models()


def test_locked_journal_loses_no_token_and_catches_up(tmp_path, models):
    data_dir = tmp_path / "data"
    bodies = [dict(prompt=PROMPTS[i % len(PROMPTS)], max_tokens=160, temperature=1.0,
                   method=("draft", "ngram", "plain")[i % 3], k=3, seed=700 + i,
                   request_id=f"stall-{i}") for i in range(12)]
    expected = {b["request_id"]: reference_text(models, b) for b in bodies}
    replies: dict[str, httpx.Response] = {}
    with start_server(data_dir=data_dir, max_batch=4, log_path=tmp_path / "log") as srv:
        def send(body):
            replies[body["request_id"]] = httpx.post(srv.url + "/v1/completions", json=body,
                                                     timeout=TIMEOUT)

        threads = [threading.Thread(target=send, args=(b,)) for b in bodies]
        for thread in threads:
            thread.start()
        # every request accepted (journaled) before the lock, some still to run after it
        _wait_for(lambda: all(httpx.get(f"{srv.url}/v1/completions/{b['request_id']}",
                                        timeout=10).status_code in (200, 202)
                              for b in bodies), 30, "all requests accepted")
        lock = sqlite3.connect(data_dir / "journal.sqlite3", isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # the write lock: the server's writes must wait
        try:
            states, slowest = set(), 0.0
            locked_until = time.monotonic() + 2.5
            while time.monotonic() < locked_until:
                took, reply = _health(srv.url)
                slowest = max(slowest, took)
                assert reply.status_code == 200
                states.add(reply.json()["status"])
                if reply.json()["status"] == "degraded":
                    assert httpx.get(srv.url + "/ready", timeout=10).status_code == 503
                time.sleep(0.1)
            start = time.monotonic()
            refused = httpx.post(srv.url + "/v1/completions", timeout=TIMEOUT,
                                 json=dict(prompt="x", max_tokens=4, seed=1,
                                           request_id="while-locked"))
            refused_after = time.monotonic() - start
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        for thread in threads:
            thread.join(TIMEOUT)
        assert "degraded" in states, states  # the lock did catch writes mid-run
        assert slowest < 1.0, f"/health took {slowest:.2f} s while the journal was locked"
        assert refused.status_code == 503 and refused.headers["Retry-After"], refused.text
        assert refused_after < 2.0
        for body in bodies:
            reply = replies[body["request_id"]]
            assert reply.status_code == 200, reply.text
            assert reply.json()["choices"][0]["text"] == expected[body["request_id"]]
        _wait_for(lambda: _health(srv.url)[1].json()["status"] == "ok", 10,
                  "the journal catches up")
        assert httpx.get(srv.url + "/ready", timeout=10).status_code == 200
        assert metric(scrape(srv.url), "specdec_requests_total", outcome="finished") == 12
    # a new server on the same directory reads every result back whole from the journal
    with start_server(data_dir=data_dir, log_path=tmp_path / "log2") as again:
        for body in bodies:
            reply = httpx.get(f"{again.url}/v1/completions/{body['request_id']}", timeout=10)
            assert reply.status_code == 200, reply.text
            assert reply.json()["choices"][0]["text"] == expected[body["request_id"]]
        lookup = httpx.get(f"{again.url}/v1/completions/while-locked", timeout=10)
        assert lookup.status_code == 404  # refused, so never recorded


def _keep_busy(url: str, n: int, first: int = 0) -> list[threading.Thread]:
    """``n`` more clients with 200-token plain requests, each accepted (queued, running or
    already done) when this returns. They keep the batch full for a while only: four such
    requests together end in about 0.7 s on a 2-core Xeon, so no test may count on them
    still running."""
    body = dict(prompt="for i in range(", max_tokens=200, method="plain", temperature=1.0)
    threads = [threading.Thread(target=httpx.post, args=(url + "/v1/completions",),
                                kwargs=dict(json={**body, "seed": 100 + i,
                                                  "request_id": f"busy-{i}"}, timeout=TIMEOUT))
               for i in range(first, first + n)]
    for thread in threads:
        thread.start()
    _wait_for(lambda: all(httpx.get(f"{url}/v1/completions/busy-{i}", timeout=10).status_code
                          in (200, 202) for i in range(first, first + n)), 20,
              "the busy requests are accepted")
    return threads


def test_a_client_that_leaves_frees_its_place(tmp_path):
    body = dict(prompt="import os\n", max_tokens=200, method="plain", temperature=1.0)
    with start_server(data_dir=tmp_path / "data", max_batch=2, max_queue=8,
                      log_path=tmp_path / "log") as srv:
        # seven live requests: two run, five wait, so the batch stays full for a second or so
        busy = _keep_busy(srv.url, 7)
        # a plain request waits in the queue behind them, and its client gives up
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(srv.url + "/v1/completions", timeout=httpx.Timeout(10, read=0.2),
                       json={**body, "seed": 2, "request_id": "left-2"})
        _wait_for(lambda: httpx.get(f"{srv.url}/v1/completions/left-2",
                                    timeout=10).status_code == 200, 2, "left-2 leaves")
        # a stream, read up to its first event (so it runs), then closed
        with httpx.stream("POST", srv.url + "/v1/completions", timeout=TIMEOUT,
                          json={**body, "seed": 1, "stream": True, "request_id": "left-1"}) as r:
            assert r.status_code == 200
            next(r.iter_lines())
        for thread in busy:
            thread.join(TIMEOUT)
        _wait_for(lambda: _health(srv.url)[1].json()["running"] == 0, 5, "the batch empties")
        running = httpx.get(f"{srv.url}/v1/completions/left-1", timeout=10).json()
        queued = httpx.get(f"{srv.url}/v1/completions/left-2", timeout=10).json()
        for left in (running, queued):
            assert left["error"] == "cancelled: the client disconnected"
        assert 0 < running["usage"]["completion_tokens"] < 200  # stopped mid-run
        assert queued["usage"]["completion_tokens"] < 200
        samples = scrape(srv.url)
        assert metric(samples, "specdec_requests_total", outcome="cancelled") == 2
        assert metric(samples, "specdec_requests_total", outcome="finished") == 7
        # every place is free again: a full queue's worth of new requests is served
        with ThreadPoolExecutor(8) as pool:
            served = list(pool.map(lambda s: httpx.post(
                srv.url + "/v1/completions", json={**body, "max_tokens": 20, "seed": s},
                timeout=TIMEOUT), range(3, 11)))
        assert [r.status_code for r in served] == [200] * 8


def test_delete_cancels_a_live_request(tmp_path):
    """A 200-token request beside three others runs for well under a second here, so the
    DELETE can land after it ended; then the request must have finished whole and the DELETE
    be a 404. Each try checks one of the two outcomes; one try in five must cancel."""
    with start_server(max_batch=4, log_path=tmp_path / "log") as srv:
        url = srv.url + "/v1/completions"
        cancelled = 0
        for attempt in range(5):
            request_id = f"to-delete-{attempt}"
            busy = _keep_busy(srv.url, 3, first=3 * attempt)
            outcome: dict[str, httpx.Response] = {}
            waiter = threading.Thread(target=lambda rid=request_id, out=outcome: out.setdefault(
                "reply", httpx.post(url, timeout=TIMEOUT, json=dict(
                    prompt="x = ", max_tokens=200, method="plain", seed=5,
                    request_id=rid))))
            waiter.start()
            _wait_for(lambda rid=request_id: httpx.get(f"{url}/{rid}", timeout=10).status_code
                      in (200, 202), 10, "the request is accepted")
            cancel = httpx.delete(f"{url}/{request_id}", timeout=10)
            waiter.join(TIMEOUT)
            reply = outcome["reply"]
            if cancel.status_code == 202:
                assert cancel.json()["status"] == "cancelling"
            else:
                assert cancel.status_code == 404, cancel.text
            if reply.status_code == 200:  # it ended before the engine's next turn
                assert reply.json()["usage"]["completion_tokens"] == 200
            else:
                assert cancel.status_code == 202
                assert reply.status_code == 409, reply.text
                assert reply.json()["error"] == "cancelled by DELETE"
                assert reply.json()["usage"]["completion_tokens"] < 200
                assert httpx.delete(f"{url}/{request_id}", timeout=10).status_code == 404
                cancelled += 1
            for thread in busy:
                thread.join(TIMEOUT)
            if cancelled:
                break
        assert cancelled == 1, "no DELETE in five tries landed while its request ran"
        assert httpx.delete(url + "/never-sent", timeout=10).status_code == 404
        _wait_for(lambda: _health(srv.url)[1].json()["running"] == 0, 5, "the batch empties")


def test_a_failed_request_runs_again_when_retried(tmp_path, models):
    """A request that failed past its deadline (every verification here sleeps 30 ms, so
    150 tokens cannot fit in 0.1 s on any machine) runs again, whole, when retried with
    its id on a server over the same data directory."""
    from fastapi.testclient import TestClient

    from specdec_lite.service.app import ServiceConfig, create_app
    from specdec_lite.service.engines import EngineFactory
    from specdec_lite.service.runtime import Runtime
    from specdec_lite.service.server import check_data_dir

    def slow_step(step: int) -> None:
        time.sleep(0.03)

    data_dir = check_data_dir(str(tmp_path / "data"))  # as `serve` makes it
    body = dict(prompt="class Foo(object):\n    ", max_tokens=150, method="draft", k=4,
                temperature=1.0, seed=9, request_id="retry-1")
    factory = EngineFactory(models.tokenizer, models.target, models.draft, models.ngram_draft,
                            models.heads, inject_fault=slow_step)
    short = Runtime(data_dir=data_dir, max_batch=4, max_queue=8, deadline_s=0.1,
                    factory=factory)
    with TestClient(create_app(ServiceConfig(), short)) as client:
        first = client.post("/v1/completions", json=body)
        assert first.status_code == 504, first.text
    with start_server(data_dir=data_dir, log_path=tmp_path / "log") as patient:
        url = patient.url + "/v1/completions"
        again = httpx.post(url, json=body, timeout=TIMEOUT)
        assert again.status_code == 200, again.text
        assert again.json()["choices"][0]["text"] == reference_text(models, body)
        stored = httpx.get(f"{url}/retry-1", timeout=10)
        assert stored.status_code == 200 and stored.json()["choices"] == again.json()["choices"]


def test_one_server_per_data_directory_and_private_files(tmp_path):
    data_dir = tmp_path / "data"
    with start_server(data_dir=data_dir, log_path=tmp_path / "log") as first:
        with pytest.raises(RuntimeError) as refused:
            start_server(data_dir=data_dir, log_path=tmp_path / "log2", timeout_s=30)
        assert "exit code 2" in str(refused.value)
        assert f"the data directory {data_dir} is in use by another server" in str(refused.value)
        reply = httpx.post(first.url + "/v1/completions", timeout=TIMEOUT,
                           json=dict(prompt="x", max_tokens=8, seed=3))
        assert reply.status_code == 200
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
        files = sorted(data_dir.iterdir())
        assert {f.name for f in files} >= {"journal.sqlite3", "journal.sqlite3.lock"}
        for path in files:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name
    with start_server(data_dir=data_dir, log_path=tmp_path / "log3"):  # free again
        pass


def test_api_key_hosts_and_docs(tmp_path):
    key = "s3cret-key"
    with start_server(log_path=tmp_path / "log", extra_args=("--api-key", key)) as srv:
        body = dict(prompt="x", max_tokens=4, seed=1)
        bare = httpx.post(srv.url + "/v1/completions", json=body, timeout=TIMEOUT)
        assert bare.status_code == 401
        wrong = httpx.post(srv.url + "/v1/completions", json=body, timeout=TIMEOUT,
                           headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.headers["WWW-Authenticate"] == "Bearer"
        right = httpx.post(srv.url + "/v1/completions", json=body, timeout=TIMEOUT,
                           headers={"Authorization": f"Bearer {key}"})
        assert right.status_code == 200, right.text
        assert httpx.get(srv.url + "/health", timeout=10).status_code == 200  # no key needed
        for path in ("/docs", "/redoc", "/openapi.json"):  # off unless --docs
            assert httpx.get(srv.url + path, timeout=10).status_code == 404, path
        foreign = httpx.get(srv.url + "/health", timeout=10, headers={"Host": "evil.example"})
        assert foreign.status_code == 400
        local = httpx.get(srv.url.replace("127.0.0.1", "localhost") + "/health", timeout=10)
        assert local.status_code == 200


def test_a_request_resumed_too_often_is_set_aside(tmp_path, models):
    """A request that every start resumes (and, say, every resume crashes) is given up after
    MAX_RESUMES starts, not retried for ever."""
    from specdec_lite.service.persist import MAX_RESUMES

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    settings = dict(method="plain", k=0, max_new_tokens=8, temperature=1.0, top_p=None, stop=[])
    with Journal(data_dir / "journal.sqlite3") as journal:
        for request_id in ("poison", "fresh"):
            journal.begin(request_id, models.tokenizer.encode("x"), settings, 2,
                          np.random.default_rng(2))
        for _ in range(MAX_RESUMES):  # as if MAX_RESUMES starts had resumed it already
            journal.count_resume("poison")
    with start_server(data_dir=data_dir, log_path=tmp_path / "log") as srv:
        health = httpx.get(srv.url + "/health", timeout=10).json()
        assert health["set_aside"] == 1 and health["resumed"] == 1, health
        url = srv.url + "/v1/completions/"
        _wait_for(lambda: httpx.get(url + "fresh", timeout=10).status_code == 200, 30,
                  "the other request finishes")
        given_up = httpx.get(url + "poison", timeout=10).json()
        assert given_up["error"].startswith("set aside at start: resumed 3 times already")


def test_resume_stays_within_the_queue_bound(tmp_path, models):
    """Five unfinished requests, a queue of two: the start resumes two, the rest wait in
    the journal and join as places free; every one finishes, and the queue never holds
    more than its bound."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    settings = dict(method="plain", k=0, max_new_tokens=200, temperature=1.0, top_p=None,
                    stop=[])
    with Journal(data_dir / "journal.sqlite3") as journal:
        for i in range(5):
            journal.begin(f"r{i}", models.tokenizer.encode("x = "), settings, i,
                          np.random.default_rng(i))
    with start_server(data_dir=data_dir, max_batch=1, max_queue=2,
                      log_path=tmp_path / "log") as srv:
        samples = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            health = httpx.get(srv.url + "/health", timeout=10).json()
            samples.append(health)
            if health["resumed"] == 5 and health["waiting"] + health["running"] == 0:
                break
            time.sleep(0.05)
        assert samples[0].get("deferred", 0) >= 1, samples[0]  # not all queued at once
        assert all(h["waiting"] + h["running"] <= 2 for h in samples)
        assert samples[-1]["resumed"] == 5 and "deferred" not in samples[-1]
        for i in range(5):
            done = httpx.get(f"{srv.url}/v1/completions/r{i}", timeout=10).json()
            assert done.get("usage", {}).get("completion_tokens") == 200, done


def test_an_unreadable_journal_row_is_set_aside_not_fatal(tmp_path, models):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    body = dict(prompt="import os\n", max_tokens=40, method="draft", k=3, temperature=1.0,
                seed=31)
    settings = dict(method="draft", k=3, max_new_tokens=40, temperature=1.0, top_p=None,
                    stop=[])
    prompt = models.tokenizer.encode(body["prompt"])
    with Journal(data_dir / "journal.sqlite3") as journal:  # as a killed server left it
        for request_id in ("good", "damaged"):
            journal.begin(request_id, prompt, settings, 31, np.random.default_rng(31))
    with sqlite3.connect(data_dir / "journal.sqlite3") as db:
        db.execute("UPDATE generations SET prompt = 'not json' WHERE request_id = 'damaged'")
    with start_server(data_dir=data_dir, log_path=tmp_path / "log") as srv:
        health = httpx.get(srv.url + "/health", timeout=10).json()
        assert health["set_aside"] == 1 and health["resumed"] == 1, health
        good = _wait_for(lambda: (r := httpx.get(f"{srv.url}/v1/completions/good",
                                                 timeout=10)).status_code == 200 and r, 30,
                         "the readable request finishes")
        assert good.json()["choices"][0]["text"] == reference_text(models, body)
        damaged = httpx.get(f"{srv.url}/v1/completions/damaged", timeout=10)
        assert damaged.status_code == 404


def test_vllm_named_speculative_counters(tmp_path, models):
    bodies = [dict(prompt=PROMPTS[i], max_tokens=50, method="draft", k=3, temperature=1.0,
                   seed=60 + i) for i in range(3)]
    with start_server(log_path=tmp_path / "log") as srv:
        for body in bodies:
            assert httpx.post(srv.url + "/v1/completions", json=body,
                              timeout=TIMEOUT).status_code == 200
        samples = scrape(srv.url)
    steps = [s for body in bodies for s in reference(models, body).steps if s.proposed]
    assert metric(samples, "vllm:spec_decode_num_drafts_total") == len(steps)
    assert metric(samples, "vllm:spec_decode_num_draft_tokens_total") == \
        sum(len(s.proposed) for s in steps)
    assert metric(samples, "vllm:spec_decode_num_accepted_tokens_total") == \
        sum(s.n_accepted for s in steps)
    for position in range(3):
        assert metric(samples, "vllm:spec_decode_num_accepted_tokens_per_pos_total",
                      position=str(position)) == sum(s.n_accepted > position for s in steps)


def test_journal_retention_by_age_and_count(tmp_path, models):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    settings = dict(method="plain", k=0, max_new_tokens=8, temperature=1.0, top_p=None, stop=[])
    prompt = models.tokenizer.encode("x = ")
    with Journal(data_dir / "journal.sqlite3") as journal:
        for request_id in ("old", "recent-1", "recent-2", "running"):
            journal.begin(request_id, prompt, settings, 1, np.random.default_rng(1))
            if request_id != "running":
                journal.finish(request_id)
    now = time.time()
    with sqlite3.connect(data_dir / "journal.sqlite3") as db:
        for request_id, age_s in (("old", 7200), ("recent-1", 60), ("recent-2", 30),
                                  ("running", 7200)):
            db.execute("UPDATE generations SET updated = ? WHERE request_id = ?",
                       (now - age_s, request_id))
    with start_server(data_dir=data_dir, log_path=tmp_path / "log",
                      extra_args=("--retention-hours", "1", "--retention-rows", "1")) as srv:
        assert httpx.get(srv.url + "/health", timeout=10).json()["pruned"] == 2
        url = srv.url + "/v1/completions/"
        assert httpx.get(url + "old", timeout=10).status_code == 404  # past the age
        assert httpx.get(url + "recent-1", timeout=10).status_code == 404  # past the count
        assert httpx.get(url + "recent-2", timeout=10).status_code == 200  # the newest
        # the running one is never pruned: it was resumed and finishes
        running = _wait_for(lambda: (r := httpx.get(url + "running", timeout=10))
                            .status_code == 200 and r, 30, "the resumed request finishes")
        assert running.json()["usage"]["completion_tokens"] == 8


def test_sigterm_drains_the_requests_in_flight(tmp_path, models):
    """SIGTERM: the server stops taking connections, finishes every request it had
    accepted (each with the uninterrupted run's text), and exits within
    ``--shutdown-timeout`` by re-raising the SIGTERM once shut down (uvicorn's way of
    passing the signal on; a crash or SIGKILL would end it otherwise); restarted on its
    directory it has nothing left to resume."""
    bodies = [dict(prompt=PROMPTS[i % len(PROMPTS)], max_tokens=150, temperature=1.0,
                   seed=40 + i, method="draft" if i % 2 else "medusa", k=3,
                   request_id=f"drain-{i}")
              for i in range(6)]
    data_dir = tmp_path / "data"
    srv = start_server(data_dir=data_dir, max_batch=2, max_queue=8,
                       log_path=tmp_path / "log", extra_args=("--shutdown-timeout", "30"))
    try:
        with ThreadPoolExecutor(len(bodies)) as pool:
            replies = [pool.submit(httpx.post, srv.url + "/v1/completions", json=body,
                                   timeout=TIMEOUT) for body in bodies]
            # every request accepted first: one still connecting when the SIGTERM lands
            # would be refused, which is the point of draining, not a lost request
            _wait_for(lambda: all(httpx.get(f"{srv.url}/v1/completions/{b['request_id']}",
                                            timeout=10).status_code in (200, 202)
                                  for b in bodies), 20, "every request accepted")
            srv.process.terminate()  # SIGTERM while requests run and wait
            answers = [reply.result(TIMEOUT) for reply in replies]
        assert srv.process.wait(timeout=35) == -signal.SIGTERM
    finally:
        srv.kill()
    for body, answer in zip(bodies, answers, strict=True):
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["text"] == reference_text(models, body)
    with pytest.raises(httpx.TransportError):  # nothing listens any more
        httpx.get(srv.url + "/health", timeout=2)
    with start_server(data_dir=data_dir, log_path=tmp_path / "log") as again:
        health = _health(again.url)[1].json()
        assert health["resumed"] == 0 and health["running"] == 0


def test_medusa_requests_meet_their_deadline_and_share_the_engine(tmp_path, models):
    """Medusa advances a step per turn: past ``--deadline`` long Medusa requests end with
    504 and the tokens they had, part of the way (a request decoded whole in one turn, as
    Medusa used to be, has all its tokens or none), and Medusa requests with different
    temperatures run together, each equal to its solo run."""
    longs = [dict(prompt=PROMPTS[i], max_tokens=200, method="medusa", k=3, temperature=1.0,
                  seed=3 + i) for i in range(4)]
    with start_server(data_dir=tmp_path / "short", deadline_s=0.1,
                      log_path=tmp_path / "log") as short:
        with ThreadPoolExecutor(len(longs)) as pool:
            replies = list(pool.map(lambda b: httpx.post(short.url + "/v1/completions",
                                                         json=b, timeout=TIMEOUT), longs))
    assert {r.status_code for r in replies} == {504}, [r.text for r in replies]
    done = [r.json()["usage"]["completion_tokens"] for r in replies]
    assert any(0 < n < 200 for n in done), done
    bodies = [dict(prompt=PROMPTS[i], max_tokens=60, method="medusa", k=3,
                   temperature=t, seed=20 + i) for i, t in enumerate((0.0, 0.6, 1.0, 1.3))]
    with start_server(data_dir=tmp_path / "data", log_path=tmp_path / "log2") as srv:
        with ThreadPoolExecutor(len(bodies)) as pool:
            answers = list(pool.map(lambda b: httpx.post(srv.url + "/v1/completions", json=b,
                                                         timeout=TIMEOUT), bodies))
    for body, answer in zip(bodies, answers, strict=True):
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["text"] == reference_text(models, body)


def test_a_stream_keeps_flowing_next_to_medusa_requests(tmp_path):
    """A plain stream is not stalled by Medusa requests that run beside it: Medusa
    advances each request one step per engine turn, so the stream's events keep arriving
    while the Medusa requests run. (Decoded whole in one turn, as Medusa used to be, the
    Medusa requests held the engine thread until they had all their tokens, and the stream
    got next to nothing until the first of them finished.) The stream starts once the
    Medusa requests are running, so what it gets before the first of them finishes is a
    count of engine turns, not of how fast the machine is."""
    medusa = [dict(prompt=PROMPTS[i % len(PROMPTS)], max_tokens=200, method="medusa", k=3,
                   temperature=t, seed=40 + i)
              for i, t in enumerate((0.0, 0.4, 0.7, 1.0, 1.2, 1.5))]
    stream_body = dict(prompt="def main(", max_tokens=200, method="plain", temperature=1.0,
                       seed=7, stream=True)
    events: list[float] = []
    finished: list[float] = []

    def read_stream(url: str) -> None:
        with httpx.stream("POST", url, json=stream_body, timeout=TIMEOUT) as reply:
            assert reply.status_code == 200
            for line in reply.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    events.append(time.monotonic())

    def post_medusa(url: str, body: dict) -> int:
        reply = httpx.post(url, json=body, timeout=TIMEOUT)
        finished.append(time.monotonic())
        return reply.status_code

    def medusa_running(url: str) -> bool:
        return httpx.get(url + "/health", timeout=10).json()["running"] >= len(medusa)

    with start_server(max_batch=8, log_path=tmp_path / "log") as srv:
        url = srv.url + "/v1/completions"
        with ThreadPoolExecutor(len(medusa) + 1) as pool:
            statuses = [pool.submit(post_medusa, url, body) for body in medusa]
            _wait_for(lambda: medusa_running(srv.url), 20, "the Medusa requests run")
            assert not finished, "a Medusa request ended before the stream began"
            streaming = pool.submit(read_stream, url)
            streaming.result(TIMEOUT)
            assert [s.result(TIMEOUT) for s in statuses] == [200] * len(medusa)
    # the first Medusa request to finish, the greedy one (about 5 tokens a step), takes
    # about 40 engine turns, and the stream gets an event a turn: 38 on the machine this
    # was written on; decoded whole in one turn, Medusa would leave it none
    during = sum(t < min(finished) for t in events)
    assert len(events) >= 100, len(events)
    assert during >= 20, (during, len(events))


def test_spec_max_batch_decodes_a_full_batch_plainly(tmp_path, models):
    """``--spec-max-batch 1``: while several draft requests share the engine, its steps are
    plain (no draft calls), and the greedy answers stay those of the library."""
    bodies = [dict(prompt=PROMPTS[i], max_tokens=120, method="draft", k=3, temperature=0.0,
                   seed=i)
              for i in range(4)]
    with start_server(max_batch=4, log_path=tmp_path / "log",
                      extra_args=("--spec-max-batch", "1")) as srv:
        with ThreadPoolExecutor(len(bodies)) as pool:
            answers = list(pool.map(lambda b: httpx.post(srv.url + "/v1/completions", json=b,
                                                         timeout=TIMEOUT), bodies))
    drafted = alone = 0
    for body, answer in zip(bodies, answers, strict=True):
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["text"] == reference_text(models, body)
        drafted += answer.json()["spec"]["n_draft_calls"]
        alone += reference(models, body).n_draft_calls
    assert drafted < 0.5 * alone, (drafted, alone)


def test_spec_max_batch_auto_is_measured_at_start_and_keeps_greedy_output(tmp_path, models):
    """``--spec-max-batch auto``: the server times batched steps of 1, 2 and 4 sequences
    at start and serves with the largest size up to which speculation was faster; /health
    shows the choice and the gains it rests on, and greedy answers stay the library's."""
    bodies = [dict(prompt=PROMPTS[i], max_tokens=60, method="draft", k=3, temperature=0.0,
                   seed=i) for i in range(3)]
    with start_server(max_batch=4, log_path=tmp_path / "log",
                      extra_args=("--spec-max-batch", "auto")) as srv:
        health = _health(srv.url)[1].json()
        with ThreadPoolExecutor(len(bodies)) as pool:
            answers = list(pool.map(lambda b: httpx.post(srv.url + "/v1/completions", json=b,
                                                         timeout=TIMEOUT), bodies))
    gains = {int(b): g for b, g in health["batch_gains"].items()}
    assert sorted(gains) == [1, 2, 4] and all(g > 0 for g in gains.values())
    below = [b for b in sorted(gains) if b <= health["spec_max_batch"]]
    assert health["spec_max_batch"] in (0, *gains)
    assert all(gains[b] > 1 for b in below)  # faster at every size up to the choice
    assert health["spec_max_batch"] == max(gains) or gains[min(set(gains) - set(below))] <= 1
    for body, answer in zip(bodies, answers, strict=True):
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["text"] == reference_text(models, body)


def test_max_concurrency_answers_503_past_the_limit(tmp_path):
    """``--max-concurrency 4`` holds four connections: with three idle ones open, a
    request is answered; with four open, a fifth connection gets 503 at once; when they
    close, the server answers again. (Idle raw connections make the count exact, where
    requests racing to connect would not.)"""
    body = dict(prompt="import os\n", max_tokens=8, method="plain", temperature=1.0, seed=1)
    with start_server(log_path=tmp_path / "log",
                      extra_args=("--max-concurrency", "4")) as srv:
        address = httpx.URL(srv.url)
        idle = [socket.create_connection((address.host, address.port)) for _ in range(3)]
        try:
            time.sleep(0.3)  # the server registers each connection
            assert httpx.post(srv.url + "/v1/completions", json=body,
                              timeout=TIMEOUT).status_code == 200
            idle.append(socket.create_connection((address.host, address.port)))
            time.sleep(0.3)
            assert httpx.post(srv.url + "/v1/completions", json=body,
                              timeout=TIMEOUT).status_code == 503
        finally:
            for connection in idle:
                connection.close()
        time.sleep(0.3)
        assert httpx.get(srv.url + "/health", timeout=10).status_code == 200
