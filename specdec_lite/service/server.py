"""``python -m specdec_lite serve``: run the HTTP service with uvicorn.

The journal is on by default, in ``--data-dir`` (``./specdec_data``): a server killed with
``kill -9`` and started again on the same directory finishes every request it had
accepted. ``--no-journal`` turns it off. One server owns a data directory at a time (a
second one exits, naming it), and what it writes there is readable by its user only.

By default the server answers only Host headers naming this machine (``--allowed-hosts``),
needs no key (``--api-key`` or ``SPECDEC_API_KEY`` sets one for ``/v1/*``), serves no
``/docs`` (``--docs``), holds at most ``--max-concurrency`` connections, and a SIGTERM
waits up to ``--shutdown-timeout`` seconds for requests in flight. Bad arguments print one
line and exit 2, before any model is loaded.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

DEFAULT_DATA_DIR = "specdec_data"


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _bounded(low: float, high: float, kind=int):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {low} to {high}, got {text}")
        return value
    return parse


def _spec_max_batch(text: str) -> int | str:
    """``--spec-max-batch``: ``auto``, or a whole number from 0 to 256."""
    return "auto" if text == "auto" else _bounded(0, 256)(text)


def parser(prog: str = "specdec_lite serve") -> argparse.ArgumentParser:
    from ..pretrained import BACKEND_CHOICES
    from .engines import VERIFIERS

    p = _OneLineParser(prog=prog, description="Serve OpenAI-style completions with "
                       "speculative decoding of the shipped models (FastAPI + uvicorn).")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to bind (default 127.0.0.1, this machine only)")
    p.add_argument("--port", type=_bounded(1, 65535), default=8000)
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                   help=f"directory of the crash-safe journal (default ./{DEFAULT_DATA_DIR})")
    p.add_argument("--no-journal", action="store_true", help="keep no journal")
    p.add_argument("--max-batch", type=_bounded(1, 256), default=16,
                   help="sequences decoded together (1 turns batching off)")
    p.add_argument("--spec-max-batch", type=_spec_max_batch, default=0,
                   help="decode plainly while more than this many sequences share an engine "
                        "step (a full batch gains little from speculation; chapter 7); "
                        "auto: the size up to which speculation was faster here, measured "
                        "at start in a few seconds (/health shows it); default 0: always "
                        "speculate")
    p.add_argument("--backend", choices=BACKEND_CHOICES, default="auto",
                   help="the GPTs' forward: numpy (the reference), numba (the compiled fast "
                   "extra) or auto, numba where installed (default); /health names it")
    p.add_argument("--verifier", choices=VERIFIERS, default="inprocess",
                   help="where the batched engines' target forward runs: in this process "
                   "(default), or in a worker process whose crash or hang costs a plain "
                   "step instead of the server; /health names it")
    p.add_argument("--verify-timeout", type=_bounded(0.01, 3600.0, float), default=None,
                   help="seconds a step's target forward may take before the step is "
                   "decoded plainly (with --verifier process; default: no limit)")
    p.add_argument("--max-queue", type=_bounded(1, 100_000), default=64,
                   help="jobs held (running + waiting) before answering 429")
    p.add_argument("--deadline", type=_bounded(0.1, 3600.0, float), default=60.0,
                   help="seconds a request may take before it fails with 504")
    p.add_argument("--journal-sync", choices=("NORMAL", "FULL"), default="NORMAL",
                   help="SQLite's synchronous mode for the journal: NORMAL (default) keeps "
                        "every request through a crash of the server; FULL also through a "
                        "power loss, at a cost per step")
    p.add_argument("--retention-hours", type=_bounded(0.0, 1e6, float), default=168.0,
                   help="drop ended requests from the journal after this many hours "
                        "(default 168, a week; 0 keeps them for ever), at start and hourly")
    p.add_argument("--retention-rows", type=_bounded(0, 10**9), default=100_000,
                   help="keep at most this many ended requests in the journal, the newest "
                        "(default 100000; 0 keeps all)")
    p.add_argument("--api-key", default=os.environ.get("SPECDEC_API_KEY"),
                   help="require 'Authorization: Bearer KEY' on /v1/* (default: the "
                        "SPECDEC_API_KEY environment variable; none: no key)")
    p.add_argument("--allowed-hosts", default="127.0.0.1,localhost,[::1]",
                   help="comma-separated Host header values to answer, others get 400 "
                        "(default: this machine's names; '*' for any)")
    p.add_argument("--max-concurrency", type=_bounded(1, 100_000), default=256,
                   help="open connections, each request in flight holding one, before a new one "
                   "gets 503 (default 256)")
    p.add_argument("--shutdown-timeout", type=_bounded(0.0, 3600.0, float), default=30.0,
                   help="seconds a SIGTERM waits for requests in flight (default 30)")
    p.add_argument("--docs", action="store_true", help="serve /docs and /openapi.json")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                   default="warning")
    return p


def check_data_dir(path: str) -> Path:
    """The journal directory, created if missing (readable by this user only, 0700); one
    clear error if it is unusable."""
    data_dir = Path(path)
    if data_dir.exists() and not data_dir.is_dir():
        raise ValueError(f"--data-dir {path} exists and is not a directory")
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not os.access(data_dir, os.W_OK):
        raise ValueError(f"--data-dir {path} is not writable")
    return data_dir


def configure_logging(level: str) -> None:
    """JSON lines on stderr for the service's own events (``--log-level info`` shows one
    per step and per request, with the request id)."""
    import logging

    from ..engine.telemetry import JsonLinesFormatter

    handler = logging.StreamHandler()
    handler.setFormatter(JsonLinesFormatter())
    logger = logging.getLogger("specdec_lite.service")
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    from ..pretrained import resolve_backend

    args = parser().parse_args(argv)
    # the journal holds prompts and outputs: every file the server makes is its user's only
    os.umask(0o077)
    try:
        resolve_backend(args.backend)  # numba asked for but not installed: fail now
        data_dir = None if args.no_journal else check_data_dir(args.data_dir)
    except (ValueError, OSError) as exc:
        print(f"specdec_lite serve: error: {exc}", file=sys.stderr)
        return 2
    try:
        import uvicorn

        from .app import ServiceConfig, create_app
        from .engines import EngineFactory
        from .runtime import Runtime
    except ImportError as exc:
        print(f"specdec_lite serve: error: {exc.name} is not installed; install the serve "
              "extra: pip install 'specdec_lite[serve]'", file=sys.stderr)
        return 2
    hosts = tuple(h.strip() for h in args.allowed_hosts.split(",") if h.strip())
    if args.host not in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::") \
            and hosts != ("*",):
        hosts += (args.host,)
    config = ServiceConfig(api_key=args.api_key or None, allowed_hosts=hosts or ("*",),
                           docs=args.docs)
    try:
        factory = EngineFactory.shipped(args.backend,
                                        spec_max_batch=args.spec_max_batch or None,
                                        max_batch=args.max_batch,
                                        verifier=args.verifier,
                                        verify_timeout=args.verify_timeout)
        runtime = Runtime(data_dir=data_dir, max_batch=args.max_batch, factory=factory,
                          max_queue=args.max_queue, deadline_s=args.deadline,
                          journal_sync=args.journal_sync,
                          retention_s=args.retention_hours * 3600 or None,
                          retention_rows=args.retention_rows or None)
    except ValueError as exc:  # e.g. a corrupt or foreign journal file
        print(f"specdec_lite serve: error: {exc}", file=sys.stderr)
        return 2
    configure_logging(args.log_level)
    app = create_app(config, runtime)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level,
                access_log=False,
                # uvicorn refuses the connection that would bring its count *to* the limit
                limit_concurrency=args.max_concurrency + 1,
                timeout_graceful_shutdown=args.shutdown_timeout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
