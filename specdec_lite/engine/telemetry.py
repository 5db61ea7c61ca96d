"""Metrics and structured logs for the decode engines; both optional.

An engine reports what happens to a *sink* (:class:`Sink`): a generation starting, each
sequence step, each engine step's batch size, each verifier fault, and the end. Sinks:

* :data:`NULL_SINK` does nothing (the default: the library runs on numpy alone);
* :class:`PrometheusSink` keeps ``prometheus_client`` counters and histograms on a
  ``CollectorRegistry`` the caller supplies (never the global one, so tests and several
  servers in one process do not collide). ``prometheus_client`` is imported only when
  one is made: ``pip install specdec_lite[metrics]``;
* :class:`LogSink` writes one JSON object per event, with its ``request_id``, through
  stdlib :mod:`logging` (the record's message is the JSON text, and the dict is on the
  record as ``specdec_event``);
* :func:`make_sink` builds the combination asked for, or the null sink.

The metrics (prefix ``specdec_``): ``tokens_total``, ``target_calls_total``,
``draft_calls_total``, ``steps_total{kind}`` (``speculative`` or ``plain``),
``accepted_tokens`` (histogram of draft tokens accepted per speculative step),
``step_latency_seconds`` (histogram), ``fallbacks_total{cause}`` (steps decoded plainly,
by :data:`specdec_lite.engine.faults.CAUSES`), ``errors_total{cause}`` (verifier faults by cause,
``"generation"`` for an exception that ended a generation, and in the service
``"journal"``, ``"engine"`` or ``"scheduler"`` for a failure of its own machinery), ``batch_size``
(histogram, one observation per engine step) and ``generations_total{outcome}``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from typing import Protocol

#: The fallback causes, as :data:`specdec_lite.engine.faults.CAUSES` lists them (not imported:
#: telemetry depends on nothing else in the library).
FALLBACK_CAUSES = ("error", "timeout", "crash", "unavailable", "circuit_open")
ERROR_CAUSES = ("error", "timeout", "crash", "unavailable", "generation")


@dataclass(frozen=True)
class StepEvent:
    """One sequence step, as a sink sees it.

    ``proposed`` draft tokens, ``accepted`` of them kept, ``emitted`` tokens appended;
    ``cause`` is None for a speculative step and the fallback cause for a plain one;
    ``target_calls`` and ``draft_calls`` are the forward passes the step made.
    """

    request_id: str
    index: int
    proposed: int
    accepted: int
    emitted: int
    target_calls: int
    draft_calls: int
    latency_s: float
    cause: str | None = None


@dataclass(frozen=True)
class Summary:
    """A finished generation's totals (what :meth:`Sink.finish` gets)."""

    request_id: str
    n_tokens: int
    n_steps: int
    n_target_calls: int
    n_draft_calls: int
    alpha: float
    tau: float
    fallbacks: dict
    wall_time_s: float


class Sink(Protocol):
    """What an engine reports to. Every method must be cheap and must not raise."""

    def start(self, request_id: str, n_prompt: int, settings: dict) -> None: ...
    def step(self, event: StepEvent) -> None: ...
    def batch(self, size: int) -> None: ...
    def fault(self, request_id: str, cause: str, detail: str) -> None: ...
    def finish(self, summary: Summary) -> None: ...
    def fail(self, request_id: str, exc: BaseException) -> None: ...


class NullSink:
    """A sink that records nothing."""

    def start(self, request_id: str, n_prompt: int, settings: dict) -> None:
        pass

    def step(self, event: StepEvent) -> None:
        pass

    def batch(self, size: int) -> None:
        pass

    def fault(self, request_id: str, cause: str, detail: str) -> None:
        pass

    def finish(self, summary: Summary) -> None:
        pass

    def fail(self, request_id: str, exc: BaseException) -> None:
        pass


NULL_SINK = NullSink()


