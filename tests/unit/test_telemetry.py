"""Metrics and structured logs: the exposition text and the JSON lines, parsed back, must
agree with the Generation they describe."""

import io
import json
import logging
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from support import alarm_after

from specdec_lite.engine.breaker import CircuitBreaker
from specdec_lite.engine.faults import InProcessVerifier
from specdec_lite.engine.resilient import resilient_generate
from specdec_lite.engine.telemetry import (
    NULL_SINK,
    JsonLinesFormatter,
    LogSink,
    PrometheusSink,
    Sinks,
    make_sink,
)
from specdec_lite.teaching.exactness import small_pair

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402


@pytest.fixture(autouse=True)
def time_limit():
    undo = alarm_after(60)
    yield
    undo()


class EveryThird:
    """A verifier failing on every third call."""

    def __init__(self, target):
        self.inner, self.calls = InProcessVerifier(target), 0

    def __call__(self, request, timeout=None):
        self.calls += 1
        if self.calls % 3 == 0:
            raise RuntimeError("injected")
        return self.inner(request, timeout)


def run(sink, seed, request_id="req-1", max_new_tokens=30):
    target, draft, prompt = small_pair()
    return resilient_generate(target, draft, prompt, k=3, max_new_tokens=max_new_tokens,
                              seed=seed, verifier=EveryThird(target), sink=sink,
                              breaker=CircuitBreaker(failures=1, cooldown_steps=2),
                              request_id=request_id)


def samples(registry) -> dict:
    """{(sample name, frozenset of labels): value} from the exposition text."""
    text = prometheus_client.generate_latest(registry).decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(parsed, name, **labels):
    return parsed[(name, frozenset(labels.items()))]


def test_metrics_match_the_generations():
    registry = prometheus_client.CollectorRegistry()
    sink = PrometheusSink(registry)
    gens = [run(sink, seed) for seed in (1, 2)]  # one sink, two runs: the counts add up
    parsed = samples(registry)
    total = lambda attr: sum(getattr(g, attr) for g in gens)  # noqa: E731
    causes = [c for g in gens for c in g.causes]
    assert value(parsed, "specdec_tokens_total") == sum(len(g.tokens) for g in gens) == 60
    assert value(parsed, "specdec_target_calls_total") == total("n_target_calls")
    assert value(parsed, "specdec_draft_calls_total") == total("n_draft_calls")
    n_spec = causes.count(None)
    assert value(parsed, "specdec_steps_total", kind="speculative") == n_spec
    assert value(parsed, "specdec_steps_total", kind="plain") == len(causes) - n_spec
    assert value(parsed, "specdec_accepted_tokens_count") == n_spec
    assert value(parsed, "specdec_accepted_tokens_sum") == total("n_accepted")
    for cause in ("error", "timeout", "crash", "unavailable", "circuit_open"):
        assert value(parsed, "specdec_fallbacks_total", cause=cause) == causes.count(cause)
    assert causes.count("error") > 0 and causes.count("circuit_open") > 0
    assert value(parsed, "specdec_errors_total", cause="error") == causes.count("error")
    assert value(parsed, "specdec_errors_total", cause="generation") == 0
    assert value(parsed, "specdec_step_latency_seconds_count") == len(causes)
    assert value(parsed, "specdec_batch_size_count") == len(causes)
    assert value(parsed, "specdec_batch_size_sum") == len(causes)  # batch size 1 throughout
    assert value(parsed, "specdec_generations_total", outcome="finished") == 2
    # the accepted-tokens buckets are cumulative counts of steps with <= le accepted
    accepted = [s.n_accepted for g in gens for s, c in zip(g.steps, g.causes, strict=True)
                if c is None]
    for le in range(4):
        assert value(parsed, "specdec_accepted_tokens_bucket", le=f"{le:.1f}") == sum(
            a <= le for a in accepted)


def test_registries_do_not_collide_and_the_global_one_is_untouched():
    first, second = prometheus_client.CollectorRegistry(), prometheus_client.CollectorRegistry()
    run(PrometheusSink(first), seed=1)
    run(PrometheusSink(second), seed=1, max_new_tokens=10)
    assert value(samples(first), "specdec_tokens_total") == 30
    assert value(samples(second), "specdec_tokens_total") == 10
    global_text = prometheus_client.generate_latest(prometheus_client.REGISTRY).decode()
    assert "specdec_" not in global_text
    with pytest.raises(ValueError, match="Duplicated"):  # one sink per registry
        PrometheusSink(first)


