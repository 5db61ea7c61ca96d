"""Medusa: extra decoding heads on the target, and tree verification (Cai et al. 2024).

A Medusa head reads the target's final hidden state h_t (the one its own output layer
turns into the distribution of token t+1) and guesses a token further ahead::

    logits_i(h) = (h + SiLU(h W1_i + b1_i)) W2_i        # head i = 0..H-1 guesses token t+i+2

W1 starts at zero, so an untrained head is the target's own output layer. One decoding
step then works like this:

1. The last emitted token (the *root*) is not yet in the target's KV cache. The heads,
   read at the previous position, propose candidates for the tokens after it: the top
   few of head 0 for depth 1, of head 1 for depth 2, and so on.
2. The candidates form a **tree** (a set of rank paths like ``(0,)``, ``(1,)``,
   ``(0, 0)``: "head 0's best, then head 1's best"). The root and every node go
   through the target in **one** forward call. Each node sits at position
   ``prefix length + depth`` and attends to the prefix and its own ancestors only
   (:attr:`Tree.mask`), so its logits equal those of a causal forward of its path.
3. A node is accepted if its parent is accepted and the target, at the parent, agrees
   with it (``rule``). The deepest accepted path is kept in the cache
   (``TransformerModel.commit_path``) and emitted, plus one extra token from the target's
   distribution at the path's last node.

Rules:

* ``"greedy"``: accept x when x == argmax p at the parent. The output is token for token
  the target's greedy decoding. Lossless.
* ``"typical"``: Medusa's typical acceptance, accept when
  p(x) > min(eps, delta * exp(-H(p))) at temperature T. The extra token is sampled from p.
  **Lossy** for T > 0 (at T = 0 it is greedy).
* ``"exact"``: the chain case of speculative sampling (Leviathan et al. 2023; Chen et al.
  2023) with the heads as the draft: the chain's tokens x_i are *sampled* from the heads'
  tempered distributions q_i and checked with :func:`specdec_lite.rules.verify.verify`'s exact
  rule. The output follows the target's distribution exactly; the tree must be a chain.

The target must be a :class:`specdec_lite.models.transformer.TransformerModel`: a decoding step
uses its tree interface (``score_tree``, ``commit_path``, ``hidden_at``). The decoder
itself, step by step, is :mod:`specdec_lite.engine.medusa_decode`; this module holds the heads,
the trees and their training.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..checks import check_int
from ..functional import sigmoid, silu, softmax, softmax32
from ..models.transformer import Output, TransformerModel, load_npz
from ..rules.distributions import (
    apply_temperature,
    as_generator,
    check_temperature,
)
from ..rules.verify import check_rule, typical_cutoff

MEDUSA_RULES = ("greedy", "typical", "exact")


class MedusaHeads:
    """H Medusa heads: ``logits_i(h) = (h + SiLU(h W1_i + b1_i)) W2_i``. Their only state
    is their weights (copied, read-only), so one object serves any number of threads."""

    observer = None  # a meter's hook: observer(n, seconds) after each logits call, n = rows

    def __init__(self, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray) -> None:
        self.w1 = np.array(w1, dtype=np.float32)  # [H, d, d]
        self.b1 = np.array(b1, dtype=np.float32)  # [H, d]
        self.w2 = np.array(w2, dtype=np.float32)  # [H, d, V]
        for array in (self.w1, self.b1, self.w2):
            array.flags.writeable = False
        n_heads, d_model, d_out = self.w1.shape
        if d_out != d_model or self.b1.shape != (n_heads, d_model) or self.w2.shape[:2] != (
            n_heads,
            d_model,
        ):
            raise ValueError(
                f"inconsistent head shapes: w1 {self.w1.shape}, b1 {self.b1.shape}, "
                f"w2 {self.w2.shape}; expected [H, d, d], [H, d], [H, d, V]"
            )
        self.n_heads, self.d_model, self.vocab_size = n_heads, d_model, self.w2.shape[2]

    @classmethod
    def from_npz(cls, path: str | Path, sha256: str) -> MedusaHeads:
        """Load checksum-verified ``w1``, ``b1``, ``w2`` (see ``transformer.load_npz``)."""
        arrays = load_npz(path, sha256)
        return cls(arrays["w1"], arrays["b1"], arrays["w2"])

    def logits(self, hidden: np.ndarray) -> np.ndarray:
        """Head logits [H, n, V] for hidden states [n, d]; row [i, t] guesses token t+i+2."""
        start = time.perf_counter()
        hidden = np.asarray(hidden, dtype=np.float32)
        if hidden.ndim != 2 or hidden.shape[1] != self.d_model:
            raise ValueError(f"hidden must have shape [n, {self.d_model}], got {hidden.shape}")
        z = np.matmul(hidden, self.w1) + self.b1[:, None, :]  # [H, n, d]
        out = np.matmul(hidden + silu(z), self.w2)  # [H, n, V]
        if self.observer is not None:
            self.observer(len(hidden), time.perf_counter() - start)
        return out


@dataclass(frozen=True, eq=False)
class Tree:
    """A candidate tree. Node 0 is the root (the last emitted token); node j >= 1 follows
    ``paths[j - 1]``, a tuple of ranks: ``(0, 2)`` is "head 0's top token, then head 1's
    third". Nodes are sorted by depth, so every parent comes before its children."""

    paths: tuple[tuple[int, ...], ...]
    parent: np.ndarray  # [N+1] int, parent[0] = -1
    depth: np.ndarray  # [N+1] int, depth[0] = 0
    rank: np.ndarray  # [N+1] int, rank among the parent's candidates (root: -1)
    mask: np.ndarray  # [N+1, N+1] bool, mask[i, j]: j is i or an ancestor of i

    @property
    def n_nodes(self) -> int:
        """Nodes including the root: the number of tokens one verification forwards."""
        return len(self.parent)

    @property
    def max_depth(self) -> int:
        return int(self.depth.max())

    @property
    def is_chain(self) -> bool:
        return all(path == (0,) * len(path) for path in self.paths)


