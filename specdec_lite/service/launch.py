"""Start and stop a real server process on the loopback interface.

Tests, the load test and the chapter use these to run ``python -m specdec_lite serve`` as
a separate process (so ``kill -9`` is real) on a free 127.0.0.1 port. Every wait here is
bounded in time.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@dataclass
class Server:
    """A server process and its base URL."""

    process: subprocess.Popen
    url: str
    log_path: Path | None

    def kill(self) -> None:
        """``kill -9``: no shutdown handler runs."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), then SIGKILL if it has not exited in 10 s."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_server(*, data_dir: str | Path | None = None, port: int | None = None,
                 max_batch: int = 16, max_queue: int = 64, deadline_s: float = 60.0,
                 log_path: str | Path | None = None, timeout_s: float = 60.0,
                 extra_args: tuple[str, ...] = ()) -> Server:
    """Run ``python -m specdec_lite serve`` on 127.0.0.1 and wait until ``/health`` is ok.

    Raises ``RuntimeError`` with the end of the server's log if it exits or is not healthy
    within ``timeout_s``.
    """
    port = port or free_port()
    args = [sys.executable, "-m", "specdec_lite", "serve", "--host", HOST, "--port", str(port),
            "--max-batch", str(max_batch), "--max-queue", str(max_queue),
            "--deadline", str(deadline_s)]
    args += ["--data-dir", str(data_dir)] if data_dir is not None else ["--no-journal"]
    args += list(extra_args)
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
    if log_path:
        log.close()
    server = Server(process, f"http://{HOST}:{port}", Path(log_path) if log_path else None)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            if httpx.get(server.url + "/health", timeout=1.0).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    server.kill()
    tail = server.log_path.read_text()[-2000:] if server.log_path else ""
    raise RuntimeError(f"server on port {port} did not become healthy in {timeout_s} s "
                       f"(exit code {process.poll()}). Log tail:\n{tail}")
