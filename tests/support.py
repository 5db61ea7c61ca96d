"""Everything the tests share, in one module: paths, small random models, the statistical
helpers, fault injection, the service's reference results, the static server and the built
book. conftest.py puts tests/ on sys.path, so every test module, in whichever folder, does
``from support import ...``; no test module imports another.

The optional extras (httpx, prometheus_client) are imported inside the helpers that need
them, so that the model builders also import under ``make test-torch``'s .venv-train, which
has numpy, torch and pytest only.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from specdec_lite.drafting.medusa import MedusaHeads, chain_tree
from specdec_lite.drafting.proposers import PromptLookup
from specdec_lite.engine.decode import Generation, generate, speculative_generate
from specdec_lite.engine.medusa_decode import medusa_generate
from specdec_lite.models.corpus import fit_ngrams
from specdec_lite.models.transformer import TransformerConfig, TransformerModel
from specdec_lite.pretrained import (
    load_eagle,
    load_early_exit,
    load_pretrained,
    resolve_backend,
)
from specdec_lite.teaching.exactness import chi2_isf, chi_square, sequence_law, small_pair

# ---------------------------------------------------------------- paths

ROOT = Path(__file__).resolve().parents[1]  # the repository root
RESULTS = ROOT / "results"


# ---------------------------------------------------------------- random GPTs
# The numpy GPT with random weights (tests/unit/test_transformer.py and most model tests).

CONFIG = TransformerConfig(vocab_size=13, n_layer=2, n_head=4, d_model=32, max_len=40)


def random_params(config: TransformerConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """Random weights with the names and shapes ``TransformerModel`` expects."""
    rng = np.random.default_rng(seed)
    d, v = config.d_model, config.vocab_size
    shapes = {"wte": (v, d), "wpe": (config.max_len, d), "ln_f.g": (d,), "ln_f.b": (d,)}
    for i in range(config.n_layer):
        shapes |= {f"blocks.{i}.{name}": shape for name, shape in {
            "ln1.g": (d,), "ln1.b": (d,), "qkv.w": (d, 3 * d), "qkv.b": (3 * d,),
            "attn_proj.w": (d, d), "attn_proj.b": (d,), "ln2.g": (d,), "ln2.b": (d,),
            "fc.w": (d, 4 * d), "fc.b": (4 * d,), "mlp_proj.w": (4 * d, d), "mlp_proj.b": (d,),
        }.items()}
    params = {name: 0.3 * rng.standard_normal(shape) for name, shape in shapes.items()}
    for name in params:
        if name.endswith(".g"):
            params[name] += 1.0  # gains near 1, so folding them in is really exercised
    return params


def tokens(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, CONFIG.vocab_size, n)


# A tree of 6 nodes after a 5-token prefix:   0 -> 1 -> 3,  0 -> 2 -> 4 -> 5
PARENTS = [-1, 0, 0, 1, 2, 4]


def tree_mask(parents: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Ancestor-or-self mask [n, n] and depths [n] of a tree given by parent indices."""
    n = len(parents)
    mask, depth = np.eye(n, dtype=bool), np.zeros(n, dtype=np.int64)
    for node in range(n):
        parent = parents[node]
        if parent >= 0:
            mask[node] |= mask[parent]
            depth[node] = depth[parent] + 1
    return mask, depth


def path_to(node: int) -> list[int]:
    path = [node]
    while PARENTS[path[-1]] >= 0:
        path.append(PARENTS[path[-1]])
    return path[::-1]


# ---------------------------------------------------------------- Medusa targets and heads
# tests/unit/test_medusa.py's models (its CONFIG, here MEDUSA_CONFIG: a longer context), and
# TINY (V = 3) for the chi-square tests of the exact chain rule.

MEDUSA_CONFIG = TransformerConfig(vocab_size=13, n_layer=2, n_head=4, d_model=32, max_len=64)
TINY = TransformerConfig(vocab_size=3, n_layer=1, n_head=2, d_model=8, max_len=16)


def target_model(config: TransformerConfig = MEDUSA_CONFIG, seed: int = 0, scale: float = 1.0):
    params = random_params(config, seed)
    params["wte"] = params["wte"] * scale  # sharper or flatter output distributions
    return TransformerModel(config, params)


def random_heads(config: TransformerConfig, n_heads: int = 3, seed: int = 5) -> MedusaHeads:
    rng = np.random.default_rng(seed)
    d, v = config.d_model, config.vocab_size
    return MedusaHeads(
        0.2 * rng.standard_normal((n_heads, d, d)),
        0.1 * rng.standard_normal((n_heads, d)),
        rng.standard_normal((n_heads, d, v)),
    )


# ---------------------------------------------------------------- statistics
# The statistical tests' helpers, as the older tests call them; the work is done by
# :mod:`specdec_lite.teaching.exactness`, which the newer tests import directly.


