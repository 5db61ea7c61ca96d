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
  tempered distributions q_i and checked with :func:`specdec_lite.verify.verify`'s exact
  rule. The output follows the target's distribution exactly; the tree must be a chain.

The target must be a :class:`specdec_lite.transformer.TransformerModel`: a decoding step
uses its tree interface (``score_tree``, ``commit_path``, ``hidden_at``, ``n_committed``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .checks import check_eos, check_int, check_prompt
from .decode import Generation, Step, cut_at_eos
from .distributions import (
    apply_temperature,
    as_generator,
    check_temperature,
    check_top_k,
    check_top_p,
    sample,
    warp,
)
from .functional import sigmoid, silu, softmax, softmax32
from .transformer import Output, TransformerModel, load_npz
from .verify import acceptance_mask, check_rule, typical_cutoff, verify_checked

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
        model.rollback(0)
        out = model.forward(ids[start : start + length])
        logits.append(out.logits)
        hidden.append(out.hidden)
    model.rollback(0)
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
    gradients (the torch trainer in ``specdec_lite.train`` does the same at scale).

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


def _node_tokens(tree: Tree, head_logits: np.ndarray, rule: str, temperature: float,
                 rng: np.random.Generator, top_k: int | None = None,
                 top_p: float | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Candidate tokens [N] for the tree's nodes (root excluded) from head logits [H, V].

    ``"exact"`` samples the chain x_i ~ q_i (returned as the second value, [N, V]); the other
    rules take each head's ranked tokens."""
    depth = tree.depth[1:] - 1  # [N] head index of each node
    if rule == "exact":
        q = warp(softmax(head_logits[: tree.max_depth]), temperature, top_k, top_p)  # [D, V]
        if temperature == 0:
            tokens = q.argmax(axis=1)
        else:
            tokens = np.array([sample(row, rng) for row in q])
        return tokens[depth], q
    top = int(tree.rank.max()) + 1
    ranked = np.argsort(-head_logits[: tree.max_depth], axis=1, kind="stable")[:, :top]  # [D, s]
    return ranked[depth, tree.rank[1:]], None


def medusa_generate(
    target: TransformerModel,
    heads: MedusaHeads,
    prompt: np.ndarray,
    *,
    max_new_tokens: int,
    temperature: float = 0.0,
    tree: Tree | None = None,
    rule: str = "greedy",
    seed: int | np.random.Generator | None = None,
    eos_id: int | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    **rule_params: float,
) -> Generation:
    """Medusa decoding: one target forward per step verifies a whole candidate tree.

    The first target call runs the prompt and emits one token; each later call forwards
    the root plus ``tree``'s nodes (default :func:`chain_tree` for ``"exact"``, else
    ``dense_tree([3, 2, 2, 1])`` cut to the number of heads) and emits the deepest
    accepted path plus one token. In the trace, ``Step.proposed`` is the accepted path
    followed by the best-ranked child that was rejected (if the path could go deeper), so
    ``acceptance_rate`` is accepted / (accepted + rejections) along the chosen path.
    Calls are counted as ``n_target_calls`` (one per step) and ``n_head_calls`` (one per
    step after the first); there is no draft model, so ``n_draft_calls`` stays 0.
    ``top_k`` and ``top_p`` (rule ``"exact"`` only; ignored at ``temperature=0``) warp the
    heads' q and the target's p alike, after temperature, as in
    :func:`specdec_lite.decode.speculative_generate`.
    """
    if not isinstance(target, TransformerModel):
        raise TypeError("target must be a TransformerModel (Medusa needs its KV cache)")
    if not isinstance(heads, MedusaHeads):
        raise TypeError("heads must be a MedusaHeads")
    if heads.vocab_size != target.vocab_size or heads.d_model != target.config.d_model:
        raise ValueError(
            f"heads (V={heads.vocab_size}, d={heads.d_model}) do not fit the target "
            f"(V={target.vocab_size}, d={target.config.d_model})"
        )
    if rule not in MEDUSA_RULES:
        raise ValueError(f"rule must be one of {MEDUSA_RULES}, got {rule!r}")
    params = check_rule(rule, rule_params)
    prompt = check_prompt(prompt, target.vocab_size)
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", 0)
    temperature = check_temperature(temperature)
    top_k, top_p = check_top_k(top_k), check_top_p(top_p)
    if (top_k, top_p) != (None, None) and rule != "exact":
        raise ValueError(f"top_k and top_p need rule='exact', got rule={rule!r}")
    if temperature == 0:
        top_k = top_p = None
    eos_id = check_eos(eos_id, target.vocab_size)
    if tree is None:
        tree = chain_tree(heads.n_heads) if rule == "exact" else dense_tree(
            [3, 2, 2, 1][: heads.n_heads])
    if not isinstance(tree, Tree):
        raise TypeError(f"tree must be a Tree (see make_tree), got {type(tree).__name__}")
    if tree.max_depth > heads.n_heads:
        raise ValueError(f"tree has depth {tree.max_depth} but there are {heads.n_heads} heads")
    if rule == "exact" and not tree.is_chain:
        raise ValueError('rule="exact" verifies a chain: pass tree=chain_tree(depth)')
    limit = target.config.max_len
    if len(prompt) + max_new_tokens + tree.max_depth > limit:
        raise ValueError(
            f"max_new_tokens: prompt ({len(prompt)}) + max_new_tokens ({max_new_tokens}) + "
            f"tree depth ({tree.max_depth}) exceeds the target's max_len {limit}"
        )
    rng = as_generator(seed)
    start = time.perf_counter()
    gen = Generation(tokens=np.zeros(0, dtype=np.int64), prompt=prompt)
    if max_new_tokens == 0:
        return gen
    first_child = {int(p): i for i, p in reversed(list(enumerate(tree.parent))) if i > 0}

    greedy = temperature == 0 or rule == "greedy"

    def emit_from(logits: np.ndarray) -> int:  # [V] -> one token: argmax, or sampled at T
        if greedy:
            return int(logits.argmax())
        return sample(warp(softmax(logits), temperature, top_k, top_p), rng)

    logits = target.logits(prompt)[-1]  # [V]
    hidden = target.hidden_at(len(prompt) - 1)  # [d]
    gen.n_target_calls += 1
    root = emit_from(logits)
    out = [root]
    gen.steps.append(Step((), 0, (root,), "sample"))
    while len(out) < max_new_tokens and root != eos_id:
        head_logits = heads.logits(hidden[None])[:, 0]  # [H, V]
        gen.n_head_calls += 1
        node_tokens, q = _node_tokens(tree, head_logits, rule, temperature, rng,
                                      top_k, top_p)  # [N]
        tokens = np.concatenate([[root], node_tokens])  # [N+1], the root first
        forward = target.score_tree(tokens, tree.depth, tree.mask)  # on the committed prefix
        gen.n_target_calls += 1
        if rule == "exact":
            p = warp(softmax(forward.logits), temperature, top_k, top_p)  # [N+1, V]
            result = verify_checked(node_tokens, q, p, rng, "exact", {})  # inputs built here
            path = np.arange(result.n_accepted + 1)  # root + accepted chain
            extra_token, extra = int(result.tokens[-1]), result.extra
        else:
            ok = _accept(tokens, tree.parent, forward.logits, rule, temperature, params)  # [N+1]
            accepted = ~(tree.mask & ~ok[None, :]).any(axis=1)  # [N+1] whole path ok
            last = int(np.where(accepted, tree.depth, -1).argmax())
            path = np.flatnonzero(tree.mask[last])  # ancestors of last, ascending
            extra_token = emit_from(forward.logits[last])
            extra = "correction" if last in first_child else "bonus"
        last = int(path[-1])
        target.commit_path(path)
        hidden = target.hidden_at(target.n_committed - 1)  # [d]
        child = first_child.get(last)
        kept = tokens[path[1:]].tolist()  # the accepted path below the root
        proposed = kept + ([int(tokens[child])] if child else [])
        emitted = np.array(kept + [extra_token], dtype=np.int64)
        emitted = emitted[: max_new_tokens - len(out)]
        emitted, hit_eos = cut_at_eos(emitted, eos_id)
        gen.steps.append(Step(tuple(proposed), len(path) - 1, tuple(emitted.tolist()), extra))
        out += emitted.tolist()
        root = extra_token
        if hit_eos:
            break
    gen.tokens = np.asarray(out, dtype=np.int64)
    gen.wall_time_s = time.perf_counter() - start
    return gen


def _accept(tokens: np.ndarray, parent: np.ndarray, logits: np.ndarray, rule: str,
            temperature: float, params: dict) -> np.ndarray:
    """[N+1] bool: does the target, at each node's parent, accept the node's token?
    The root is always accepted."""
    parent_logits = logits[parent[1:]]  # [N, V]
    node = tokens[1:]  # [N]
    if temperature == 0 or rule == "greedy":
        ok = acceptance_mask(node, None, parent_logits, None, "greedy")
    else:
        p = apply_temperature(softmax(parent_logits), temperature)  # [N, V]
        ok = acceptance_mask(node, None, p, None, "typical", **params)
    return np.concatenate([[True], ok])


__all__ = [
    "MEDUSA_RULES",
    "MedusaHeads",
    "Tree",
    "chain_tree",
    "dense_tree",
    "fit_heads",
    "head_loss_grads",
    "make_tree",
    "medusa_generate",
    "sparse_tree",
    "top_k_accuracy",
    "typical_first_token_tv",
    "windowed_forward",
]
