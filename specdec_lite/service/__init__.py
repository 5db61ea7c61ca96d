"""A small speculative-decoding service: ``python -m specdec_lite serve``.

FastAPI and uvicorn (the ``serve`` extra) in front of a continuously batched engine
(:mod:`specdec_lite.engine.batch`), with a bounded queue, per-request deadlines, Prometheus
metrics, JSON logs and a crash-safe SQLite journal. Modules: :mod:`.schema` (the API's
bodies), :mod:`.scheduler` (queue and engine thread), :mod:`.engines` (the models and
engines), :mod:`.persist` (journal), :mod:`.stats` (metrics), :mod:`.app` (HTTP),
:mod:`.server` (command line), :mod:`.launch` and :mod:`.loadtest` (running and loading
a real server process on 127.0.0.1).
"""