def prometheus_available() -> bool:
    """Whether ``prometheus_client`` can be imported."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True


class PrometheusSink(NullSink):
    """Counters and histograms on ``registry`` (a ``prometheus_client.CollectorRegistry``).

    A registry can hold one set of these metrics: engines that report to the same registry
    share one ``PrometheusSink`` (its metrics are thread-safe). ``max_k`` sets the buckets
    of the accepted-tokens histogram (0, 1, .., max_k).
    """

    def __init__(self, registry: object, *, max_k: int = 16) -> None:
        try:
            from prometheus_client import CollectorRegistry, Counter, Histogram
        except ImportError as exc:
            raise ImportError("PrometheusSink needs prometheus_client: "
                              "pip install specdec_lite[metrics]") from exc
        if not isinstance(registry, CollectorRegistry):
            raise TypeError(f"registry must be a prometheus_client.CollectorRegistry, "
                            f"got {type(registry).__name__}")
        if isinstance(max_k, bool) or not isinstance(max_k, int) or max_k < 1:
            raise ValueError(f"max_k must be an int >= 1, got {max_k!r}")
        self.registry = registry

        def counter(name: str, doc: str, labels: tuple = ()) -> Counter:
            return Counter(f"specdec_{name}", doc, labels, registry=registry)

        self.tokens = counter("tokens", "Tokens emitted")
        self.target_calls = counter("target_calls", "Target forward passes")
        self.draft_calls = counter("draft_calls", "Draft forward passes")
        self.steps = counter("steps", "Sequence steps, by kind", ("kind",))
        self.fallbacks = counter("fallbacks", "Steps decoded plainly, by cause", ("cause",))
        self.errors = counter("errors", "Verifier faults, failed generations and service "
                              "failures, by cause", ("cause",))
        self.generations = counter("generations", "Generations ended, by outcome", ("outcome",))
        self.accepted = Histogram("specdec_accepted_tokens",
                                  "Draft tokens accepted per speculative step",
                                  buckets=[float(i) for i in range(max_k + 1)], registry=registry)
        self.latency = Histogram("specdec_step_latency_seconds", "Latency of one sequence step",
                                 buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
                                          0.2, 0.5, 1.0, 2.0, 5.0), registry=registry)
        self.batch_size = Histogram("specdec_batch_size", "Sequences advanced per engine step",
                                    buckets=(1, 2, 4, 8, 16, 32, 64, 128), registry=registry)
        for kind in ("speculative", "plain"):  # every series exists from the start, at 0
            self.steps.labels(kind)
        for cause in FALLBACK_CAUSES:
            self.fallbacks.labels(cause)
        for cause in ERROR_CAUSES:
            self.errors.labels(cause)
        for outcome in ("finished", "failed"):
            self.generations.labels(outcome)

    def step(self, event: StepEvent) -> None:
        self.tokens.inc(event.emitted)
        self.target_calls.inc(event.target_calls)
        self.draft_calls.inc(event.draft_calls)
        self.latency.observe(event.latency_s)
        if event.cause is None:
            self.steps.labels("speculative").inc()
            self.accepted.observe(event.accepted)
        else:
            self.steps.labels("plain").inc()
            self.fallbacks.labels(event.cause).inc()

    def batch(self, size: int) -> None:
        self.batch_size.observe(size)

    def fault(self, request_id: str, cause: str, detail: str) -> None:
        self.errors.labels(cause).inc()

    def finish(self, summary: Summary) -> None:
        self.generations.labels("finished").inc()

    def fail(self, request_id: str, exc: BaseException) -> None:
        self.errors.labels("generation").inc()
        self.generations.labels("failed").inc()


class LogSink(NullSink):
    """One JSON object per event on ``logger`` (default ``logging.getLogger("specdec_lite")``).

    Every object has ``event`` (``start``, ``step``, ``fault``, ``finish``, ``fail``),
    ``request_id`` and ``ts`` (Unix time). Steps log at ``step_level`` (DEBUG by default,
    they are many), faults and failures at WARNING and ERROR, the rest at INFO. Token ids
    are not logged, only counts.
    """

    def __init__(self, logger: logging.Logger | None = None, *,
                 step_level: int = logging.DEBUG) -> None:
        self.logger = logger if logger is not None else logging.getLogger("specdec_lite")
        if not isinstance(self.logger, logging.Logger):
            raise TypeError(f"logger must be a logging.Logger, got {type(logger).__name__}")
        self.step_level = step_level

    def _emit(self, level: int, event: str, request_id: str, **fields: object) -> None:
        if not self.logger.isEnabledFor(level):
            return
        record = {"event": event, "request_id": request_id, "ts": time.time(), **fields}
        self.logger.log(level, json.dumps(record, default=str), extra={"specdec_event": record})

    def start(self, request_id: str, n_prompt: int, settings: dict) -> None:
        self._emit(logging.INFO, "start", request_id, n_prompt=n_prompt, settings=settings)

    def step(self, event: StepEvent) -> None:
        fields = asdict(event)
        fields.pop("request_id")
        self._emit(self.step_level, "step", event.request_id, **fields)

    def fault(self, request_id: str, cause: str, detail: str) -> None:
        self._emit(logging.WARNING, "fault", request_id, cause=cause, detail=detail)

    def finish(self, summary: Summary) -> None:
        fields = asdict(summary)
        fields.pop("request_id")
        self._emit(logging.INFO, "finish", summary.request_id, **fields)

    def fail(self, request_id: str, exc: BaseException) -> None:
        self._emit(logging.ERROR, "fail", request_id, error=f"{type(exc).__name__}: {exc}")


class Sinks(NullSink):
    """Several sinks, each told every event in turn."""

    def __init__(self, *sinks: Sink) -> None:
        self.sinks = sinks

    def start(self, request_id: str, n_prompt: int, settings: dict) -> None:
        for sink in self.sinks:
            sink.start(request_id, n_prompt, settings)

    def step(self, event: StepEvent) -> None:
        for sink in self.sinks:
            sink.step(event)

    def batch(self, size: int) -> None:
        for sink in self.sinks:
            sink.batch(size)

    def fault(self, request_id: str, cause: str, detail: str) -> None:
        for sink in self.sinks:
            sink.fault(request_id, cause, detail)

    def finish(self, summary: Summary) -> None:
        for sink in self.sinks:
            sink.finish(summary)

    def fail(self, request_id: str, exc: BaseException) -> None:
        for sink in self.sinks:
            sink.fail(request_id, exc)


def make_sink(registry: object | None = None, logger: logging.Logger | None = None, *,
              enabled: bool = True) -> Sink:
    """The sink for a ``registry`` (Prometheus metrics) and/or a ``logger`` (JSON logs);
    :data:`NULL_SINK` when neither is given or ``enabled`` is False."""
    if not enabled:
        return NULL_SINK
    sinks = []
    if registry is not None:
        sinks.append(PrometheusSink(registry))
    if logger is not None:
        sinks.append(LogSink(logger))
    if not sinks:
        return NULL_SINK
    return sinks[0] if len(sinks) == 1 else Sinks(*sinks)


class JsonLinesFormatter(logging.Formatter):
    """A formatter that writes a :class:`LogSink` event as its JSON text alone, and any
    other record as a JSON object with ``event: "log"`` and its message."""

    def format(self, record: logging.LogRecord) -> str:
        event = getattr(record, "specdec_event", None)
        if event is not None:
            return json.dumps(event, default=str)
        return json.dumps({"event": "log", "level": record.levelname, "logger": record.name,
                           "ts": record.created, "message": record.getMessage()})
