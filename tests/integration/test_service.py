"""The HTTP service (issue 14), against a real server process on a free 127.0.0.1 port.

One server (journal on, in a temporary directory) serves most tests; two more show the
queue bound (429) and the deadline (504). The fault drill runs in-process, with a fault
hook that the command line does not expose. Every wait is bounded.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

pytest.importorskip("fastapi")  # the serve extra
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from support import (  # noqa: E402
    PROMPTS,
    expected_spec,
    load_models,
    metric,
    parse_metrics,
    reference,
    reference_text,
    scrape,
    spec_of,
)

from specdec_lite.engine.decode import generate  # noqa: E402
from specdec_lite.pretrained import resolve_backend  # noqa: E402
from specdec_lite.service.launch import start_server  # noqa: E402
from specdec_lite.service.loadtest import make_requests, run_load  # noqa: E402

TIMEOUT = 60.0  # seconds any one request may take


@pytest.fixture(scope="module")
def models():
    return load_models()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("service")
    with start_server(data_dir=tmp / "data", log_path=tmp / "server.log", max_batch=16,
                      max_queue=64) as srv:
        yield srv


def post(url: str, body: dict | None = None, **kwargs) -> httpx.Response:
    if body is not None:
        kwargs["json"] = body
    return httpx.post(url + "/v1/completions", timeout=TIMEOUT, **kwargs)


def assert_healthy(url: str) -> None:
    reply = httpx.get(url + "/health", timeout=10)
    assert reply.status_code == 200
    assert reply.json()["status"] == "ok"


def sse_events(text: str) -> list[str]:
    """The ``data:`` payloads of a server-sent-event stream, in order."""
    events = [block for block in text.split("\n\n") if block.strip()]
    assert all(block.startswith("data: ") for block in events), events
    return [block[len("data: "):] for block in events]


# ------------------------------------------------------------------ schema


def test_response_shape_usage_and_spec(server, models):
    body = dict(prompt="def __init__(self", max_tokens=40, temperature=1.0, seed=7,
                method="draft", k=4)
    reply = post(server.url, body)
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"] == "application/json"
    data = reply.json()
    assert set(data) == {"id", "object", "created", "model", "choices", "usage", "spec"}
    assert data["object"] == "text_completion" and data["id"].startswith("cmpl-")
    assert abs(data["created"] - time.time()) < 120
    [choice] = data["choices"]
    assert choice["index"] == 0 and choice["finish_reason"] == "length"
    text = choice["text"]
    usage = data["usage"]
    # one token per character: the usage counts are the text's and the prompt's lengths
    assert usage == dict(prompt_tokens=len(body["prompt"]), completion_tokens=len(text),
                         total_tokens=len(body["prompt"]) + len(text))
    assert len(text) == body["max_tokens"]
    spec = data["spec"]
    assert spec["method"] == "draft" and spec["k"] == 4 and spec["n_fallbacks"] == 0
    assert spec["tau"] == pytest.approx(len(text) / spec["n_target_calls"])
    assert 0.0 <= spec["alpha"] <= 1.0
    # each target call emits at most k + 1 tokens; each draft call drafts one token
    assert len(text) / (body["k"] + 1) <= spec["n_target_calls"] <= len(text)
    assert spec["n_draft_calls"] <= body["k"] * spec["n_target_calls"]
    assert spec["n_head_calls"] == 0
    gen = reference(models, body)  # and every statistic is the library's own
    assert text == models.tokenizer.decode(gen.tokens)
    assert spec_of(data) == pytest.approx(expected_spec(gen))


def test_plain_reports_no_speculation(server):
    data = post(server.url, dict(prompt="x = ", max_tokens=12, method="plain", k=7,
                                 seed=3)).json()
    assert data["spec"]["k"] == 0
    assert data["spec"]["n_target_calls"] == 12 and data["spec"]["tau"] == 1.0
    assert data["spec"]["n_draft_calls"] == 0 and data["spec"]["alpha"] == 0.0


# ------------------------------------------------------------------ validation

LONG_PROMPT = "x" * 60
BAD_BODIES = [
    (dict(prompt="a", max_tokens=201), "max_tokens"),
    (dict(prompt="a", max_tokens=-1), "max_tokens"),
    (dict(prompt="a", max_tokens=0), "max_tokens"),
    (dict(prompt="a", max_tokens="32"), "max_tokens"),
    (dict(prompt="a", max_tokens=8.0), "max_tokens"),
    (dict(prompt="a", max_tokens=True), "max_tokens"),
    (dict(prompt="a", temperature=-0.1), "temperature"),
    (dict(prompt="a", temperature=2.5), "temperature"),
    (dict(prompt="a", temperature="hot"), "temperature"),
    (dict(prompt="a", top_p=0), "top_p"),
    (dict(prompt="a", top_p=1.5), "top_p"),
    (dict(prompt="a", temprature=0.5), "temprature"),
    (dict(prompt="a", k=0), "k"),
    (dict(prompt="a", k=17), "k"),
    (dict(prompt=""), "prompt"),
    (dict(max_tokens=4), "prompt"),
    (dict(prompt=["a"]), "prompt"),
    (dict(prompt="a" * 201), "prompt"),
    (dict(prompt="na\u00efve"), "prompt"),
    (dict(prompt="tab\there"), "prompt"),
    (dict(prompt="a", request_id="a b"), "request_id"),
    (dict(prompt="a", request_id="../../etc/passwd"), "request_id"),
    (dict(prompt="a", request_id="x" * 65), "request_id"),
    (dict(prompt="a", request_id=""), "request_id"),
    (dict(prompt="a", method="beam"), "method"),
    (dict(prompt="a", seed=-1), "seed"),
    (dict(prompt="a", seed=2**64), "seed"),
    (dict(prompt="a", seed=1.5), "seed"),
    (dict(prompt="a", stream="yes"), "stream"),
    (dict(prompt="a", n=2), "n"),
    (dict(prompt="x" * 100, max_tokens=200), "max_tokens"),  # past the 256-token window
    (dict(prompt=LONG_PROMPT, max_tokens=192, k=4), "max_tokens"),  # 60 + 192 + 5 > 256
    (dict(prompt=LONG_PROMPT, max_tokens=193, method="medusa", k=1, temperature=0),
     "max_tokens"),  # Medusa's greedy tree is 4 deep whatever k is
    (dict(prompt="a", method="medusa", k=5), "k"),  # the model has 4 heads
    (dict(prompt="a", policy="fastest"), "policy"),
    (dict(prompt="a", method="plain", policy="heuristic"), "policy"),
    (dict(prompt="a", method="medusa", policy="auto"), "policy"),
    (dict(prompt="a", method="lookup", policy="confidence"), "policy"),
    (dict(prompt="a", method="eagle", policy="confidence"), "policy"),
    (dict(prompt="a", method="lookup", policy="specdec++"), "policy"),
    (dict(prompt=LONG_PROMPT, max_tokens=190, k=4, policy="heuristic"),
     "max_tokens"),  # the heuristic may grow k to 10: 60 + 190 + 11 > 256
]


@pytest.mark.parametrize("body, field", BAD_BODIES,
                         ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD_BODIES)])
def test_bad_input_is_422_naming_the_field(server, body, field):
    reply = post(server.url, body)
    assert reply.status_code == 422, reply.text
    locs = [error["loc"] for error in reply.json()["detail"]]
    assert ["body", field] in locs, locs


RAW_BAD = [
    (b'{"prompt": "a", "temperature": NaN}', ["body", "temperature"]),
    (b'{"prompt": "a", "temperature": Infinity}', ["body", "temperature"]),
    (b'{"prompt": "a\\ud800b"}', ["body", "prompt"]),  # a lone surrogate
    (b'{"\\ud800": 1, "prompt": "a"}', ["body"]),  # a key pydantic cannot read
    (b'{"prompt": "a", "max_tokens": 1e999}', ["body", "max_tokens"]),
]


@pytest.mark.parametrize("raw, loc", RAW_BAD, ids=range(len(RAW_BAD)))
def test_input_json_cannot_encode_is_still_422(server, raw, loc):
    """Inputs that the default 422 body could not echo back (it gave a 500)."""
    reply = post(server.url, content=raw, headers={"content-type": "application/json"})
    assert reply.status_code == 422, reply.text
    assert loc in [error["loc"] for error in json.loads(reply.content)["detail"]]


@pytest.mark.parametrize("raw", [b"{not json", b"", b"[1, 2]", b'"a prompt"', b"null", b"17"])
def test_body_not_a_json_object_is_422(server, raw):
    reply = post(server.url, content=raw, headers={"content-type": "application/json"})
    assert reply.status_code == 422, reply.text
    assert all(error["loc"][0] == "body" for error in reply.json()["detail"])


def test_body_over_the_limit_is_413(server):
    big = json.dumps(dict(prompt="a", model="m" * 20_000)).encode()
    assert post(server.url, content=big,
                headers={"content-type": "application/json"}).status_code == 413

    def chunks():  # no Content-Length: the body is counted as it arrives
        for _ in range(40):
            yield b" " * 1000
        yield b'{"prompt": "a"}'

    reply = post(server.url, content=chunks(), headers={"content-type": "application/json"})
    assert reply.status_code == 413
    assert "body over" in reply.json()["detail"]


def test_window_boundary_is_served(server, models):
    """The largest max_tokens the window check lets through decodes without error."""
    for body in (dict(prompt=LONG_PROMPT, max_tokens=191, k=4, seed=1, temperature=0),
                 dict(prompt=LONG_PROMPT, max_tokens=192, method="medusa", k=1, seed=1,
                      temperature=0)):
        reply = post(server.url, body)
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["text"] == reference_text(models, body)


def test_nothing_the_client_sends_crashes_the_server(server):
    hostile = [
        b"[" * 5000 + b"]" * 5000,  # nesting deeper than the JSON parser recurses
        b'{"prompt": "a", "prompt": 7}',
        b'{"prompt": "\\u0000"}',
        b"\xff\xfe\x00garbage",
        json.dumps(dict(prompt="a", temperature=1e308, top_p=1e-320)).encode(),
    ]
    for raw in hostile:
        reply = post(server.url, content=raw, headers={"content-type": "application/json"})
        assert reply.status_code in (400, 422), (raw[:40], reply.status_code, reply.text)
    # many distinct sampling settings: each would make its own engine
    for i in range(12):
        reply = post(server.url, dict(prompt="a", max_tokens=2, temperature=0.5 + i / 100,
                                      top_p=0.9, seed=i))
        assert reply.status_code == 200
    assert httpx.get(server.url + "/v1/completions/..%2F..%2Fetc%2Fpasswd",
                     timeout=10).status_code == 404
    assert httpx.get(server.url + "/nowhere", timeout=10).status_code == 404
    assert httpx.delete(server.url + "/v1/completions", timeout=10).status_code == 405
    assert_healthy(server.url)


# ------------------------------------------------------------------ streaming


@pytest.mark.parametrize("method, temperature", [("draft", 1.0), ("ngram", 0.0),
                                                 ("medusa", 0.0)])
def test_stream_concatenates_to_the_whole_answer(server, method, temperature):
    body = dict(prompt="class Foo(object):\n    ", max_tokens=48, temperature=temperature,
                seed=11, method=method, k=3)
    whole = post(server.url, body).json()
    reply = post(server.url, {**body, "stream": True})
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/event-stream")
    events = sse_events(reply.text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    *deltas, last = chunks
    assert all(c["object"] == "text_completion" and c["choices"][0]["finish_reason"] is None
               for c in deltas)
    if method != "medusa":  # Medusa requests are decoded whole (one piece)
        assert len(deltas) >= 2
    text = "".join(c["choices"][0]["text"] for c in deltas)
    assert text == whole["choices"][0]["text"]
    assert last["choices"][0]["text"] == "" and last["choices"][0]["finish_reason"] == "length"
    assert last["usage"] == whole["usage"]
    assert last["spec"] == whole["spec"]
    assert len({c["id"] for c in chunks}) == 1


# ------------------------------------------------------------------ seeded determinism

CASES = [("plain", 0.0), ("plain", 1.0), ("draft", 0.0), ("draft", 1.0), ("ngram", 0.0),
         ("ngram", 0.8), ("lookup", 0.0), ("lookup", 1.0), ("eagle", 0.0), ("eagle", 1.0),
         ("early-exit", 0.0), ("early-exit", 1.0), ("medusa", 0.0), ("medusa", 1.0)]


@pytest.mark.parametrize("method, temperature", CASES)
def test_seeded_request_equals_the_library(server, models, method, temperature):
    body = dict(prompt="def __init__(self", max_tokens=40, temperature=temperature,
                seed=1234, method=method, k=3)
    first = post(server.url, body).json()
    again = post(server.url, body).json()
    assert first["choices"][0]["text"] == again["choices"][0]["text"]
    gen = reference(models, body)
    assert first["choices"][0]["text"] == models.tokenizer.decode(gen.tokens)
    assert spec_of(first) == pytest.approx(expected_spec(gen))
    assert spec_of(again) == spec_of(first)


POLICY_CASES = [("draft", "heuristic", 1.0), ("draft", "confidence", 1.0),
                ("draft", "confidence", 0.0), ("ngram", "heuristic", 0.8),
                ("lookup", "heuristic", 1.0), ("draft", "auto", 0.0),
                ("early-exit", "confidence", 1.0), ("eagle", "heuristic", 1.0),
                ("draft", "specdec++", 1.0), ("draft", "specdec++", 0.0)]


@pytest.mark.parametrize("method, policy, temperature", POLICY_CASES)
def test_draft_length_policies_equal_the_library(server, models, method, policy,
                                                 temperature):
    """A request's ``policy`` chooses its k at each step as ``speculative_generate`` does
    (``auto`` prices k by timing this machine, so only its greedy text is fixed)."""
    body = dict(prompt="    def __init__(self", max_tokens=48, temperature=temperature,
                seed=99, method=method, k=3, policy=policy)
    reply = post(server.url, body).json()
    gen = reference(models, body)
    assert reply["choices"][0]["text"] == models.tokenizer.decode(gen.tokens)
    assert reply["spec"]["policy"] == policy
    if policy != "auto":
        assert spec_of(reply) == pytest.approx(expected_spec(gen))
        ks = {len(s.proposed) for s in gen.steps[:-1]}
        assert len(ks) > 1 or policy == "confidence", ks  # k moved: the test exercises it


def test_top_p_and_seeds_matter(server, models):
    body = dict(prompt="import os\n", max_tokens=40, temperature=1.0, top_p=0.8, seed=5,
                method="draft", k=4)
    text = post(server.url, body).json()["choices"][0]["text"]
    assert text == reference_text(models, body)
    others = {post(server.url, {**body, "seed": s}).json()["choices"][0]["text"]
              for s in (6, 7, 8)}
    assert len(others | {text}) > 1  # the seed is used, not ignored


def test_request_id_is_an_idempotency_key(server):
    body = dict(prompt="for i in range(", max_tokens=16, seed=21, request_id="idem-1")
    first = post(server.url, body).json()
    assert first["id"] == "idem-1"
    retry = post(server.url, body).json()  # the same request again: the one generation
    assert retry["choices"] == first["choices"]
    for changed in ({"seed": 22}, {"prompt": "while "}, {"max_tokens": 17}, {"k": 2}):
        other = post(server.url, {**body, **changed})  # the same id for another request
        assert other.status_code == 409, (changed, other.text)
        assert "idem-1" in other.json()["detail"]
    unseeded = dict(prompt="x", max_tokens=4, request_id="idem-2")  # gets a random seed
    assert post(server.url, unseeded).json()["choices"] == \
        post(server.url, unseeded).json()["choices"]
    looked_up = httpx.get(server.url + "/v1/completions/idem-1", timeout=10)
    assert looked_up.status_code == 200
    assert looked_up.json()["choices"] == first["choices"]
    missing = httpx.get(server.url + "/v1/completions/never-sent", timeout=10)
    assert missing.status_code == 404


# ------------------------------------------------------------------ concurrency


def test_concurrent_requests_each_get_their_solo_result(server, models):
    """16 requests at once share batches; batching changes no token."""
    methods = ["draft"] * 8 + ["ngram"] * 4 + ["plain"] * 2 + ["medusa"] * 2
    bodies = [dict(prompt=PROMPTS[i % len(PROMPTS)], max_tokens=48, seed=300 + i,
                   temperature=0.0 if i % 4 == 3 else 1.0, method=m, k=4)
              for i, m in enumerate(methods)]
    before = scrape(server.url)
    barrier = threading.Barrier(len(bodies))

    def send(body):
        barrier.wait(timeout=TIMEOUT)
        return post(server.url, body)

    with ThreadPoolExecutor(len(bodies)) as pool:
        replies = list(pool.map(send, bodies))
    assert [r.status_code for r in replies] == [200] * len(bodies)
    for body, reply in zip(bodies, replies, strict=True):
        gen = reference(models, body)
        assert reply.json()["choices"][0]["text"] == models.tokenizer.decode(gen.tokens), body
        assert spec_of(reply.json()) == pytest.approx(expected_spec(gen))
    after = scrape(server.url)
    n_steps = (metric(after, "specdec_batch_size_count")
               - metric(before, "specdec_batch_size_count"))
    n_single = (metric(after, "specdec_batch_size_bucket", le="1.0")
                - metric(before, "specdec_batch_size_bucket", le="1.0"))
    assert n_steps > n_single  # some steps really advanced several sequences together


# ------------------------------------------------------------------ metrics


def test_metrics_count_what_was_sent(server):
    before = scrape(server.url)
    bodies = [dict(prompt=p, max_tokens=10 + 3 * i, seed=i, method=m)
              for i, (p, m) in enumerate(zip(PROMPTS, ["draft", "ngram", "plain", "draft",
                                                       "ngram", "plain"], strict=True))]
    replies = [post(server.url, b).json() for b in bodies]
    assert post(server.url, dict(prompt="")).status_code == 422  # not counted as a request
    after = scrape(server.url)

    def delta(name, **labels):
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert delta("specdec_tokens_total") == sum(r["usage"]["completion_tokens"]
                                                for r in replies)
    assert delta("specdec_target_calls_total") == sum(r["spec"]["n_target_calls"]
                                                      for r in replies)
    assert delta("specdec_draft_calls_total") == sum(r["spec"]["n_draft_calls"]
                                                     for r in replies)
    assert delta("specdec_requests_total", outcome="finished") == len(bodies)
    assert delta("specdec_generations_total", outcome="finished") == len(bodies)
    for outcome in ("failed", "deadline", "rejected"):
        assert delta("specdec_requests_total", outcome=outcome) == 0
    assert delta("specdec_request_latency_seconds_count") == len(bodies)
    assert metric(after, "specdec_requests_waiting") == 0
    assert metric(after, "specdec_requests_running") == 0
    assert metric(after, "specdec_requests_resumed_total") == 0


def test_health(server):
    post(server.url, dict(prompt="x", max_tokens=2, seed=1))  # at least one engine step
    reply = httpx.get(server.url + "/health", timeout=10)
    assert reply.status_code == 200
    data = reply.json()
    assert data["status"] == "ok" and data["waiting"] == 0 and data["running"] == 0
    assert data["steps"] > 0
    assert data["forward"] == resolve_backend("auto")  # numba where the fast extra is in
    assert data["methods"] == ["plain", "draft", "ngram", "lookup", "eagle", "early-exit",
                               "medusa"]


# ------------------------------------------------------------------ load


def test_small_load_nothing_lost(server, models):
    bodies = make_requests(PROMPTS, 40, method="draft", max_tokens=24, temperature=1.0,
                           seed=1000, id_prefix="load")
    start = time.monotonic()
    result = run_load(server.url, bodies, concurrency=8, time_limit_s=60.0)
    assert time.monotonic() - start < 60.0
    assert result.n_lost == 0 and result.outcomes == {"200": 40}, result.summary()
    assert result.completion_tokens == 40 * 24
    for body in bodies:
        assert result.texts[body["request_id"]] == reference_text(models, body)
    summary = result.summary()
    assert summary["p50_s"] <= summary["p99_s"] and summary["tokens_per_s"] > 0


# ------------------------------------------------------------------ queue bound, deadline


def test_full_queue_is_429_with_retry_after(tmp_path):
    with start_server(max_queue=2, max_batch=1, log_path=tmp_path / "log") as srv:
        bodies = [dict(prompt="import os\n", max_tokens=150, method="plain", seed=i)
                  for i in range(10)]
        with ThreadPoolExecutor(len(bodies)) as pool:
            replies = list(pool.map(lambda b: post(srv.url, b), bodies))
        codes = [r.status_code for r in replies]
        assert set(codes) <= {200, 429} and 200 in codes and 429 in codes, codes
        for reply in replies:
            if reply.status_code == 429:
                assert int(reply.headers["Retry-After"]) >= 1
                assert "queue full" in reply.json()["detail"]
            else:
                assert reply.json()["usage"]["completion_tokens"] == 150
        samples = scrape(srv.url)
        assert metric(samples, "specdec_requests_total", outcome="rejected") == codes.count(429)
        assert metric(samples, "specdec_requests_total", outcome="finished") == codes.count(200)
        assert_healthy(srv.url)


def test_deadline_is_504_with_the_tokens_so_far(models):
    """Each verification sleeps 30 ms (an injected slow step), so a request of 200 tokens
    cannot finish inside a 0.1 s deadline however fast the machine is: every reply is 504
    with the tokens made before the deadline, which are the start of the full output."""
    from fastapi.testclient import TestClient

    from specdec_lite.service.app import ServiceConfig, create_app
    from specdec_lite.service.engines import EngineFactory
    from specdec_lite.service.runtime import Runtime

    def slow_step(step: int) -> None:
        time.sleep(0.03)

    factory = EngineFactory(models.tokenizer, models.target, models.draft, models.ngram_draft,
                            models.heads, inject_fault=slow_step)
    runtime = Runtime(data_dir=None, max_batch=4, max_queue=8, deadline_s=0.1,
                      factory=factory)
    body = dict(prompt="x = ", max_tokens=200, method="draft", k=4, temperature=0.0, seed=0)
    full = models.tokenizer.decode(reference(models, body).tokens)
    with TestClient(create_app(ServiceConfig(), runtime)) as client:
        with ThreadPoolExecutor(4) as pool:
            replies = list(pool.map(lambda s: client.post(
                "/v1/completions", json={**body, "seed": s}), range(4)))
        for reply in replies:
            assert reply.status_code == 504, reply.text
            data = reply.json()
            assert data["error"].startswith("deadline")
            assert data["choices"][0]["finish_reason"] == "error"
            text = data["choices"][0]["text"]
            assert len(text) == data["usage"]["completion_tokens"] < 200
            assert full.startswith(text)  # what it had was right, only cut short
        events = sse_events(client.post("/v1/completions",
                                        json={**body, "stream": True}).text)
        assert events[-1] == "[DONE]"
        last = json.loads(events[-2])
        assert last["error"].startswith("deadline"), last
        samples = parse_metrics(client.get("/metrics").text)
        assert metric(samples, "specdec_requests_total", outcome="deadline") == 5
        assert client.get("/health").json()["status"] == "ok"


# ------------------------------------------------------------------ fault drill


def test_a_server_without_the_early_exit_draft_refuses_that_method(models):
    from fastapi.testclient import TestClient

    from specdec_lite.service.app import ServiceConfig, create_app
    from specdec_lite.service.engines import EngineFactory
    from specdec_lite.service.runtime import Runtime

    factory = EngineFactory(models.tokenizer, models.target, models.draft, models.ngram_draft,
                            models.heads)  # no early_exit
    assert "early-exit" not in factory.methods and "eagle" not in factory.methods
    assert "draft" in factory.methods
    runtime = Runtime(data_dir=None, max_batch=2, max_queue=4, deadline_s=30.0,
                      factory=factory)
    with TestClient(create_app(ServiceConfig(), runtime)) as client:
        assert client.get("/health").json()["methods"] == list(factory.methods)
        refused = client.post("/v1/completions", json=dict(prompt="a", method="early-exit"))
        served = client.post("/v1/completions", json=dict(prompt="a", method="draft", seed=1,
                                                          max_tokens=4))
    assert refused.status_code == 422, refused.text
    assert [error["loc"] for error in refused.json()["detail"]] == [["body", "method"]]
    assert served.status_code == 200, served.text


def test_verifier_faults_fall_back_and_keep_greedy_output(models):
    """Every third verification raises; those steps are decoded plainly. Greedy output is
    the fault-free output, and the fallbacks are reported in spec and /metrics."""
    from fastapi.testclient import TestClient

    from specdec_lite.service.app import ServiceConfig, create_app
    from specdec_lite.service.engines import EngineFactory
    from specdec_lite.service.runtime import Runtime

    def fault(step: int) -> None:
        if step % 3 == 2:
            raise RuntimeError("injected verifier fault")

    factory = EngineFactory(models.tokenizer, models.target, models.draft, models.ngram_draft,
                            models.heads, inject_fault=fault)
    runtime = Runtime(data_dir=None, max_batch=4, max_queue=8, deadline_s=30.0,
                      factory=factory)
    bodies = [dict(prompt=p, max_tokens=40, temperature=0.0, seed=i, method=m, k=4)
              for i, (p, m) in enumerate(zip(PROMPTS[:4], ["draft", "ngram", "draft", "ngram"],
                                             strict=True))]
    with TestClient(create_app(ServiceConfig(), runtime)) as client:
        with ThreadPoolExecutor(len(bodies)) as pool:
            replies = list(pool.map(
                lambda b: client.post("/v1/completions", json=b), bodies))
        samples = parse_metrics(client.get("/metrics").text)
        assert client.get("/health").json()["status"] == "ok"
    n_fallbacks = 0
    for body, reply in zip(bodies, replies, strict=True):
        assert reply.status_code == 200, reply.text
        data = reply.json()
        prompt = models.tokenizer.encode(body["prompt"])
        greedy = generate(models.target, prompt, max_new_tokens=40, temperature=0.0)
        assert data["choices"][0]["text"] == models.tokenizer.decode(greedy.tokens)
        assert data["choices"][0]["text"] == reference_text(models, body)  # fault-free run
        assert data["spec"]["n_fallbacks"] > 0
        n_fallbacks += data["spec"]["n_fallbacks"]
    assert samples[("specdec_fallbacks_total", (("cause", "error"),))] == n_fallbacks
    assert samples[("specdec_steps_total", (("kind", "plain"),))] == n_fallbacks
    assert samples[("specdec_requests_total", (("outcome", "finished"),))] == len(bodies)


def test_unseeded_requests_differ(server):
    texts = {post(server.url, dict(prompt="a = ", max_tokens=24, temperature=1.0)
                  ).json()["choices"][0]["text"] for _ in range(3)}
    assert len(texts) > 1


def test_alpha_is_accepted_over_checked(server, models):
    """alpha and tau as the book defines them, from the response's own trace counts."""
    body = dict(prompt="    return ", max_tokens=60, temperature=1.0, seed=99, method="ngram",
                k=4)
    data = post(server.url, body).json()
    gen = reference(models, body)
    assert data["spec"]["alpha"] == pytest.approx(gen.n_accepted / gen.n_checked)
    assert data["spec"]["tau"] == pytest.approx(len(gen.tokens) / gen.n_target_calls)
    assert np.isclose(data["spec"]["tau"], data["usage"]["completion_tokens"]
                      / data["spec"]["n_target_calls"])