def make_tree(choices: Iterable[Sequence[int]]) -> Tree:
    """Build a :class:`Tree` from ``medusa_choices``-style rank paths.

    The set must be prefix-closed (each path's parent path is present) and free of
    duplicates; ranks are non-negative ints. Raises ``ValueError`` naming ``choices``.
    """
    paths = []
    for path in choices:
        if isinstance(path, int | np.integer):
            raise TypeError(f"choices must be a list of rank paths (tuples), got {path!r}")
        path = tuple(int(r) for r in path)
        if not path or min(path) < 0:
            raise ValueError(f"choices: every path needs at least one rank >= 0, got {path}")
        paths.append(path)
    if not paths:
        raise ValueError("choices must contain at least one path")
    if len(set(paths)) != len(paths):
        raise ValueError("choices contains duplicate paths")
    known = set(paths)
    for path in paths:
        if len(path) > 1 and path[:-1] not in known:
            raise ValueError(f"choices is not prefix-closed: {path} without {path[:-1]}")
    paths.sort(key=lambda path: (len(path), path))
    index = {path: i + 1 for i, path in enumerate(paths)}
    parent = np.array([-1] + [index.get(path[:-1], 0) for path in paths])  # [N+1]
    depth = np.array([0] + [len(path) for path in paths])  # [N+1]
    rank = np.array([-1] + [path[-1] for path in paths])  # [N+1]
    mask = np.eye(len(parent), dtype=bool)  # [N+1, N+1]
    for i in range(1, len(parent)):
        mask[i] |= mask[parent[i]]
    return Tree(tuple(paths), parent, depth, rank, mask)


def dense_tree(widths: Sequence[int]) -> Tree:
    """Every path whose rank at depth j is below ``widths[j]``: prod(widths[:j]) nodes at
    depth j. ``dense_tree([1] * H)`` is the top-1 chain."""
    widths = [check_int(w, "widths", 1) for w in widths]
    if not widths:
        raise ValueError("widths must not be empty")
    paths = []
    for depth in range(1, len(widths) + 1):
        paths += itertools.product(*(range(w) for w in widths[:depth]))
    return make_tree(paths)


def chain_tree(depth: int) -> Tree:
    """The chain root -> top-1 of head 0 -> top-1 of head 1 -> ... (``depth`` nodes)."""
    return dense_tree([1] * check_int(depth, "depth", 1))


