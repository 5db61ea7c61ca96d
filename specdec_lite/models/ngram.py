"""The model contract, the function that checks what a model returns, and small exact models.

A *model* is any object with ``vocab_size: int`` and ``probs(tokens)`` returning an array
``[len(tokens), vocab_size]`` whose row i is the next-token distribution after
``tokens[: i + 1]`` (:class:`Model`). One ``probs`` call is one forward pass. A model may
also offer the fast path ``last_probs(tokens, n_rows, temperature)`` (:class:`FastModel`);
the decoders use it when it is there and read every model through :func:`model_rows`.
"""

from __future__ import annotations

import time
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from ..checks import check_int, check_positive, check_probs, check_tokens
from ..rules.distributions import apply_temperature


@runtime_checkable
class Model(Protocol):
    """The model contract every decoder in the library accepts.

    * ``vocab_size``: V, the number of token ids; ids are 0 .. V-1.
    * ``probs(tokens)``: ``tokens`` is a 1-D int array [n] (n >= 1); returns [n, V]
      non-negative rows summing to 1, row i the distribution of the token after
      ``tokens[: i + 1]``. Row i must not depend on ``tokens[i + 1 :]``.

    The decoders check each returned array (shape, finiteness, row sums) with
    :func:`model_rows` and raise a ``ValueError`` naming the model if it is wrong.
    """

    vocab_size: int

    def probs(self, tokens: np.ndarray) -> np.ndarray: ...  # [n] -> [n, V]


@runtime_checkable
class FastModel(Model, Protocol):
    """A :class:`Model` with the optional fast path the decoders prefer.

    ``last_probs(tokens, n_rows, temperature)`` returns [n_rows, V] float64 rows equal (up
    to rounding) to ``apply_temperature(probs(tokens)[-n_rows:], temperature)``, without
    computing the other rows. A decoder asks for 1 row per draft token and k + 1 rows per
    target check, so a model whose ``probs`` costs O(n) rows can answer in O(n_rows).

    :func:`model_rows` checks the shape of every fast-path answer and, unless the class
    sets the optional attribute ``trusted_rows = True``, also their finiteness and row
    sums (a few microseconds for the few rows asked for). A class sets it only when its
    rows are a float64 softmax of finite logits it computed itself, which are
    non-negative and sum to 1 by construction
    (:class:`specdec_lite.models.transformer.TransformerModel`).
    """

    def last_probs(self, tokens: np.ndarray, n_rows: int = 1,
                   temperature: float = 1.0) -> np.ndarray: ...  # [n] -> [n_rows, V]


def check_model(model: object, name: str) -> int:
    """Return ``model.vocab_size`` if ``model`` looks like a :class:`Model`, else raise
    ``TypeError`` (no ``probs`` or no ``vocab_size``) or ``ValueError`` (a bad size)."""
    vocab = getattr(model, "vocab_size", None)
    if not callable(getattr(model, "probs", None)) or vocab is None:
        raise TypeError(f"{name} must have vocab_size and a probs(tokens) method")
    return check_int(vocab, f"{name}.vocab_size", 1)


def model_rows(
    model: object, tokens: np.ndarray, n_rows: int, name: str, temperature: float
) -> np.ndarray:
    """The last ``n_rows`` next-token rows of ``model`` after ``tokens``, at ``temperature``:
    [n_rows, V] float64, checked.

    A :class:`FastModel` is asked for those rows only (``last_probs``); any other model
    gets one ``probs(tokens)`` call and its last rows are kept. Either way the answer is
    checked before it is used: its shape always, and its finiteness and row sums unless
    the model's class declares ``trusted_rows`` (see :class:`FastModel`). A bad answer
    raises ``ValueError`` naming ``name``.
    """
    vocab = model.vocab_size
    last = getattr(model, "last_probs", None)
    if last is not None:
        rows = last(tokens, n_rows, temperature)  # [n_rows, V]
        if getattr(rows, "shape", None) != (n_rows, vocab):
            raise ValueError(f"{name}.last_probs returned shape {np.shape(rows)}, "
                             f"expected ({n_rows}, {vocab})")
        if getattr(model, "trusted_rows", False):
            return rows
        return check_probs(rows, f"{name}.last_probs output", vocab_size=vocab)
    out = np.asarray(model.probs(tokens))
    if out.ndim != 2 or out.shape[0] != len(tokens):
        raise ValueError(
            f"{name}.probs returned shape {out.shape}, expected ({len(tokens)}, vocab_size)"
        )
    rows = check_probs(out[-n_rows:], f"{name}.probs output", vocab_size=vocab)
    return apply_temperature(rows, temperature)


