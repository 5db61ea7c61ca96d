"""The HTTP service: ``create_app(config)`` builds the FastAPI application.

Endpoints:

- ``POST /v1/completions``: an OpenAI-style completion (see :mod:`.schema`), answered whole
  or streamed as server-sent events (``"stream": true``), one event per engine step with the
  tokens that step accepted, then a last event with the statistics and ``data: [DONE]``.
- ``GET /v1/completions/{request_id}``: the result of an earlier request by its id, also
  after a restart (from the journal); 404 if unknown, 202 while it is still running.
- ``GET /metrics``: Prometheus text format. ``GET /health``: the engine thread's state.

Errors: 422 names the offending field (pydantic's ``loc``), 413 for a body over
``max_body_bytes``, 429 with ``Retry-After`` when the queue is full, 504 when a request's
deadline passes (it has the tokens generated so far), 503 when the engine is not running.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from .scheduler import Job, QueueFull, Scheduler, Settings
from .schema import CompletionRequest, CompletionResponse

MODEL_NAME = "specdec-lite-gpt"


@dataclass(frozen=True)
class ServiceConfig:
    """Everything a server needs to start; see ``python -m specdec_lite serve --help``."""

    data_dir: Path | None = None  # the journal lives here; None: no journal
    max_batch: int = 16
    max_queue: int = 64
    deadline_s: float = 60.0
    max_body_bytes: int = 16_384


def field_error(field: str, message: str, value: object = None) -> JSONResponse:
    """A 422 in FastAPI's own validation shape, naming ``field``."""
    detail = [{"type": "value_error", "loc": ["body", field], "msg": message, "input": value}]
    return JSONResponse({"detail": detail}, status_code=422)


def response_body(job: Job, tokenizer, created: int) -> dict:
    """The JSON body of a finished (or failed) job."""
    stats = job.stats
    n_checked = stats["n_checked"]
    calls = stats["n_target_calls"]
    reason = "error" if job.status == "failed" else "length"
    body = CompletionResponse(
        id=job.id, created=created, model=MODEL_NAME,
        choices=[dict(text=tokenizer.decode(np.asarray(job.tokens, dtype=np.intp)),
                      finish_reason=reason)],
        usage=dict(prompt_tokens=len(job.prompt), completion_tokens=len(job.tokens),
                   total_tokens=len(job.prompt) + len(job.tokens)),
        spec=dict(method=job.settings.method, k=job.settings.k,
                  alpha=stats["n_accepted"] / n_checked if n_checked else 0.0,
                  tau=len(job.tokens) / calls if calls else 0.0,
                  n_target_calls=calls, n_draft_calls=stats["n_draft_calls"],
                  n_head_calls=stats["n_head_calls"], n_fallbacks=stats["n_fallbacks"]),
    )
    out = body.model_dump()
    if job.error:
        out["error"] = job.error
    return out


def create_app(config: ServiceConfig, runtime) -> FastAPI:
    """The application over ``runtime`` (:class:`specdec_lite.service.runtime.Runtime`:
    tokenizer, scheduler, journal, metrics), which the app starts and stops with itself."""
    app = FastAPI(title="specdec_lite", version="1", lifespan=runtime.lifespan)
    scheduler: Scheduler = runtime.scheduler
    tokenizer = runtime.tokenizer

    @app.middleware("http")
    async def limit_body(request: Request, call_next):
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > config.max_body_bytes):
            return JSONResponse({"detail": f"request body over {config.max_body_bytes} bytes"},
                                status_code=413)
        return await call_next(request)

    @app.get("/health")
    def health() -> JSONResponse:
        waiting, running = scheduler.load()
        ok = scheduler.alive
        return JSONResponse({"status": "ok" if ok else "engine stopped", "waiting": waiting,
                             "running": running, "steps": scheduler.n_steps},
                            status_code=200 if ok else 503)

    @app.get("/metrics")
    def metrics() -> PlainTextResponse:
        text, content_type = runtime.metrics_text()
        return PlainTextResponse(text, media_type=content_type)

    @app.get("/v1/completions/{request_id}")
    def lookup(request_id: str) -> JSONResponse:
        job = scheduler.get(request_id) or runtime.finished_job(request_id)
        if job is None:
            return JSONResponse({"detail": f"no request with id {request_id!r}"}, 404)
        if not job.finished:
            return JSONResponse({"id": job.id, "status": job.status,
                                 "completion_tokens": len(job.tokens)}, status_code=202)
        return JSONResponse(response_body(job, tokenizer, int(time.time())))

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest):
        try:
            prompt_ids = tokenizer.encode(body.prompt)
        except ValueError as exc:  # a character outside the model's alphabet
            return field_error("prompt", str(exc), body.prompt)
        k = 0 if body.method == "plain" else body.k
        room = runtime.max_len - len(body.prompt) - k - 1
        if body.max_tokens > room:
            return field_error("max_tokens", f"prompt ({len(body.prompt)} tokens) plus "
                               f"max_tokens ({body.max_tokens}) and the draft's lookahead "
                               f"({k + 1}) pass the model's {runtime.max_len}-token window; "
                               f"at most {max(room, 0)} new tokens fit", body.max_tokens)
        if body.method == "medusa" and body.k > runtime.n_heads:
            return field_error("k", f"medusa has {runtime.n_heads} heads, so k <= "
                               f"{runtime.n_heads}", body.k)
        job_id = body.request_id or f"cmpl-{secrets.token_hex(8)}"
        earlier = runtime.finished_job(job_id)
        if earlier is not None:
            job = earlier
        else:
            settings = Settings(method=body.method, k=k, max_new_tokens=body.max_tokens,
                                temperature=body.temperature,
                                top_p=None if body.top_p >= 1.0 else body.top_p,
                                seed=body.seed if body.seed is not None else secrets.randbits(63))
            job = Job(id=job_id, prompt=prompt_ids, settings=settings,
                      deadline=time.monotonic() + config.deadline_s)
            if not scheduler.alive:
                return JSONResponse({"detail": "the engine is not running"}, 503)
            try:
                job = scheduler.submit(job)
            except QueueFull as full:
                runtime.metrics.rejected()
                return JSONResponse({"detail": str(full)}, status_code=429,
                                    headers={"Retry-After": str(full.retry_after_s)})
        created = int(time.time())
        if body.stream:
            return StreamingResponse(stream_events(job, tokenizer, created),
                                     media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        await wait_finished(job)
        out = response_body(job, tokenizer, created)
        if job.status == "failed":
            status = 504 if job.error and job.error.startswith("deadline") else 500
            return JSONResponse(out, status_code=status)
        return JSONResponse(out)

    return app


def _wake_on_progress(job: Job) -> asyncio.Event:
    """An asyncio event set (from the engine thread) whenever ``job`` makes progress."""
    loop = asyncio.get_running_loop()
    event = asyncio.Event()
    job.listeners.append(lambda _job, _new: loop.call_soon_threadsafe(event.set))
    if job.finished:  # it may have finished before the listener was in place
        event.set()
    return event


async def wait_finished(job: Job) -> None:
    event = _wake_on_progress(job)
    while not job.finished:
        await event.wait()
        event.clear()


async def stream_events(job: Job, tokenizer, created: int):
    """Server-sent events: one per step with the new text, then the statistics."""
    event = _wake_on_progress(job)
    sent = 0
    while True:
        finished = job.finished
        tokens = job.tokens[sent:]
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
            yield "data: [DONE]\n\n"
            return
        await event.wait()
        event.clear()