# ------------------------------------------------------------------ engines and scheduler


def test_idle_engines_are_dropped(models):
    """Each (method, k) gets an engine of its own (whatever the temperature: see the next
    test); clients asking for many distinct k must not pile them up."""
    import gc
    import weakref

    from specdec_lite.service.engines import EngineFactory
    from specdec_lite.service.scheduler import Job, Scheduler, Settings

    factory = EngineFactory(models.tokenizer, models.target, models.draft, models.ngram_draft,
                            models.heads)
    made = weakref.WeakSet()

    def make_engine(*key):
        engine = factory.make_engine(*key)
        made.add(engine)
        return engine

    scheduler = Scheduler(make_engine, max_batch=4, max_queue=8)  # keeps 4 idle engines
    scheduler.start()
    try:
        keys = [("draft", k) for k in range(1, 9)] + [("medusa", 2), ("medusa", 3)]
        for i, (method, k) in enumerate(keys):  # ten engines, one after another
            job = Job(id=f"t{i}", prompt=models.tokenizer.encode("a = "),
                      settings=Settings(method, k, 3, 0.5 + i / 100, None, i),
                      deadline=time.monotonic() + TIMEOUT)
            scheduler.submit(job)
            assert job.done.wait(TIMEOUT) and job.status == "finished"
        time.sleep(0.05)
    finally:
        scheduler.stop()
    gc.collect()
    assert len(keys) == 10 and len(made) <= 5  # the four newest idle ones (and one in hand)