def enumerate_sequences(model, prompt: list[int], length: int, temperature: float) -> dict:
    """P(x_1..x_length | prompt) under ``model`` at ``temperature``, for every sequence of
    positive probability (see :func:`specdec_lite.teaching.exactness.sequence_law`)."""
    return sequence_law(model, prompt, length, temperature)


def speculative_samples(target, draft, prompt, *, k, length: int, n: int,
                        temperature: float = 1.0, seed: int = 2024, **kwargs) -> list[tuple]:
    """``n`` speculative continuations of ``prompt``, ``length`` tokens each, all drawn from
    one Generator seeded with ``seed`` (``kwargs`` go to ``speculative_generate``)."""
    rng = np.random.default_rng(seed)
    return [tuple(speculative_generate(target, draft, prompt, k=k, max_new_tokens=length,
                                       temperature=temperature, seed=rng,
                                       **kwargs).tokens.tolist())
            for _ in range(n)]


def imports_module(statement: str, module: str) -> bool:
    """Whether running ``statement`` in a fresh interpreter leaves ``module`` imported."""
    import subprocess
    import sys

    code = f"import sys; {statement}; print({module!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return out.stdout.strip() == "True"


def chi2_critical(df: int, upper_tail: float = 1e-3) -> float:
    """The chi-square value exceeded with probability ``upper_tail`` at ``df``."""
    return chi2_isf(upper_tail, df)


def chi2_statistic(
    samples: list[tuple], expected: dict, min_expected: float = 5.0
) -> tuple[float, int]:
    """Pearson's chi-square of ``samples`` against ``expected`` and its degrees of freedom
    (see :func:`specdec_lite.teaching.exactness.chi_square`); fails on any impossible sample."""
    result = chi_square(samples, expected, min_expected)
    assert result.n_impossible == 0, f"sampled sequences with zero probability: {result}"
    return result.statistic, result.df


# ---------------------------------------------------------------- fault injection
# For tests/unit/test_faults.py: models that hang, factories that fail. They live in a
# module, not in a test file, so that a worker process (``ProcessVerifier``, which starts
# workers with ``spawn``) can import them by name (the worker inherits sys.path, tests/ on it).


class HangingModel:
    """``model`` whose ``n``-th forward pass (1-based, counted per object) blocks until
    ``release`` is set (or for an hour without one), for each ``n`` in ``hang_on``."""

    def __init__(self, model, hang_on, release: threading.Event | None = None) -> None:
        self.model, self.hang_on, self.release = model, set(hang_on), release
        self.vocab_size = model.vocab_size
        self.calls = 0

    def probs(self, tokens: np.ndarray) -> np.ndarray:
        self.calls += 1
        if self.calls in self.hang_on:
            if self.release is None:
                time.sleep(3600)
            else:
                self.release.wait(3600)
        return self.model.probs(tokens)


def small_target():
    """The small pair's target (V = 3), built in a worker."""
    return small_pair()[0]


def hanging_small_target():
    """The small target, hanging on its first call in each worker."""
    return HangingModel(small_pair()[0], hang_on={1})


def broken_factory():
    raise OSError("weights missing (injected)")


class TimeLimitExceeded(Exception):
    """A test ran past its time limit."""


def alarm_after(seconds: int):
    """Make SIGALRM raise :class:`TimeLimitExceeded` in ``seconds``; returns the undo function.
    (Every test of the fault, telemetry and journal files is bounded this way.)"""
    import signal

    def on_alarm(signum, frame):
        raise TimeLimitExceeded(f"test ran past its {seconds} s limit")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)

    def undo() -> None:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)

    return undo


# ---------------------------------------------------------------- the service's reference
# Shared by the service tests (tests/integration/test_service*.py): the library's result for
# a request body, and /metrics.
#
# :func:`reference` decodes a request body in-process with the library function the
# service's engine for that ``method`` stands for (see ``specdec_lite/service/engines.py``):
# ``plain`` is :func:`~specdec_lite.engine.decode.generate`; ``draft``, ``ngram``,
# ``lookup``, ``eagle`` and ``early-exit`` are
# :func:`~specdec_lite.engine.decode.speculative_generate` with the distilled GPT, the corpus
# 3-gram, prompt lookup, the EAGLE drafter or the early-exit draft as q;
# ``medusa`` is :func:`~specdec_lite.engine.medusa_decode.medusa_generate` (its default tree
# at T = 0, a chain of k heads with the exact rule otherwise). A seeded
# request must give exactly these tokens and these statistics.

PROMPTS = ["def __init__(self", "import os\n", "    return ", "class Foo(object):\n    ",
           "for i in range(", "if __name__ == "]


@dataclass
class Models:
    tokenizer: object
    target: object
    draft: object
    ngram_draft: object
    heads: object
    early_exit: object
    eagle: object


