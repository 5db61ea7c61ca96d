"""The service's metrics: the engine's Prometheus series plus the request-level ones.

The engine series (tokens, target and draft calls, accepted tokens per step, step latency,
fallbacks and errors by cause, batch size) come from
:class:`specdec_lite.engine.telemetry.PrometheusSink`; this module adds what only a server has:
requests by outcome (including 429 refusals), request latency, jobs waiting and running,
and requests resumed from the journal. The speculative counts are also exported under
vLLM's names (``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``,
``..._num_accepted_tokens`` and ``..._num_accepted_tokens_per_pos`` by draft position), so
a dashboard built for vLLM reads this server too. Each server has its own registry. Structured logs
(one JSON object per event, with the request id) go to the ``specdec_lite.service``
logger through :class:`specdec_lite.engine.telemetry.LogSink`.
"""

from __future__ import annotations

import logging
import time

from ..engine.telemetry import LogSink, PrometheusSink, Sinks, StepEvent, Summary
from .scheduler import Job, StepUpdate

OUTCOMES = ("finished", "failed", "deadline", "cancelled", "rejected")


class ServiceMetrics:
    """Counters for one server; the scheduler calls ``step``, ``sequence_step``,
    ``outcome`` and ``error`` from its thread, the HTTP side ``rejected``."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.engine = PrometheusSink(self.registry)
        self.log = LogSink(logger or logging.getLogger("specdec_lite.service"))
        self.sink = Sinks(self.engine, self.log)
        self.requests = Counter("specdec_requests", "Requests ended, by outcome", ("outcome",),
                                registry=self.registry)
        for outcome in OUTCOMES:
            self.requests.labels(outcome)
        self.latency = Histogram("specdec_request_latency_seconds",
                                 "From acceptance to the last token",
                                 buckets=(0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 60),
                                 registry=self.registry)
        self.waiting = Gauge("specdec_requests_waiting", "Jobs waiting for a batch slot",
                             registry=self.registry)
        self.running = Gauge("specdec_requests_running", "Jobs in the running batch",
                             registry=self.registry)
        self.resumed_total = Counter("specdec_requests_resumed",
                                     "Unfinished jobs resumed from the journal at start",
                                     registry=self.registry)
        self.drafts = Counter("vllm:spec_decode_num_drafts",
                              "Steps that verified a draft proposal", registry=self.registry)
        self.draft_tokens = Counter("vllm:spec_decode_num_draft_tokens",
                                    "Draft tokens proposed and verified", registry=self.registry)
        self.accepted = Counter("vllm:spec_decode_num_accepted_tokens",
                                "Draft tokens accepted", registry=self.registry)
        self.accepted_per_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos",
                                        "Draft tokens accepted, by position in the proposal",
                                        ("position",), registry=self.registry)

    def step(self, batch_size: int, elapsed_s: float) -> None:
        self.sink.batch(batch_size)

    def sequence_step(self, job_id: str, update: StepUpdate, n_new: int,
                      elapsed_s: float, method: str = "draft") -> None:
        for step in update.steps:
            if step.proposed:
                self.drafts.inc()
                self.draft_tokens.inc(len(step.proposed))
                self.accepted.inc(step.n_accepted)
                for position in range(step.n_accepted):
                    self.accepted_per_pos.labels(str(position)).inc()
        plain = update.n_fallbacks > 0
        if method == "plain":  # plain decoding: no draft, nothing to accept
            self.engine.tokens.inc(n_new)
            self.engine.target_calls.inc(update.n_target_calls)
            self.engine.latency.observe(elapsed_s)
            self.engine.steps.labels("plain").inc()
            return
        self.sink.step(StepEvent(
            request_id=job_id, index=0, proposed=update.n_proposed,
            accepted=update.n_accepted, emitted=n_new, target_calls=update.n_target_calls,
            draft_calls=update.n_draft_calls, latency_s=elapsed_s,
            cause="error" if plain else None))
        if plain:
            self.sink.fault(job_id, "error", "verification failed; step decoded plainly")

    def outcome(self, job: Job) -> None:
        if job.error is None:
            self.requests.labels("finished").inc()
            s = job.stats
            n_checked, calls = s["n_checked"], s["n_target_calls"]
            self.sink.finish(Summary(
                request_id=job.id, n_tokens=len(job.tokens), n_steps=calls,
                n_target_calls=calls, n_draft_calls=s["n_draft_calls"],
                alpha=s["n_accepted"] / n_checked if n_checked else 0.0,
                tau=len(job.tokens) / calls if calls else 0.0,
                fallbacks={"error": s["n_fallbacks"]} if s["n_fallbacks"] else {},
                wall_time_s=time.monotonic() - job.submitted_at))
        else:
            self.requests.labels(job.failure).inc()
            self.sink.fail(job.id, RuntimeError(job.error))
        self.latency.observe(time.monotonic() - job.submitted_at)

    def error(self, cause: str) -> None:
        """A failure of the service's own machinery, counted under its cause
        (``"journal"``, ``"engine"``, ``"scheduler"``) in ``errors_total``."""
        self.sink.fault("-", cause, f"{cause} failed")

    def rejected(self) -> None:
        self.requests.labels("rejected").inc()

    def resumed(self, n: int) -> None:
        self.resumed_total.inc(n)

    def exposition(self, waiting: int, running: int) -> tuple[str, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        self.waiting.set(waiting)
        self.running.set(running)
        return generate_latest(self.registry).decode(), CONTENT_TYPE_LATEST
