"""What a benchmark runs: the settings, the decoding methods and the order of the runs.

Methods (the rule follows the temperature: greedy verification at T = 0, the exact
rule at T > 0):

* ``autoregressive``: :func:`specdec_lite.generate`, the baseline at each temperature;
* ``speculative``: :func:`specdec_lite.speculative_generate` with the draft GPT, per k;
* ``ngram``: the same with a Witten–Bell character n-gram of the training split as the
  draft (order ``NGRAM_ORDER``), which drafts through ``NGramModel.last_probs``: a draft
  that costs almost nothing next to the target, at a somewhat different α;
* ``medusa``: :func:`specdec_lite.medusa_generate`; at T = 0 greedy over sparse trees of
  a few sizes, built from the heads' top-k accuracies measured on held-out text (a part
  of the held-out split that the prompts do not come from); at T > 0 the exact chain.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

import numpy as np

from ..pretrained import BACKEND_CHOICES, resolve_backend  # noqa: F401 (re-exported)

NGRAM_ORDER = 8  # the n-gram draft conditions on the last 7 characters


@dataclass(frozen=True)
class Settings:
    """What to run. ``trees`` are Medusa sparse-tree sizes (nodes, root excluded)."""

    ks: tuple[int, ...] = (1, 2, 3, 4, 6, 8)
    trees: tuple[int, ...] = (4, 8, 16)
    temperatures: tuple[float, ...] = (0.0, 1.0)
    prompts: int = 10
    prompt_len: int = 96
    new_tokens: int = 128
    repeats: int = 3
    seed: int = 0
    simulate_width: int | None = None
    cost_repeats: int = 30
    quick: bool = False
    backend: str = "auto"  # the GPTs' forward: "numpy", "numba" or "auto" (see resolve_backend)

    def as_json(self) -> dict:
        """The settings as they appear in a JSON result (lists for tuples)."""
        return json.loads(json.dumps(asdict(self)))

    def check(self) -> Settings:
        """Raise ``ValueError`` naming the first bad setting; return ``self``."""
        if not self.ks or min(self.ks) < 1:
            raise ValueError(f"k values must be >= 1, got {list(self.ks)}")
        if min(self.trees, default=1) < 1:
            raise ValueError(f"Medusa tree sizes must be >= 1, got {list(self.trees)}")
        if not self.temperatures or any(not t >= 0 or math.isinf(t) for t in self.temperatures):
            raise ValueError(f"temperatures must be finite and >= 0, got {self.temperatures}")
        for name in ("prompts", "prompt_len", "new_tokens", "repeats", "cost_repeats"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.simulate_width is not None and self.simulate_width < 1:
            raise ValueError(f"simulate_width must be >= 1, got {self.simulate_width}")
        resolve_backend(self.backend)
        return self


QUICK = Settings(ks=(2, 4), trees=(8,), prompts=2, prompt_len=64, new_tokens=48, repeats=2,
                 cost_repeats=10, quick=True)


@dataclass(frozen=True)
class Method:
    """One decoding configuration; the rule follows the temperature."""

    kind: str  # "autoregressive" | "speculative" | "ngram" | "medusa"
    temperature: float
    k: int | None = None  # draft tokens (speculative) or chain depth (Medusa exact)
    tree_nodes: int | None = None  # Medusa greedy: sparse-tree size, root excluded

    @property
    def rule(self) -> str:
        return "greedy" if self.temperature == 0 else "exact"

    @property
    def label(self) -> str:
        t = f"T={self.temperature:g}"
        if self.kind == "speculative":
            return f"speculative k={self.k} {self.rule} {t}"
        if self.kind == "ngram":
            return f"n-gram draft k={self.k} {self.rule} {t}"
        if self.kind == "medusa":
            size = f"tree {self.tree_nodes}" if self.tree_nodes else f"chain {self.k}"
            return f"medusa {size} {self.rule} {t}"
        return f"autoregressive {t}"


def build_methods(settings: Settings, n_heads: int | None,
                  ngram: bool = False) -> list[Method]:
    """Per temperature: AR, speculative per k (and with the n-gram draft per k if
    ``ngram``), Medusa (trees at T = 0, the chain above)."""
    methods = []
    for t in settings.temperatures:
        methods.append(Method("autoregressive", t))
        methods += [Method("speculative", t, k=k) for k in settings.ks]
        if ngram:
            methods += [Method("ngram", t, k=k) for k in settings.ks]
        if n_heads and t == 0:
            methods += [Method("medusa", t, tree_nodes=n) for n in settings.trees]
        elif n_heads:
            methods.append(Method("medusa", t, k=n_heads))
    return methods


def choose_prompts(text: str, n: int, length: int, seed: int) -> list[str]:
    """``n`` distinct slices ``text[s : s + length]``, s the start of a non-blank line."""
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    starts = [s for s in starts if s + length <= len(text) and text[s : s + 1].strip()]
    if len(starts) < n:
        raise ValueError(f"prompts: the text has only {len(starts)} usable line starts")
    chosen = np.sort(np.random.default_rng(seed).choice(starts, size=n, replace=False))
    return [text[s : s + length] for s in chosen]


def schedule(n_methods: int, n_prompts: int, repeats: int,
             seed: int) -> list[tuple[int, int, int]]:
    """(repeat, prompt, method) triples: for each repeat and prompt, every method once, in
    an order shuffled by ``np.random.default_rng(seed)``, so that the drift of a noisy
    machine hits every method alike."""
    rng = np.random.default_rng(seed)
    return [(r, p, int(m)) for r in range(repeats) for p in range(n_prompts)
            for m in rng.permutation(n_methods)]