def load_models(backend: str = "auto") -> Models:
    """The shipped models on ``backend``; ``"auto"`` is what a server started without
    ``--backend`` runs (the compiled forward where numba is installed), so references
    computed here take the server's own arithmetic."""
    backend = resolve_backend(backend)
    shipped = load_pretrained(backend=backend)
    _, _, ngram_draft = fit_ngrams()
    return Models(shipped.tokenizer, shipped.target, shipped.draft, ngram_draft, shipped.heads,
                  load_early_exit(backend=backend), load_eagle(shipped.target))


def reference(models: Models, body: dict) -> Generation:
    """What the library gives for the request ``body`` (API defaults filled in)."""
    prompt = models.tokenizer.encode(body["prompt"])
    method, k = body.get("method", "draft"), body.get("k", 4)
    n, t, seed = body.get("max_tokens", 32), body.get("temperature", 1.0), body["seed"]
    top_p = body.get("top_p", 1.0)
    top_p = None if top_p >= 1.0 or t == 0 else top_p
    if method == "plain":
        return generate(models.target, prompt, max_new_tokens=n, temperature=t, seed=seed,
                        top_p=top_p)
    if method == "medusa":
        return medusa_generate(models.target, models.heads, prompt, max_new_tokens=n,
                               temperature=t, tree=None if t == 0 else chain_tree(k),
                               rule="greedy" if t == 0 else "exact",
                               seed=np.random.default_rng(seed), top_p=top_p)
    draft = {"draft": models.draft, "ngram": models.ngram_draft,
             "lookup": PromptLookup(), "eagle": models.eagle,
             "early-exit": models.early_exit}[method]
    return speculative_generate(models.target, draft, prompt, k=k, max_new_tokens=n,
                                temperature=t, seed=seed, top_p=top_p,
                                policy=body.get("policy", "fixed"))


def reference_text(models: Models, body: dict) -> str:
    return models.tokenizer.decode(reference(models, body).tokens)


def expected_spec(gen: Generation) -> dict:
    """The ``spec`` fields of a response, as the library's trace gives them."""
    return dict(alpha=gen.alpha, tau=gen.tau, n_target_calls=gen.n_target_calls,
                n_draft_calls=gen.n_draft_calls, n_head_calls=gen.n_head_calls)


def spec_of(response: dict) -> dict:
    spec = response["spec"]
    return {name: spec[name] for name in ("alpha", "tau", "n_target_calls", "n_draft_calls",
                                          "n_head_calls")}


def parse_metrics(text: str) -> dict[tuple, float]:
    """Prometheus text parsed back: {(sample name, sorted label pairs): value}."""
    from prometheus_client.parser import text_string_to_metric_families  # the serve extra

    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def scrape(url: str) -> dict[tuple, float]:
    import httpx  # the serve extra

    reply = httpx.get(url + "/metrics", timeout=10)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain")
    return parse_metrics(reply.text)


def metric(samples: dict[tuple, float], name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


# ---------------------------------------------------------------- a static file server
# For the browser tests: one folder on a free port of 127.0.0.1, in a daemon thread, quiet
# (no line per request).


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files with the types a JupyterLite site needs, and logs nothing."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".mjs": "text/javascript",
                      ".js": "text/javascript", ".json": "application/json"}

    def log_message(self, *args):  # keep pytest's output readable
        pass


@contextlib.contextmanager
def serve(directory: str | Path) -> Iterator[str]:
    """Serve ``directory`` until the block ends; yields the base URL."""
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------- the built book
# For the tests of what readers get (tests/book/test_offline_html.py and
# tests/book/test_live_button.py).
#
# Under plain pytest a missing build skips those tests, so the edit-run loop needs no book.
# `make test-book` sets REQUIRE_BUILT_BOOK=1, which turns every such skip into a failure: CI
# builds the book first, and a test of the pages that could not run must not pass quietly.

BOOK = ROOT / "_build" / "html"
STUDENT = ROOT / "_build" / "student" / "_build" / "html"
LITE = ROOT / "_build" / "lite"


def required() -> bool:
    return os.environ.get("REQUIRE_BUILT_BOOK", "") not in ("", "0")


def missing_build(why: str) -> None:
    """Skip the calling test with ``why``, or fail it under REQUIRE_BUILT_BOOK=1."""
    if required():
        pytest.fail(f"REQUIRE_BUILT_BOOK: {why}")
    pytest.skip(why)


def need_dirs(*dirs: Path, hint: str) -> None:
    """Skip (or fail, see :func:`missing_build`) unless every one of ``dirs`` exists."""
    absent = [str(d.relative_to(ROOT)) for d in dirs if not d.is_dir()]
    if absent:
        missing_build(f"{', '.join(absent)} not built ({hint})")