def test_json_logs_one_object_per_event_with_the_request_id():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonLinesFormatter())
    logger = logging.getLogger("specdec_lite.test_telemetry")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(handler)
    try:
        gen = run(LogSink(logger), seed=3, request_id="abc")
    finally:
        logger.removeHandler(handler)
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert all(e["request_id"] == "abc" for e in events)
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "finish"
    steps = [e for e in events if e["event"] == "step"]
    assert [e["emitted"] for e in steps] == [len(s.emitted) for s in gen.steps]
    assert [e["cause"] for e in steps] == gen.causes
    assert [e["index"] for e in steps] == list(range(len(gen.steps)))
    assert kinds.count("fault") == gen.fallbacks["error"]
    finish = events[-1]
    assert finish["n_tokens"] == len(gen.tokens) and finish["n_steps"] == len(gen.steps)
    assert finish["fallbacks"] == gen.fallbacks


def test_log_message_is_json_with_any_formatter(caplog):
    caplog.set_level(logging.INFO, logger="specdec_lite")
    run(LogSink(), seed=4, request_id="plain-formatter")  # the default "specdec_lite" logger
    records = [r for r in caplog.records if r.name == "specdec_lite"]
    assert records and all(json.loads(r.getMessage())["request_id"] == "plain-formatter"
                           for r in records)
    assert all(r.specdec_event["request_id"] == "plain-formatter" for r in records)
    assert not any(json.loads(r.getMessage())["event"] == "step" for r in records)  # DEBUG


def test_a_failed_generation_is_counted_and_logged():
    registry = prometheus_client.CollectorRegistry()
    stream = io.StringIO()
    logger = logging.getLogger("specdec_lite.test_fail")
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)

    class Broken:
        vocab_size = 3

        def probs(self, tokens):
            raise OSError("target gone")

    target, draft, prompt = small_pair()
    sink = make_sink(registry, logger)
    assert isinstance(sink, Sinks)
    try:
        with pytest.raises(OSError, match="target gone"):
            resilient_generate(Broken(), draft, prompt, k=2, max_new_tokens=5, seed=0,
                               sink=sink, request_id="dead")
    finally:
        logger.removeHandler(handler)
    parsed = samples(registry)
    assert value(parsed, "specdec_errors_total", cause="generation") == 1
    assert value(parsed, "specdec_generations_total", outcome="failed") == 1
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert events[-1]["event"] == "fail" and "target gone" in events[-1]["error"]


def test_make_sink_and_bad_input():
    assert make_sink() is NULL_SINK
    assert make_sink(prometheus_client.CollectorRegistry(), enabled=False) is NULL_SINK
    assert isinstance(make_sink(logger=logging.getLogger("x")), LogSink)
    with pytest.raises(TypeError, match="registry"):
        PrometheusSink(object())
    with pytest.raises(ValueError, match="max_k"):
        PrometheusSink(prometheus_client.CollectorRegistry(), max_k=0)
    with pytest.raises(TypeError, match="logger"):
        LogSink("specdec")
    gen = run(NULL_SINK, seed=5)  # the null sink changes nothing
    assert np.array_equal(gen.tokens, run(None, seed=5).tokens)


def test_the_library_works_without_prometheus_client():
    script = textwrap.dedent("""
        import logging, sys
        sys.modules["prometheus_client"] = None  # as if it were not installed
        import specdec_lite, specdec_lite.engine.faults, specdec_lite.engine.resilient
        import specdec_lite.engine.journal
        from specdec_lite.engine.telemetry import PrometheusSink, make_sink, prometheus_available
        from specdec_lite.teaching.exactness import small_pair
        target, draft, prompt = small_pair()
        gen = specdec_lite.engine.resilient.resilient_generate(
            target, draft, prompt, k=2, max_new_tokens=6, seed=0,
            sink=make_sink(logger=logging.getLogger("x")))
        assert len(gen.tokens) == 6 and not prometheus_available()
        try:
            PrometheusSink(object())
        except ImportError as exc:
            print("ImportError:", exc)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pip install specdec_lite[metrics]" in out.stdout


def test_importing_the_library_does_not_import_prometheus_client():
    script = ("import sys, specdec_lite, specdec_lite.engine.telemetry, "
              "specdec_lite.engine.resilient, specdec_lite.engine.journal; "
              "print('prometheus_client' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
