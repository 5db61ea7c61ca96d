"""A GPT on one sequence's cache: the model contract with the cache named, not implied.

``target.bound()`` (or ``target.bound(cache)``) is the GPT with ``cache=`` filled in for
every call that reads or writes a cache, so a decoder handed it never touches another
sequence's state nor the calling thread's default cache. The decoders of
:mod:`specdec_lite.engine.decode` and :mod:`specdec_lite.engine.medusa_decode` bind each
GPT they get to a fresh cache for the run; a caller that wants a warm start (the
benchmark prefills the prompt before it times a run) binds the model to a cache it filled
and passes that instead::

    cache = target.new_state()
    target.probs(prompt, cache=cache)            # the prompt's forward, outside the timing
    gen = generate(target.bound(cache), prompt, max_new_tokens=64, temperature=0.0)

Every other attribute (``config``, ``vocab_size``, ``backend``, the weights) is the
model's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .kv_cache import KVCache
    from .transformer import Output, TransformerModel


class BoundModel:
    """``model`` with ``cache`` passed to every cached method (see the module)."""

    def __init__(self, model: TransformerModel, cache: KVCache) -> None:
        self.model, self.cache = model, cache

    def __getattr__(self, name: str) -> object:  # config, vocab_size, weights, ...
        if name in ("model", "cache") or name.startswith("__"):  # unset while unpickling
            raise AttributeError(name)
        return getattr(self.model, name)

    def __repr__(self) -> str:
        return f"BoundModel({type(self.model).__name__}, {self.cache.length} cached entries)"

    def bound(self, cache: KVCache | None = None) -> BoundModel:
        """This view (no cache given, or its own), or the model on ``cache``."""
        return self if cache is None or cache is self.cache else self.model.bound(cache)

    def logits(self, tokens: Sequence[int] | np.ndarray) -> np.ndarray:
        return self.model.logits(tokens, cache=self.cache)

    def probs(self, tokens: Sequence[int] | np.ndarray) -> np.ndarray:
        return self.model.probs(tokens, cache=self.cache)

    def last_probs(self, tokens: Sequence[int] | np.ndarray, n_rows: int = 1,
                   temperature: float = 1.0) -> np.ndarray:
        return self.model.last_probs(tokens, n_rows, temperature, cache=self.cache)

    def greedy_block(self, tokens: Sequence[int] | np.ndarray, k: int) -> np.ndarray:
        return self.model.greedy_block(tokens, k, cache=self.cache)

    def hidden(self, tokens: Sequence[int] | np.ndarray, start: int = 0) -> np.ndarray:
        return self.model.hidden(tokens, start, cache=self.cache)

    def forward(self, tokens: Sequence[int] | np.ndarray, positions: np.ndarray | None = None,
                mask: np.ndarray | None = None) -> Output:
        return self.model.forward(tokens, positions, mask, cache=self.cache)

    @property
    def n_committed(self) -> int:
        return self.cache.n_causal

    def hidden_at(self, i: int) -> np.ndarray:
        return self.model.hidden_at(i, cache=self.cache)

    def rollback(self, length: int) -> None:
        self.model.rollback(length, cache=self.cache)

    def score_tree(self, tokens: Sequence[int] | np.ndarray, depth: np.ndarray,
                   mask: np.ndarray) -> Output:
        return self.model.score_tree(tokens, depth, mask, cache=self.cache)

    def commit_path(self, nodes: Sequence[int] | np.ndarray) -> None:
        self.model.commit_path(nodes, cache=self.cache)


def fresh(model: object) -> object:
    """``model`` on a cache of its own for one run: a GPT (anything with ``bound``) bound to
    a new cache, a view already bound (a :class:`BoundModel`) as it is, any other model
    (an n-gram, a table, the Hugging Face bridge) unchanged."""
    if isinstance(model, BoundModel):
        return model
    bind = getattr(model, "bound", None)
    return bind() if callable(bind) else model