def sparse_tree(top_accuracy: np.ndarray, n_nodes: int) -> Tree:
    """The ``n_nodes`` paths with the highest estimated chance of being accepted.

    ``top_accuracy[i, r]`` ([H, s]) is how often head i's rank-r token is right. Assuming
    independence, path (r_1..r_j) survives with probability prod_i top_accuracy[i, r_i],
    and the expected accepted length is the sum of that over the tree's nodes, so keeping
    the best ``n_nodes`` paths maximises it (Cai et al. 2024, Sec. 2.1.2). A prefix never
    scores below its extensions, so the result is prefix-closed.
    """
    acc = np.asarray(top_accuracy, dtype=np.float64)  # [H, s]
    if acc.ndim != 2 or acc.size == 0 or np.any(acc < 0) or np.any(acc > 1):
        raise ValueError("top_accuracy must be a non-empty [n_heads, s] array in [0, 1]")
    n_nodes = check_int(n_nodes, "n_nodes", 1)
    n_heads, s = acc.shape
    scored = []
    for depth in range(1, n_heads + 1):
        for path in itertools.product(range(s), repeat=depth):
            scored.append((-float(np.prod(acc[np.arange(depth), path])), depth, path))
    scored.sort()
    return make_tree(path for _, _, path in scored[:n_nodes])


def top_k_accuracy(heads: MedusaHeads, hidden: np.ndarray, tokens: np.ndarray,
                   top: int = 5) -> np.ndarray:
    """[H, top] array: entry [i, r] is the fraction of positions t where head i's rank-r
    guess equals ``tokens[t + i + 2]``. ``hidden[t]`` ([n, d]) is the target's hidden state
    after ``tokens[: t + 1]``. Cumulative sums along r give top-r accuracy."""
    tokens = np.asarray(tokens)
    if len(tokens) != len(hidden):
        raise ValueError(f"hidden has {len(hidden)} rows but tokens has {len(tokens)}")
    top = check_int(top, "top", 1)
    logits = heads.logits(hidden)  # [H, n, V]
    out = np.zeros((heads.n_heads, top))
    for i in range(heads.n_heads):
        n = len(tokens) - i - 2
        if n <= 0:
            raise ValueError(f"need more than {i + 2} tokens to score head {i}")
        ranked = np.argsort(-logits[i, :n], axis=1, kind="stable")[:, :top]  # [n, top]
        out[i] = (ranked == tokens[i + 2 :, None]).mean(axis=0)
    return out


def windowed_forward(model: TransformerModel, ids: np.ndarray) -> Output:
    """Logits [n, V] and hidden states [n, d] of ``model`` over a long text ``ids`` [n],
    in consecutive windows of ``max_len`` tokens (each window starts with an empty
    context, so a window's first rows see less context than a running decoder would)."""
    ids = np.asarray(ids)
    length = model.config.max_len
    logits, hidden = [], []
    for start in range(0, len(ids), length):
        out = model.forward(ids[start : start + length])  # on a new cache: from position 0
        logits.append(out.logits)
        hidden.append(out.hidden)
    return Output(np.concatenate(logits), np.concatenate(hidden))


