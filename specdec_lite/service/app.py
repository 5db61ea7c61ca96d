"""The HTTP service: ``create_app(config)`` builds the FastAPI application.

Endpoints:

- ``POST /v1/completions``: an OpenAI-style completion (see :mod:`.schema`), answered whole
  or streamed as server-sent events (``"stream": true``), one event per engine step with the
  tokens that step accepted, then a last event with the statistics and ``data: [DONE]``.
- ``GET /v1/completions/{request_id}``: the result of an earlier request by its id, also
  after a restart (from the journal); 404 if unknown, 202 while it is still running.
- ``DELETE /v1/completions/{request_id}``: cancel a live request (202; it fails with
  "cancelled" and keeps its tokens so far); 404 if it is not live.
- ``GET /v1/models``: the one model this server runs, as OpenAI lists models.
- ``GET /metrics``: Prometheus text format.
- ``GET /health`` (liveness): 200 while the engine thread runs, with ``"status": "ok"`` or
  ``"degraded"`` (the journal has writes it could not make yet, see
  :mod:`.persist`), ``"forward"``, the forward the engines run, and ``"verifier"``, where
  their target forward runs (in process, or a worker process: its pid and restarts); 503
  when the engine
  stopped. ``GET /ready`` (readiness): 200 only when
  the status is ``"ok"``, else 503, so a load balancer sends new work elsewhere meanwhile.

Errors: 422 names the offending field (pydantic's ``loc``), 413 for a body over
``max_body_bytes`` (counted as it arrives, so also for a chunked body that announces no
length), 429 with ``Retry-After`` when the queue is full, 409 when the request was
cancelled or its ``request_id`` was used for a different request, 504 when a request's
deadline passes (it has the tokens generated so far), 503 when the engine is not running
or the journal cannot record the request (it was not accepted; retry).

``request_id`` is an idempotency key bound to the request: the same prompt and settings
(and seed, if one is given) return the one result, live or stored; anything else under
that id is refused with 409. A request that failed (deadline, cancelled, engine error) runs
again when it is sent again.

A client that disconnects (streamed or not) cancels its request once no other client waits
for the same request id: within ``DISCONNECT_POLL_S`` plus one engine step, the request
leaves the queue or its batch, and its slot and caches are freed.

The journal (SQLite) is never read or written on the event loop: a stalled disk delays
the requests that wait for it, not ``/health`` or other clients' streams.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import math
import secrets
import time
from dataclasses import dataclass

import numpy as np
from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.middleware.trustedhost import TrustedHostMiddleware

from ..drafting.draft_length import HEURISTIC_K_MAX
from .scheduler import Job, QueueFull, Scheduler, Settings, same_request
from .schema import CompletionRequest, CompletionResponse

MODEL_NAME = "specdec-lite-gpt"
#: How often a waiting request checks whether its client is still connected.
DISCONNECT_POLL_S = 0.1


@dataclass(frozen=True)
class ServiceConfig:
    """How the HTTP layer answers; see ``python -m specdec_lite serve --help``. What the
    engine runs with (the data directory, the batch and queue sizes, each request's
    deadline) is the :class:`~specdec_lite.service.runtime.Runtime`'s alone, so a new
    request and a resumed one get the same deadline."""

    max_body_bytes: int = 16_384
    api_key: str | None = None  # when set, /v1/* needs "Authorization: Bearer <key>"
    allowed_hosts: tuple[str, ...] = ("*",)  # Host header values answered; others get 400
    docs: bool = False  # serve /docs, /redoc and /openapi.json


def _finite(value: object) -> object:
    """``value`` with every NaN or infinity (which strict JSON lacks) written as a string."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


class SafeJSONResponse(JSONResponse):
    """JSON that echoes client input safely: ASCII only (a lone surrogate in a prompt is
    escaped instead of failing to encode) and no NaN or infinity (written as strings)."""

    def render(self, content: object) -> bytes:
        return json.dumps(_finite(content), ensure_ascii=True, allow_nan=False,
                          separators=(",", ":")).encode("ascii")


def field_error(field: str, message: str, value: object = None) -> JSONResponse:
    """A 422 in FastAPI's own validation shape, naming ``field``."""
    detail = [{"type": "value_error", "loc": ["body", field], "msg": message, "input": value}]
    return SafeJSONResponse({"detail": detail}, status_code=422)