def test_requests_with_different_sampling_share_engine_steps(tmp_path, models):
    """Eight concurrent requests, each with its own temperature and top-p, are decoded in
    shared steps (the batch-size histogram shows batches of several) and each gets the
    tokens of its own solo run."""
    bodies = [dict(prompt=PROMPTS[i % len(PROMPTS)], max_tokens=60, method=method, k=3,
                   temperature=[0.0, 0.5, 0.8, 1.0, 1.3, 0.7, 1.1, 0.9][i],
                   top_p=[1.0, 0.9, 1.0, 0.8, 1.0, 0.95, 1.0, 0.7][i], seed=40 + i)
              for i, method in enumerate(["draft"] * 4 + ["ngram"] * 2 + ["plain"] * 2)]
    with start_server(max_batch=8, log_path=tmp_path / "log") as srv:
        with ThreadPoolExecutor(len(bodies)) as pool:
            replies = list(pool.map(lambda b: post(srv.url, b), bodies))
        for body, reply in zip(bodies, replies, strict=True):
            assert reply.status_code == 200, reply.text
            assert reply.json()["choices"][0]["text"] == reference_text(models, body)
        samples = scrape(srv.url)
    steps = metric(samples, "specdec_batch_size_count")
    rows = metric(samples, "specdec_batch_size_sum")
    assert rows / steps > 1.5, (rows, steps)  # one engine per (method, k): rows share steps


