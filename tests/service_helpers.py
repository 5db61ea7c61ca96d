"""Shared by the service tests: the library's result for a request body, and /metrics.

:func:`reference` decodes a request body in-process with the library function the
service's engine for that ``method`` stands for (see ``specdec_lite/service/engines.py``):
``plain`` is :func:`~specdec_lite.decode.generate`, ``draft`` and ``ngram`` are
:func:`~specdec_lite.decode.speculative_generate` with the distilled GPT or the corpus
3-gram as q, ``medusa`` is :func:`~specdec_lite.medusa.medusa_generate` (its default tree
at T = 0, a chain of k heads with the exact rule otherwise). A seeded request must give
exactly these tokens and these statistics.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from specdec_lite.corpus import fit_ngrams
from specdec_lite.decode import Generation, generate, speculative_generate
from specdec_lite.medusa import chain_tree, medusa_generate
from specdec_lite.pretrained import load_pretrained

PROMPTS = ["def __init__(self", "import os\n", "    return ", "class Foo(object):\n    ",
           "for i in range(", "if __name__ == "]


@dataclass
class Models:
    tokenizer: object
    target: object
    draft: object
    ngram_draft: object
    heads: object


def load_models() -> Models:
    shipped = load_pretrained()
    _, _, ngram_draft = fit_ngrams()
    return Models(shipped.tokenizer, shipped.target, shipped.draft, ngram_draft, shipped.heads)


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
    draft = models.draft if method == "draft" else models.ngram_draft
    return speculative_generate(models.target, draft, prompt, k=k, max_new_tokens=n,
                                temperature=t, seed=seed, top_p=top_p)


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
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def scrape(url: str) -> dict[tuple, float]:
    reply = httpx.get(url + "/metrics", timeout=10)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain")
    return parse_metrics(reply.text)


def metric(samples: dict[tuple, float], name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]