class BodyLimit:
    """ASGI middleware: 413 for a request body over ``max_bytes``. A ``Content-Length``
    over the limit is refused before reading; a body without one (chunked) is counted as
    it arrives and refused as soon as it passes the limit, never held whole."""

    def __init__(self, app, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        message = f"request body over {self.max_bytes} bytes"
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            await JSONResponse({"detail": message}, status_code=413)(scope, receive, send)
            return
        seen = 0

        async def counted():
            nonlocal seen
            event = await receive()
            seen += len(event.get("body", b""))
            if seen > self.max_bytes:  # FastAPI re-raises it from its body reading
                raise HTTPException(413, message)
            return event

        await self.app(scope, counted, send)


class ApiKey:
    """ASGI middleware: every ``/v1/`` path needs ``Authorization: Bearer <key>`` (401
    otherwise, compared in constant time); health, readiness and metrics stay open to the
    machine's own monitoring."""

    def __init__(self, app, key: str) -> None:
        self.app, self.expected = app, f"Bearer {key}".encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                reply = JSONResponse({"detail": "missing or wrong API key"}, status_code=401,
                                     headers={"WWW-Authenticate": "Bearer"})
                await reply(scope, receive, send)
                return
        await self.app(scope, receive, send)


def response_body(job: Job, tokenizer, created: int) -> dict:
    """The JSON body of a finished (or failed) job."""
    stats = job.stats
    n_checked = stats["n_checked"]
    calls = stats["n_target_calls"]
    reason = "error" if job.status == "failed" else "stop" if job.stopped else "length"
    body = CompletionResponse(
        id=job.id, created=created, model=MODEL_NAME,
        choices=[dict(text=tokenizer.decode(np.asarray(job.tokens, dtype=np.intp)),
                      finish_reason=reason)],
        usage=dict(prompt_tokens=len(job.prompt), completion_tokens=len(job.tokens),
                   total_tokens=len(job.prompt) + len(job.tokens)),
        spec=dict(method=job.settings.method, k=job.settings.k, policy=job.settings.policy,
                  alpha=stats["n_accepted"] / n_checked if n_checked else 0.0,
                  tau=len(job.tokens) / calls if calls else 0.0,
                  n_target_calls=calls, n_draft_calls=stats["n_draft_calls"],
                  n_head_calls=stats["n_head_calls"], n_fallbacks=stats["n_fallbacks"]),
    )
    out = body.model_dump()
    if job.error:
        out["error"] = job.error
    return out


# The HTTP status of each kind of failure (specdec_lite.service.scheduler.FAILURE_KINDS).
FAILURE_STATUS = {"deadline": 504, "cancelled": 409, "failed": 500}


def failure_status(job: Job) -> int:
    """The HTTP status of a failed job, by its kind: 504 past its deadline, 409 when it was
    cancelled (by DELETE, or because its client left), else 500."""
    return FAILURE_STATUS[job.failure or "failed"]


def create_app(config: ServiceConfig, runtime) -> FastAPI:
    """The application over ``runtime`` (:class:`specdec_lite.service.runtime.Runtime`:
    tokenizer, scheduler, journal, metrics), which the app starts and stops with itself."""
    docs = {} if config.docs else dict(docs_url=None, redoc_url=None, openapi_url=None)
    app = FastAPI(title="specdec_lite", version="1", lifespan=runtime.lifespan, **docs)
    scheduler: Scheduler = runtime.scheduler
    tokenizer = runtime.tokenizer

    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
    if config.api_key:
        app.add_middleware(ApiKey, key=config.api_key)
    if tuple(config.allowed_hosts) != ("*",):
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(config.allowed_hosts))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own 422 body, rendered so that no input can make it fail (a NaN
        # temperature or a lone surrogate in a prompt gave a 500 with the default one)
        return SafeJSONResponse({"detail": jsonable_encoder(exc.errors())}, status_code=422)

    @app.get("/health")
    def health() -> JSONResponse:
        waiting, running = scheduler.load()
        status, why = scheduler.health()
        body = {"status": status, "waiting": waiting, "running": running,
                "steps": scheduler.n_steps, "resumed": runtime.n_resumed,
                "pruned": runtime.n_pruned, "forward": runtime.factory.forward,
                "verifier": runtime.factory.verifier, "methods": list(runtime.methods),
                "spec_max_batch": runtime.factory.spec_max_batch}
        if runtime.factory.batch_gains is not None:  # --spec-max-batch auto: its evidence
            body["batch_gains"] = {str(b): round(g, 3)
                                   for b, g in runtime.factory.batch_gains.items()}
        if runtime.journal is not None and runtime.journal.set_aside:
            body["set_aside"] = len(runtime.journal.set_aside)  # unreadable at start
        if runtime.deferred:
            body["deferred"] = len(runtime.deferred)  # resumed when the queue has room
        if why:
            body["detail"] = why
        return JSONResponse(body, status_code=503 if status == "engine stopped" else 200)

    @app.get("/ready")
    def ready() -> JSONResponse:
        status, why = scheduler.health()
        return JSONResponse({"ready": status == "ok", "status": status, "detail": why},
                            status_code=200 if status == "ok" else 503)

    @app.get("/metrics")
    def metrics() -> PlainTextResponse:
        text, content_type = runtime.metrics_text()
        return PlainTextResponse(text, media_type=content_type)

    @app.get("/v1/models")
    def models() -> JSONResponse:
        return JSONResponse({"object": "list", "data": [
            {"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "specdec_lite"}]})

    @app.get("/v1/completions/{request_id}")
    def lookup(request_id: str) -> JSONResponse:
        job = scheduler.get(request_id) or runtime.finished_job(request_id)
        if job is None:
            return JSONResponse({"detail": f"no request with id {request_id!r}"}, 404)
        if not job.finished:
            return JSONResponse({"id": job.id, "status": job.status,
                                 "completion_tokens": len(job.tokens)}, status_code=202)
        return JSONResponse(response_body(job, tokenizer, int(time.time())))

    @app.delete("/v1/completions/{request_id}")
    def cancel(request_id: str) -> JSONResponse:
        job = scheduler.cancel(request_id, "cancelled by DELETE")
        if job is None:
            return JSONResponse({"detail": f"no live request with id {request_id!r}"}, 404)
        return JSONResponse({"id": job.id, "status": "cancelling",
                             "completion_tokens": len(job.tokens)}, status_code=202)

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request):
        try:
            prompt_ids = tokenizer.encode(body.prompt)
        except ValueError as exc:  # a character outside the model's alphabet
            return field_error("prompt", str(exc), body.prompt)
        if body.method not in runtime.methods:
            return field_error("method", f"this server runs methods {list(runtime.methods)}",
                               body.method)
        if body.policy != "fixed" and body.method in ("plain", "medusa"):
            return field_error("policy", f"method {body.method!r} takes only policy "
                               "'fixed'", body.policy)
        if body.policy in ("confidence", "specdec++") and body.method in ("lookup", "eagle"):
            return field_error("policy", f"policy {body.policy!r} needs a draft model (it "
                               f"reads the draft's probabilities); method {body.method!r} "
                               "has none", body.policy)
        k = 0 if body.method == "plain" else body.k
        # positions the verifier reads past the new tokens: the most drafts a step can have
        # and one more, or, for Medusa at T = 0, its default tree, as deep as it has heads
        lookahead = (max(k, HEURISTIC_K_MAX) if body.policy == "heuristic" else k) + 1
        if body.method == "medusa" and body.temperature == 0:
            lookahead = max(lookahead, runtime.n_heads)
        room = runtime.max_len - len(body.prompt) - lookahead
        if body.max_tokens > room:
            return field_error("max_tokens", f"prompt ({len(body.prompt)} tokens) plus "
                               f"max_tokens ({body.max_tokens}) and the verifier's lookahead "
                               f"({lookahead}) pass the model's {runtime.max_len}-token window; "
                               f"at most {max(room, 0)} new tokens fit", body.max_tokens)
        if body.method == "medusa" and body.k > runtime.n_heads:
            return field_error("k", f"medusa has {runtime.n_heads} heads, so k <= "
                               f"{runtime.n_heads}", body.k)
        try:
            stop = tuple(tuple(int(t) for t in tokenizer.encode(s)) for s in body.stop_strings())
        except ValueError as exc:
            return field_error("stop", str(exc), body.stop)
        job_id = body.request_id or f"cmpl-{secrets.token_hex(8)}"
        settings = Settings(method=body.method, k=k, max_new_tokens=body.max_tokens,
                            temperature=body.temperature,
                            top_p=None if body.top_p >= 1.0 else body.top_p,
                            seed=body.seed if body.seed is not None else secrets.randbits(63),
                            stop=stop, policy=body.policy)
        job = None
        if body.request_id is not None:  # an idempotency key: the same request, once
            job = scheduler.get(job_id) or await asyncio.to_thread(runtime.finished_job, job_id)
            if job is not None and not (
                    same_request(job.settings, settings, body.seed is not None)
                    and np.array_equal(job.prompt, prompt_ids)):
                return JSONResponse({"detail": f"request_id {job_id!r} was used for a "
                                     "different request (prompt or settings)"}, 409)
            if job is not None and job.status == "failed":
                # a request that failed (deadline, cancelled, engine error) runs again
                await asyncio.to_thread(scheduler.forget, job_id)
                job = None
        if job is None:
            job = Job(id=job_id, prompt=prompt_ids, settings=settings,
                      deadline=time.monotonic() + runtime.deadline_s)
            if not scheduler.alive:
                return JSONResponse({"detail": "the engine is not running"}, 503)
            try:
                job = await asyncio.to_thread(scheduler.submit, job)
            except QueueFull as full:
                runtime.metrics.rejected()
                return JSONResponse({"detail": str(full)}, status_code=429,
                                    headers={"Retry-After": str(full.retry_after_s)})
            except (RuntimeError, OSError):  # the journal could not record it
                runtime.metrics.error("journal")
                return JSONResponse({"detail": "the request could not be journaled, so it "
                                     "was not accepted; retry"}, status_code=503,
                                    headers={"Retry-After": "1"})
        created = int(time.time())
        client = ClientWait(job, request, scheduler)
        if body.stream:
            usage = body.stream_options is not None and body.stream_options.include_usage
            return StreamingResponse(stream_events(client, tokenizer, created, usage),
                                     media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        if not await client.wait_finished():
            return JSONResponse({"detail": "client disconnected"}, status_code=499)
        out = response_body(job, tokenizer, created)
        if job.status == "failed":
            return JSONResponse(out, status_code=failure_status(job))
        return JSONResponse(out)

    return app


class ClientWait:
    """One client waiting on ``job``: woken (from the engine thread) whenever the job makes
    progress, and watching its connection. A client that leaves stops listening, and if
    no other client listens to the job any more, the job is cancelled."""

    def __init__(self, job: Job, request: Request, scheduler: Scheduler) -> None:
        self.job, self.request, self.scheduler = job, request, scheduler
        self.event = asyncio.Event()
        self.gone = False
        loop = asyncio.get_running_loop()
        self._listener = lambda _job, _new: loop.call_soon_threadsafe(self.event.set)
        job.listeners.append(self._listener)
        if job.finished:  # it may have finished before the listener was in place
            self.event.set()
        self._watcher = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        while not self.job.finished:
            await asyncio.sleep(DISCONNECT_POLL_S)
            if await self.request.is_disconnected():
                self.close()
                return

    async def wait(self) -> None:
        """Until the job makes progress or finishes, or the client leaves."""
        await self.event.wait()
        self.event.clear()

    async def wait_finished(self) -> bool:
        """Until the job finishes (True) or the client leaves (False)."""
        try:
            while not self.job.finished and not self.gone:
                await self.wait()
            return not self.gone
        finally:
            self.close()

    def close(self) -> None:
        """Stop listening (idempotent); cancel the job if it is unfinished and nobody else
        listens to it."""
        if self.gone:
            return
        self.gone = True
        self.event.set()
        if asyncio.current_task() is not self._watcher:
            self._watcher.cancel()
        if self._listener in self.job.listeners:
            self.job.listeners.remove(self._listener)
        if not self.job.finished and not self.job.listeners:
            self.scheduler.cancel(self.job.id, "cancelled: the client disconnected")


async def stream_events(client: ClientWait, tokenizer, created: int, usage: bool = False):
    """Server-sent events: one per step with the new text, then the statistics (and, with
    ``usage``, OpenAI's usage-only chunk). However the stream ends (finished, the client
    gone, the server's send failing), the client stops listening, which cancels a request
    nobody else waits for."""
    try:
        async for event in _events(client.job, client, tokenizer, created, usage):
            yield event
    finally:
        client.close()


async def _events(job: Job, client: ClientWait, tokenizer, created: int, usage: bool):
    # the last tokens that could begin a stop sequence wait until the next step shows
    # whether one completes (the scheduler cuts the text before it)
    hold = max((len(s) for s in job.settings.stop), default=1) - 1
    sent = 0
    while not client.gone:
        finished = job.finished
        tokens = job.tokens[sent:] if finished else job.tokens[sent:len(job.tokens) - hold]
        if tokens:
            sent += len(tokens)
            chunk = {"id": job.id, "object": "text_completion", "created": created,
                     "model": MODEL_NAME, "choices": [{
                         "index": 0, "finish_reason": None,
                         "text": tokenizer.decode(np.asarray(tokens, dtype=np.intp))}]}
            yield f"data: {json.dumps(chunk)}\n\n"
        if finished and sent == len(job.tokens):
            last = response_body(job, tokenizer, created)
            last["choices"][0]["text"] = ""
            yield f"data: {json.dumps(last)}\n\n"
            if usage:
                yield "data: " + json.dumps({"id": job.id, "object": "text_completion",
                                             "created": created, "model": MODEL_NAME,
                                             "choices": [], "usage": last["usage"]}) + "\n\n"
            yield "data: [DONE]\n\n"
            return
        await client.wait()