def test_batch_engine_forgets_a_cancelled_or_finished_id(models):
    from specdec_lite.engine.batch import BatchEngine

    engine = BatchEngine(models.target, models.draft, k=3, temperature=0.0, max_batch=2)
    prompt = models.tokenizer.encode("x = ")
    engine.add(prompt, max_new_tokens=4, seed=0, request_id="r")
    first = engine.run()["r"].tokens
    assert engine.cancel("r") is False  # finished already; its id is free again
    engine.add(prompt, max_new_tokens=4, seed=0, request_id="r")
    assert engine.cancel("r") is True
    engine.add(prompt, max_new_tokens=4, seed=0, request_id="r")
    np.testing.assert_array_equal(engine.run()["r"].tokens, first)


def drain(engine) -> dict[str, list]:
    """Every update a step engine gives, per request, until it is empty."""
    updates: dict[str, list] = {}
    while len(engine):
        for key, update in engine.step().items():
            updates.setdefault(key, []).append(update)
    return updates


def test_resumed_medusa_request_counts_only_new_steps(models):
    from specdec_lite.engine.medusa_decode import medusa_generate
    from specdec_lite.service.engines import MedusaStepEngine
    from specdec_lite.service.scheduler import Settings

    prompt = models.tokenizer.encode("def __init__(self")
    gen = medusa_generate(models.target, models.heads, prompt, max_new_tokens=40,
                          temperature=0.0, rule="greedy")
    n_done = sum(len(step.emitted) for step in gen.steps[:3])  # three steps delivered
    engine = MedusaStepEngine(models.target, models.heads, 4, max_batch=4)
    engine.add("m", prompt, gen.tokens[:n_done].tolist(),
               Settings("medusa", 4, 40, 0.0, None, 0), None)
    updates = drain(engine)["m"]
    assert [t for u in updates for t in u.new_tokens] == gen.tokens[n_done:].tolist()
    assert sum(u.n_target_calls for u in updates) == len(gen.steps) - 3
    assert sum(u.n_head_calls for u in updates) == gen.n_head_calls - 2  # step 0 calls none
    assert updates[-1].finished and not any(u.finished for u in updates[:-1])


