"""A bounded load test of a running server: many concurrent clients, nothing lost.

:func:`run_load` sends ``n_requests`` completion requests from ``concurrency`` clients
and stops by itself after ``time_limit_s``. A 429 is retried after its ``Retry-After``
(the client's job is to come back, not to give up); every other answer is recorded. The
result counts outcomes (a request is *lost* if it got neither a complete answer nor a clear
error) and reports throughput and latency percentiles.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import httpx
import numpy as np


@dataclass
class LoadResult:
    """What one load run measured. Latency is from first send to the full answer."""

    n_requests: int
    concurrency: int
    wall_s: float
    latencies_s: list[float] = field(default_factory=list)
    completion_tokens: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    n_retries_429: int = 0
    texts: dict[str, str] = field(default_factory=dict)

    @property
    def n_complete(self) -> int:
        return self.outcomes.get("200", 0)

    @property
    def n_lost(self) -> int:
        """Requests with no answer at all (timeouts of the load test, broken connections)."""
        return self.n_requests - sum(self.outcomes.values())

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.latencies_s, q)) if self.latencies_s else float("nan")

    def summary(self) -> dict:
        return dict(n_requests=self.n_requests, concurrency=self.concurrency,
                    wall_s=round(self.wall_s, 3), n_complete=self.n_complete,
                    n_lost=self.n_lost, outcomes=dict(sorted(self.outcomes.items())),
                    n_retries_429=self.n_retries_429,
                    tokens_per_s=round(self.completion_tokens / self.wall_s, 1),
                    requests_per_s=round(self.n_complete / self.wall_s, 2),
                    p50_s=round(self.percentile(50), 3), p99_s=round(self.percentile(99), 3))


def make_requests(prompts: list[str], n: int, *, method: str, max_tokens: int,
                  temperature: float = 0.0, k: int = 4, seed: int = 0,
                  id_prefix: str = "load") -> list[dict]:
    """``n`` request bodies cycling through ``prompts``, each with its own seed and id."""
    return [dict(prompt=prompts[i % len(prompts)], max_tokens=max_tokens, method=method,
                 temperature=temperature, k=k, seed=seed + i, request_id=f"{id_prefix}-{i}")
            for i in range(n)]


async def _send(client: httpx.AsyncClient, url: str, body: dict, stop_at: float,
                result: LoadResult) -> None:
    start = time.perf_counter()
    while True:
        remaining = stop_at - time.monotonic()
        if remaining <= 0:
            return  # counted as lost: the load test ran out of time
        try:
            reply = await client.post(url + "/v1/completions", json=body, timeout=remaining)
        except httpx.TransportError:
            return
        if reply.status_code == 429:
            result.n_retries_429 += 1
            wait = float(reply.headers.get("Retry-After", "1"))
            await asyncio.sleep(min(wait, max(stop_at - time.monotonic(), 0)) / 4)
            continue
        break
    key = str(reply.status_code)
    result.outcomes[key] = result.outcomes.get(key, 0) + 1
    if reply.status_code == 200:
        data = reply.json()
        result.latencies_s.append(time.perf_counter() - start)
        result.completion_tokens += data["usage"]["completion_tokens"]
        result.texts[body["request_id"]] = data["choices"][0]["text"]


async def _run(url: str, bodies: list[dict], concurrency: int, time_limit_s: float
               ) -> LoadResult:
    result = LoadResult(n_requests=len(bodies), concurrency=concurrency, wall_s=0.0)
    queue: asyncio.Queue[dict] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    stop_at = time.monotonic() + time_limit_s
    limits = httpx.Limits(max_connections=concurrency)

    async def client_loop(client: httpx.AsyncClient) -> None:
        while not queue.empty() and time.monotonic() < stop_at:
            await _send(client, url, queue.get_nowait(), stop_at, result)

    start = time.perf_counter()
    async with httpx.AsyncClient(limits=limits) as client:
        await asyncio.gather(*(client_loop(client) for _ in range(concurrency)))
    result.wall_s = time.perf_counter() - start
    return result


def run_load(url: str, bodies: list[dict], *, concurrency: int = 16,
             time_limit_s: float = 60.0) -> LoadResult:
    """Send ``bodies`` to the server at ``url`` from ``concurrency`` clients; bounded by
    ``time_limit_s`` in total."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if time_limit_s <= 0:
        raise ValueError(f"time_limit_s must be > 0, got {time_limit_s}")
    return asyncio.run(_run(url, bodies, concurrency, time_limit_s))