class TableModel:
    """A context-free model: every position has the same distribution ``table`` [V]."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = check_probs(table, "table")  # [V]
        if self.table.ndim != 1:
            raise ValueError(f"table must be 1-D, got shape {self.table.shape}")
        self.vocab_size = self.table.shape[0]

    def probs(self, tokens: np.ndarray) -> np.ndarray:
        tokens = check_tokens(tokens, self.vocab_size)
        return np.broadcast_to(self.table, (len(tokens), self.vocab_size)).copy()  # [n, V]


class MarkovModel:
    """A first-order model: the row after token t is ``transition[t]``; ``transition`` is [V, V]."""

    def __init__(self, transition: np.ndarray) -> None:
        self.transition = check_probs(transition, "transition")  # [V, V]
        if self.transition.ndim != 2 or self.transition.shape[0] != self.transition.shape[1]:
            raise ValueError(f"transition must be square [V, V], got shape {self.transition.shape}")
        self.vocab_size = self.transition.shape[0]

    def probs(self, tokens: np.ndarray) -> np.ndarray:
        tokens = check_tokens(tokens, self.vocab_size)
        return self.transition[tokens]  # [n, V]


class FlatTables(NamedTuple):
    """:meth:`NGramModel.flat_tables`: every order's tables end to end."""

    ctx_keys: np.ndarray  # [contexts] int64, sorted within each order
    ctx_totals: np.ndarray  # [contexts] float64: c(h)
    ctx_types: np.ndarray  # [contexts] float64: u(h), distinct tokens seen after h
    ctx_first: np.ndarray  # [contexts] int64: where h's pairs start in the pair arrays
    pair_counts: np.ndarray  # [pairs] float64: c(h, x)
    pair_next: np.ndarray  # [pairs] int64: x
    ctx_at: np.ndarray  # [order + 1] int64: where each order's contexts start
    add_k: float  # the add-k constant, or 0.0 for Witten-Bell