def test_medusa_requests_advance_a_step_per_turn_with_their_own_settings(models):
    from specdec_lite.drafting.medusa import chain_tree
    from specdec_lite.engine.medusa_decode import medusa_generate
    from specdec_lite.service.engines import MedusaStepEngine
    from specdec_lite.service.scheduler import Settings

    prompts = {name: models.tokenizer.encode(text) for name, text in
               [("cold", "def __init__(self"), ("warm", "import os\n"), ("hot", "class A:")]}
    temperatures = {"cold": 0.0, "warm": 0.7, "hot": 1.0}
    engine = MedusaStepEngine(models.target, models.heads, 3, max_batch=3)
    for name, prompt in prompts.items():
        engine.add(name, prompt, [], Settings("medusa", 3, 30, temperatures[name], None, 11),
                   None)
    first = engine.step()
    assert set(first) == set(prompts) and all(len(u.new_tokens) == 1 for u in first.values())
    updates = drain(engine)
    for name, prompt in prompts.items():
        t = temperatures[name]
        alone = medusa_generate(models.target, models.heads, prompt, max_new_tokens=30,
                                temperature=t, tree=None if t == 0 else chain_tree(3),
                                rule="greedy" if t == 0 else "exact",
                                seed=np.random.default_rng(11))
        tokens = first[name].new_tokens + [t for u in updates[name] for t in u.new_tokens]
        assert tokens == alone.tokens.tolist()
        assert len(updates[name]) == len(alone.steps) - 1  # one step per turn


