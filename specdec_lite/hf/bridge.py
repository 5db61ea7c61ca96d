"""Bring your own model: any Hugging Face ``transformers`` causal LM in the model contract.

:class:`HFModel` wraps a causal language model (``GPT2LMHeadModel``, ``LlamaForCausalLM``,
anything whose forward takes token ids and a KV cache and returns ``logits``) so that the
library's decoders drive it as they drive the numpy GPT: ``vocab_size``, ``probs`` and the
fast path ``last_probs`` (see :mod:`specdec_lite.models.ngram`).

The fast path keeps one KV cache (a ``transformers`` ``Cache`` object, the model's
``past_key_values``) for the token sequence of the previous call. A call first finds the
longest common prefix of its tokens with the cached ones, crops the cache back to it (after
a rejection, the rejected draft tokens go), and forwards only the tokens after it, so a
verification is one forward over k + 1 tokens and a drafting step one forward over a
token or two.

torch and transformers are imported here only (the ``hf`` extra,
``pip install specdec_lite[hf]``); ``import specdec_lite`` never imports them. The model
runs where its weights are (``model.device``), in their dtype; the rows it returns are a
float64 softmax of its logits, cast to float32 first as the numpy GPT does. Nothing is
downloaded: :meth:`HFModel.from_pretrained` reads a local directory only.

Thread safety: an ``HFModel`` is **not** thread-safe. Its KV cache and the token sequence
it belongs to change on every call, so two threads calling one adapter corrupt each other's
rows. Give each thread (or each concurrent request) its own adapter; adapters may share one
``torch.nn.Module``, whose weights are only read (under ``torch.inference_mode``). torch's
own thread pool is process-wide: pin it with ``torch.set_num_threads`` before timing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..checks import check_int, check_tokens
from ..functional import softmax
from ..rules.distributions import apply_temperature

#: Logit rows kept from earlier forwards (beyond the newest block), for a call that asks
#: again for rows it already had. The decoders never need more than the newest block.
KEEP_ROWS = 64


def _torch():
    """torch, imported on first use, with an error that names the extra."""
    try:
        import torch
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("specdec_lite.hf.bridge needs torch and transformers: "
                          "pip install 'specdec_lite[hf]' (see requirements-hf.txt)") from err
    return torch


class HFModel:
    """A ``transformers`` causal LM (and its tokenizer, if given) in the model contract.

    * ``vocab_size``: the width of the logits (the output embedding's rows), which can be
      larger than the tokenizer's vocabulary when a model pads it;
    * ``max_len``: the model's position limit (``n_positions`` or
      ``max_position_embeddings``), or ``None`` for a model without one;
    * ``probs(tokens)`` [n, V] and ``last_probs(tokens, n_rows, temperature)`` [n_rows, V],
      float64, as :class:`specdec_lite.models.ngram.FastModel` defines them;
    * ``encode(text)`` / ``decode(ids)`` when a tokenizer was given.

    The model is put in eval mode (no dropout). ``observer`` is the bench meter's hook:
    ``observer(n, seconds)`` after each forward over n tokens. ``n_forwards`` and
    ``n_forwarded`` count the forwards and the tokens they read, for a reader who wants to
    see the cache at work. Not thread-safe: see the module docstring.
    """

    observer = None

    def __init__(self, model: object, tokenizer: object | None = None) -> None:
        torch = _torch()
        if not isinstance(model, torch.nn.Module) or not hasattr(model, "config"):
            raise TypeError(f"model must be a transformers model (a torch.nn.Module with a "
                            f"config), got {type(model).__name__}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        width = getattr(getattr(head, "weight", None), "shape", (None,))[0]
        self.vocab_size = check_int(width or model.config.vocab_size, "model.vocab_size", 1)
        config = model.config
        window = getattr(config, "n_positions", None) or getattr(
            config, "max_position_embeddings", None)
        self.max_len = None if window is None else check_int(window, "model.max_len", 1)
        self.n_forwards = 0
        self.n_forwarded = 0
        self.reset()

    @classmethod
    def from_pretrained(cls, path: str | Path, **kwargs: object) -> HFModel:
        """Load a model saved with ``save_pretrained`` from the local directory ``path``
        (``AutoModelForCausalLM``, float32, never from a hub), with its tokenizer if the
        directory has one. ``kwargs`` go to ``from_pretrained``."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = Path(path)
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"path {path} is not a saved model (no config.json)")
        kwargs = {"dtype": _torch().float32} | kwargs
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, **kwargs)
        tokenizer = None
        if (path / "tokenizer.json").is_file() or (path / "tokenizer_config.json").is_file():
            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        return cls(model, tokenizer)

    # ---------------------------------------------------------------- the cache

    def reset(self) -> None:
        """Forget the cache: the next call forwards its whole sequence."""
        self._cache = None  # a transformers Cache holding the keys/values of _tokens
        self._tokens = np.zeros(0, dtype=np.int64)  # [m] the tokens in the cache
        self._rows = np.zeros((0, self.vocab_size), dtype=np.float32)  # [r, V] logits of
        # the last r cached tokens (r <= m)

    @property
    def n_cached(self) -> int:
        """How many tokens the KV cache holds."""
        return len(self._tokens)

    def _crop(self, length: int) -> None:
        """Keep the first ``length`` cached tokens (and the logit rows that go with them)."""
        drop = len(self._tokens) - length
        if drop <= 0:
            return
        if length == 0:
            self.reset()
            return
        self._cache.crop(-drop)  # a negative argument removes that many entries
        self._tokens = self._tokens[:length]
        self._rows = self._rows[: max(len(self._rows) - drop, 0)]

    def _forward(self, new: np.ndarray) -> None:
        """Forward the tokens ``new`` [b] after the cached ones and cache them."""
        torch = _torch()
        start = time.perf_counter()
        ids = torch.from_numpy(new[None, :]).to(self.model.device)  # [1, b]
        with torch.inference_mode():
            # The cache is passed positionally: transformers 5 calls this argument
            # ``cache``, 4.x ``past_key_values``. The model places the new tokens after
            # the cache's length (positions, rotary phases) and appends to it in place.
            out = self.model(ids, self._cache, use_cache=True)
        cache = getattr(out, "cache", None)
        if cache is None:
            cache = out.past_key_values
        logits = out.logits[0].float().cpu().numpy()  # [b, V]
        self._cache = cache
        self._tokens = np.concatenate([self._tokens, new])
        self._rows = np.concatenate([self._rows, logits]) if len(self._rows) else logits
        self.n_forwards += 1
        self.n_forwarded += len(new)
        if self.observer is not None:
            self.observer(len(new), time.perf_counter() - start)

    def logits(self, tokens: Sequence[int] | np.ndarray, n_rows: int | None = None) -> np.ndarray:
        """float32 logits of the last ``n_rows`` positions (default all): [n_rows, V].

        Reuses the cache for the longest common prefix with the previous call's tokens and
        forwards the rest in one call; rows it no longer has are computed again.
        """
        tokens = check_tokens(tokens, self.vocab_size)  # [n]
        n = len(tokens)
        if n == 0:
            raise ValueError("tokens must contain at least one token")
        if self.max_len is not None and n > self.max_len:
            raise ValueError(f"tokens has length {n}, more than the model's max_len "
                             f"{self.max_len}")
        n_rows = n if n_rows is None else check_int(n_rows, "n_rows", 1, n)
        m = min(n, len(self._tokens))
        differ = np.flatnonzero(tokens[:m] != self._tokens[:m])
        common = int(differ[0]) if differ.size else m
        # rows n - n_rows .. n - 1 are needed; rows of cached tokens kept in _rows count
        have_from = len(self._tokens) - len(self._rows)  # first cached token with a row
        start = min(common, max(n - n_rows, 0)) if have_from > n - n_rows else common
        if start == n:  # every token cached; its rows are in _rows
            self._crop(n)
        else:
            self._crop(start)
            self._forward(tokens[start:])
        out = self._rows[len(self._rows) - n_rows:].copy()  # [n_rows, V]
        self._rows = self._rows[-max(KEEP_ROWS, n_rows):]  # bound what later calls may reuse
        return out

    # ---------------------------------------------------------------- the contract

    def probs(self, tokens: Sequence[int] | np.ndarray) -> np.ndarray:
        """float64 [n, V]: row i is the distribution of the token after ``tokens[:i+1]``."""
        return softmax(self.logits(tokens))  # [n, V]

    def last_probs(self, tokens: Sequence[int] | np.ndarray, n_rows: int = 1,
                   temperature: float = 1.0) -> np.ndarray:
        """``apply_temperature(probs(tokens)[-n_rows:], temperature)``, [n_rows, V] float64,
        forwarding only the tokens the cache lacks. At temperature 0 each row is the
        one-hot of its logits' first argmax."""
        logits = self.logits(tokens, n_rows)  # [n_rows, V] float32
        if temperature == 0:
            rows = np.zeros(logits.shape)  # [n_rows, V]
            rows[np.arange(len(rows)), logits.argmax(axis=1)] = 1.0
            return rows
        z = softmax(logits)  # [n_rows, V] float64
        return z if temperature == 1 else apply_temperature(z, temperature)

    # ---------------------------------------------------------------- text

    def encode(self, text: str) -> np.ndarray:
        """Token ids [n] of ``text`` by the tokenizer (no special tokens added)."""
        if self.tokenizer is None:
            raise ValueError("this HFModel has no tokenizer: pass token ids instead")
        if not isinstance(text, str):
            raise TypeError(f"text must be str, got {type(text).__name__}")
        return np.asarray(self.tokenizer.encode(text, add_special_tokens=False), dtype=np.int64)

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        """The text of token ids ``ids`` by the tokenizer."""
        if self.tokenizer is None:
            raise ValueError("this HFModel has no tokenizer: decode the ids yourself")
        return self.tokenizer.decode([int(i) for i in ids])