class NGramModel:
    """A character n-gram model with Witten–Bell interpolation or add-k smoothing.

    ``order`` is n: the model conditions on the last n − 1 tokens.

    * ``smoothing="witten-bell"`` (default) interpolates every order down to a
      uniform distribution: P_n(x | h) = (c(h, x) + u(h)·P_{n−1}(x | h')) / (c(h) + u(h)),
      where u(h) is the number of distinct tokens seen after h and h' drops the
      oldest token of h. Unseen contexts fall back to the lower order.
    * ``smoothing="add-k"`` uses only the full order: (c(h, x) + k) / (c(h) + k·V).

    Near the start of a sequence, where fewer than n − 1 tokens exist, the
    longest available context is used.

    Threads: ``probs`` and ``last_probs`` only read the fitted tables (read-only arrays,
    no cache), so one fitted model serves any number of threads. ``fit`` builds new
    tables and swaps them in at the end.
    """

    observer = None  # a meter's hook: observer(n_rows, seconds) after each last_probs call

    def __init__(
        self, order: int, vocab_size: int, smoothing: str = "witten-bell", add_k: float = 0.1
    ) -> None:
        order = check_int(order, "order", 1)
        self.vocab_size = check_int(vocab_size, "vocab_size", 1)
        if self.vocab_size ** (order - 1) * self.vocab_size >= 2**62:
            raise ValueError(f"order={order} is too large for vocab_size={vocab_size}")
        if smoothing not in ("witten-bell", "add-k"):
            raise ValueError(f"smoothing must be 'witten-bell' or 'add-k', got {smoothing!r}")
        self.order = order
        self.smoothing = smoothing
        self.add_k = check_positive(add_k, "add_k")
        # Per context length m = 0..order-1: sorted (context, next) keys with counts,
        # and sorted context keys with their totals and distinct-continuation counts.
        self._pair_keys: list[np.ndarray] = []
        self._pair_counts: list[np.ndarray] = []
        self._ctx_keys: list[np.ndarray] = []
        self._ctx_totals: list[np.ndarray] = []
        self._ctx_types: list[np.ndarray] = []
        # For last_probs: where each context's block of pairs starts, and their next tokens.
        self._ctx_first: list[np.ndarray] = []
        self._pair_next: list[np.ndarray] = []
        self._flat: FlatTables | None = None  # flat_tables(), made when first asked for

    @property
    def fitted(self) -> bool:
        return bool(self._pair_keys)

    def fit(self, token_ids: np.ndarray) -> NGramModel:
        """Count every (context, next token) pair of every order in ``token_ids``."""
        ids = check_tokens(token_ids, self.vocab_size, name="token_ids")
        if ids.size < 2:
            raise ValueError("token_ids must contain at least 2 tokens to fit an n-gram model")
        V = self.vocab_size
        tables: dict[str, list[np.ndarray]] = {name: [] for name in (
            "_pair_keys", "_pair_counts", "_ctx_keys", "_ctx_totals", "_ctx_types",
            "_ctx_first", "_pair_next")}
        for m in range(self.order):  # context length
            n_pairs = max(ids.size - m, 0)  # 0 when the corpus is shorter than the context
            ctx = np.zeros(n_pairs, dtype=np.int64)  # [n_pairs]
            for j in range(m):
                ctx = ctx * V + ids[j : j + n_pairs]
            pairs = ctx * V + ids[m : m + n_pairs]
            keys, counts = np.unique(pairs, return_counts=True)
            ctx_of_key = keys // V
            ctx_keys, first, types = np.unique(ctx_of_key, return_index=True, return_counts=True)
            totals = np.add.reduceat(counts, first)
            for name, array in (("_pair_keys", keys),
                                ("_pair_counts", counts.astype(np.float64)),
                                ("_ctx_keys", ctx_keys),
                                ("_ctx_totals", totals.astype(np.float64)),
                                ("_ctx_types", types.astype(np.float64)),
                                ("_ctx_first", first),
                                ("_pair_next", (keys % V).astype(np.intp))):  # for bincount
                array.flags.writeable = False
                tables[name].append(array)
        tables["_flat"] = None  # laid out again when next asked for
        self.__dict__.update(tables)  # the new tables replace the old ones together
        return self

    def flat_tables(self) -> FlatTables:
        """The fitted tables of every order laid end to end, as compiled code reads them
        (:func:`specdec_lite.engine.draft_kernels.ngram_row`): order m's contexts are
        ``ctx_keys[ctx_at[m] : ctx_at[m + 1]]``, and a context's continuations the
        ``types`` pairs from its ``first`` on. Laid out once per fit."""
        if not self.fitted:
            raise ValueError("NGramModel.flat_tables called before fit")
        if self._flat is None:
            self._flat = self._laid_flat()
        return self._flat

    def _laid_flat(self) -> FlatTables:
        pair_at = np.cumsum([0] + [keys.size for keys in self._pair_keys])  # [order + 1]
        return FlatTables(
            np.concatenate(self._ctx_keys), np.concatenate(self._ctx_totals),
            np.concatenate(self._ctx_types),
            np.concatenate([first + pair_at[m] for m, first in enumerate(self._ctx_first)]),
            np.concatenate(self._pair_counts),
            np.concatenate(self._pair_next).astype(np.int64),
            np.cumsum([0] + [keys.size for keys in self._ctx_keys]).astype(np.int64),
            self.add_k if self.smoothing == "add-k" else 0.0)

    def _lookup(self, sorted_keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
        if sorted_keys.size == 0:  # no n-grams of this order were seen
            return np.zeros(query.shape)
        pos = np.searchsorted(sorted_keys, query)
        pos = np.minimum(pos, sorted_keys.size - 1)
        return np.where(sorted_keys[pos] == query, values[pos], 0.0)

    def probs(self, tokens: np.ndarray) -> np.ndarray:
        if not self.fitted:
            raise ValueError("NGramModel.probs called before fit")
        tokens = check_tokens(tokens, self.vocab_size)
        V, n = self.vocab_size, len(tokens)
        vocab = np.arange(V, dtype=np.int64)
        out = np.full((n, V), 1.0 / V)  # [n, V], the order-0 (uniform) estimate
        ctx = np.zeros(n, dtype=np.int64)  # [n] key of the last m tokens at each position
        lengths = np.arange(1, n + 1)  # tokens available at position i
        # Both smoothings visit m = 0..order-1; a position keeps the estimate of the
        # longest context it has (add-k) or interpolates all of them (Witten–Bell).
        for m in range(self.order):
            if m > 0:
                # extend each context by the token m positions back: key = prev_token·V^(m-1) + ctx
                prev = np.zeros(n, dtype=np.int64)
                prev[m - 1 :] = tokens[: max(n - m + 1, 0)]
                ctx = prev * V ** (m - 1) + ctx
            valid = lengths >= m  # [n] enough history for this order
            pair_counts = self._lookup(
                self._pair_keys[m],
                self._pair_counts[m],
                (ctx[:, None] * V + vocab[None, :]).ravel(),
            ).reshape(n, V)
            total = self._lookup(self._ctx_keys[m], self._ctx_totals[m], ctx)  # [n]
            if self.smoothing == "add-k":
                est = (pair_counts + self.add_k) / (total[:, None] + self.add_k * V)
                out = np.where(valid[:, None], est, out)
                continue
            types = self._lookup(self._ctx_keys[m], self._ctx_types[m], ctx)  # [n]
            seen = valid & (total > 0)
            denom = np.where(seen, total + types, 1.0)[:, None]
            est = (pair_counts + types[:, None] * out) / denom
            out = np.where(seen[:, None], est, out)
        return out

    def last_probs(self, tokens: np.ndarray, n_rows: int = 1,
                   temperature: float = 1.0) -> np.ndarray:
        """``apply_temperature(probs(tokens)[-n_rows:], temperature)``, [n_rows, V] float64
        (equal up to rounding), computing only those rows; the decoders call this when a
        model has it.

        Witten–Bell unrolls into one weighted sum: with λ_m = c(h_m) / (c(h_m) + u(h_m)) for
        the seen contexts h_0 (empty) .. h_M (longest seen),
        P(x) = Σ_m [Π_{m' > m} (1 − λ_m')] c(h_m, x) / (c(h_m) + u(h_m)) + Π_m (1 − λ_m) / V.
        A row then costs one binary search per order (for the context's block of sorted
        (context, next) pairs) and one ``bincount``: tens of microseconds, where ``probs``
        does V lookups per position and order.
        """
        start = time.perf_counter()
        if not self.fitted:
            raise ValueError("NGramModel.last_probs called before fit")
        tokens = check_tokens(tokens, self.vocab_size)
        n = len(tokens)
        n_rows = check_int(n_rows, "n_rows", 1, n)
        # row i reads at most the order - 1 tokens up to and including tokens[i]
        history = tokens[max(0, n - n_rows - self.order + 2):].tolist()
        rows = [self._row(history[: len(history) - n_rows + 1 + r]) for r in range(n_rows)]
        out = apply_temperature(np.stack(rows) if n_rows > 1 else rows[0][None], temperature)
        if self.observer is not None:
            self.observer(n_rows, time.perf_counter() - start)
        return out

    def _row(self, history: list[int]) -> np.ndarray:  # -> [V]
        """The distribution after ``history`` (only its last order − 1 tokens matter)."""
        V = self.vocab_size
        longest = min(self.order - 1, len(history))  # longest usable context length
        seen = []  # (m, j): the context of length m is ctx_keys[m][j]
        key = 0  # key of the last m tokens
        for m in range(longest + 1):
            if m > 0:
                key += history[-m] * V ** (m - 1)
            if self.smoothing == "add-k" and m < longest:
                continue  # add-k reads only the longest context
            keys = self._ctx_keys[m]
            j = int(keys.searchsorted(key))
            if j == keys.size or keys[j] != key:
                break  # unseen, and so is every longer context
            seen.append((m, j))
        if self.smoothing == "add-k":  # (c(h, x) + k) / (c(h) + k V); unseen h gives 1 / V
            out, total = np.full(V, self.add_k), 0.0  # [V]
            for m, j in seen:
                lo, hi = self._ctx_first[m][j], self._ctx_first[m][j] + int(self._ctx_types[m][j])
                out[self._pair_next[m][lo:hi]] += self._pair_counts[m][lo:hi]
                total = self._ctx_totals[m][j]
            return out / (total + self.add_k * V)
        carry = 1.0  # product of (1 - λ) over the longer contexts already visited
        # the empty context (m = 0) is always seen after fit, so ``seen`` is never empty
        nexts, weights = [], []
        for m, j in reversed(seen):
            total, types = self._ctx_totals[m][j], self._ctx_types[m][j]
            lo = self._ctx_first[m][j]
            nexts.append(self._pair_next[m][lo : lo + int(types)])
            weights.append(self._pair_counts[m][lo : lo + int(types)] * (carry / (total + types)))
            carry *= types / (total + types)
        mass = np.bincount(np.concatenate(nexts), np.concatenate(weights), minlength=V)
        return mass + carry / V  # [V]