def test_service_errors_are_counted_under_their_own_cause():
    from specdec_lite.service.stats import ServiceMetrics

    metrics = ServiceMetrics()
    for cause in ("journal", "journal", "engine", "scheduler"):
        metrics.error(cause)
    text, _ = metrics.exposition(0, 0)
    assert 'specdec_errors_total{cause="journal"} 2.0' in text
    assert 'specdec_errors_total{cause="engine"} 1.0' in text
    assert 'specdec_errors_total{cause="scheduler"} 1.0' in text
    assert 'specdec_errors_total{cause="error"} 0.0' in text  # not counted as a verifier fault


def test_plain_method_steps_are_counted_as_plain_not_as_accepted_zeros():
    from specdec_lite.service.scheduler import StepUpdate
    from specdec_lite.service.stats import ServiceMetrics

    metrics = ServiceMetrics()
    plain = StepUpdate(new_tokens=[1], finished=False)
    spec = StepUpdate(new_tokens=[1, 2, 3], finished=False, n_draft_calls=3, n_proposed=3,
                      n_accepted=2, n_checked=3)
    metrics.sequence_step("a", plain, 1, 0.001, "plain")
    metrics.sequence_step("b", spec, 3, 0.001, "draft")
    text, _ = metrics.exposition(0, 0)
    assert 'specdec_steps_total{kind="plain"} 1.0' in text
    assert 'specdec_steps_total{kind="speculative"} 1.0' in text
    assert "specdec_accepted_tokens_count 1.0" in text  # only the speculative step
    assert "specdec_tokens_total 4.0" in text