def head_loss_grads(params: dict[str, np.ndarray], h: np.ndarray,
                    want: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Mean cross-entropy of each head [H] and its gradients, for hidden states h [B, d]
    and wanted tokens ``want`` [H, B]; ``params`` holds w1 [H, d, d], b1 [H, d], w2 [H, d, V].
    """
    z = h @ params["w1"] + params["b1"][:, None]  # [H, B, d]
    gate = sigmoid(z)  # [H, B, d]
    u = h + z * gate  # [H, B, d]: residual + SiLU
    logits = u @ params["w2"]  # [H, B, V]
    probs = softmax32(logits)  # [H, B, V]
    picked = np.take_along_axis(probs, want[..., None], axis=-1)[..., 0]  # [H, B]
    grad_logits = probs.copy()
    np.put_along_axis(grad_logits, want[..., None], picked[..., None] - 1, axis=-1)
    grad_logits /= h.shape[0]  # [H, B, V]: d(mean CE)/d(logits) = (softmax - onehot) / B
    grad_u = grad_logits @ params["w2"].transpose(0, 2, 1)  # [H, B, d]
    grad_z = grad_u * gate * (1 + z * (1 - gate))  # SiLU'(z) = s (1 + z (1 - s))
    grads = {"w1": h.T @ grad_z, "b1": grad_z.sum(axis=1),
             "w2": u.transpose(0, 2, 1) @ grad_logits}
    return -np.log(picked).mean(axis=1), grads


def fit_heads(
    hidden: np.ndarray,
    tokens: np.ndarray,
    unembed: np.ndarray,
    n_heads: int,
    *,
    steps: int,
    batch: int = 256,
    lr: float = 1e-3,
    seed: int | np.random.Generator | None = None,
) -> tuple[MedusaHeads, np.ndarray]:
    """Train Medusa heads in numpy on frozen hidden states, with Adam and hand-written
    gradients (the torch trainer in ``specdec_lite.training.train`` does the same at scale).

    ``hidden[t]`` ([n, d]) is the target's state after ``tokens[: t + 1]``; head i learns
    to predict ``tokens[t + i + 2]`` with cross-entropy. W1 and b1 start at zero and W2 at
    the target's output matrix ``unembed`` ([d, V]), so step 0 is "every head repeats the
    target's next-token guess". Returns the heads and the loss per step and head [steps, H].
    """
    hidden = np.asarray(hidden, dtype=np.float32)  # [n, d]
    tokens = np.asarray(tokens)
    n, d = hidden.shape
    steps = check_int(steps, "steps", 1)
    n_heads = check_int(n_heads, "n_heads", 1)
    if len(tokens) != n or n < n_heads + 3:
        raise ValueError(f"tokens must match hidden's {n} rows and exceed n_heads + 2")
    rng = as_generator(seed)
    params = {"w1": np.zeros((n_heads, d, d), np.float32), "b1": np.zeros((n_heads, d), np.float32),
              "w2": np.repeat(np.asarray(unembed, np.float32)[None], n_heads, axis=0)}
    moments = {name: (np.zeros_like(p), np.zeros_like(p)) for name, p in params.items()}
    offsets = np.arange(n_heads)[:, None] + 2  # [H, 1]
    losses = np.zeros((steps, n_heads))
    for step in range(steps):
        t = rng.integers(0, n - n_heads - 1, batch)  # [B]
        h, want = hidden[t], tokens[t[None, :] + offsets]  # [B, d], [H, B]
        losses[step], grads = head_loss_grads(params, h, want)
        for name, g in grads.items():  # Adam, betas (0.9, 0.999)
            m, v = moments[name]
            m += 0.1 * (g - m)
            v += 0.001 * (g * g - v)
            m_hat, v_hat = m / (1 - 0.9 ** (step + 1)), v / (1 - 0.999 ** (step + 1))
            params[name] -= lr * m_hat / (np.sqrt(v_hat) + 1e-8)
    return MedusaHeads(params["w1"], params["b1"], params["w2"]), losses


def typical_first_token_tv(target_logits: np.ndarray, candidates: np.ndarray,
                           temperature: float, eps: float = 0.09,
                           delta: float = 0.3) -> np.ndarray:
    """How far typical acceptance moves the first token of a chain step away from p.

    At each of n positions, p = softmax(target_logits / T) ([n, V]) is the target's
    distribution and ``candidates`` ([n]) is head 0's top token. If p(c) > min(eps,
    delta * exp(-H(p))) the step emits c for sure, otherwise it samples from p, so the
    first token's distribution is a point mass or p itself. Returns the exact TV distance
    from p per position [n]: 1 - p(c) where c is accepted, else 0.
    """
    temperature = check_temperature(temperature)
    params = check_rule("typical", {"eps": eps, "delta": delta})
    p = apply_temperature(softmax(target_logits), temperature)  # [n, V]
    candidates = np.asarray(candidates)
    p_c = p[np.arange(len(p)), candidates]  # [n]
    cutoff = typical_cutoff(p, params["eps"], params["delta"])  # [n]
    return np.where(p_c > cutoff, 1.0 - p_c, 0.0)


__all__ = [
    "MEDUSA_RULES",
    "MedusaHeads",
    "Tree",
    "chain_tree",
    "dense_tree",
    "fit_heads",
    "head_loss_grads",
    "make_tree",
    "sparse_tree",
    "top_k_accuracy",
    "typical_first_token_tv",
    "windowed_forward",
]