def test_worker_process_verifier_survives_its_worker_being_killed(tmp_path, models):
    """``--verifier process``: the target forward of every batched step runs in a worker
    process. Its outputs are the library's; killed with SIGKILL, it costs the step in
    flight a plain (in-process) decode and is restarted, and the server goes on."""
    import os
    import signal

    with start_server(data_dir=tmp_path / "data", log_path=tmp_path / "server.log",
                      extra_args=("--verifier", "process", "--verify-timeout", "30")) as srv:
        health = httpx.get(srv.url + "/health", timeout=10).json()
        assert health["verifier"]["kind"] == "process" and health["verifier"]["restarts"] == 0
        assert "eagle" not in health["methods"]  # its features would be computed twice
        refused = httpx.post(srv.url + "/v1/completions", json=dict(prompt="a", method="eagle"),
                             timeout=30)
        assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == [
            "body", "method"]
        bodies = [dict(prompt="def __init__(self", max_tokens=40, temperature=t, seed=3,
                       method="draft", k=3) for t in (0.0, 1.0)]
        for body in bodies:
            assert post(srv.url, body).json()["choices"][0]["text"] == reference_text(
                models, body)
        os.kill(health["verifier"]["pid"], signal.SIGKILL)
        reply = post(srv.url, bodies[0]).json()  # greedy: a plain fallback step changes nothing
        assert reply["choices"][0]["text"] == reference_text(models, bodies[0])
        assert reply["spec"]["n_fallbacks"] >= 1
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the restarted worker takes the next steps
            health = httpx.get(srv.url + "/health", timeout=10).json()
            if post(srv.url, bodies[1]).json()["spec"]["n_fallbacks"] == 0:
                break
            time.sleep(0.5)
        assert health["status"] == "ok" and health["verifier"]["restarts"] >= 1
        assert post(srv.url, bodies[1]).json()["choices"][0]["text"] == reference_text(
            models, bodies[1])
