"""Input validation shared by the whole library.

Every public function checks its arguments here before doing any work. A bad value
raises ``TypeError`` (wrong kind of object) or ``ValueError`` (right kind, bad value),
and the message names the parameter, so a caller reads what to fix instead of an
``IndexError`` three frames down.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

#: How far a row sum may be from 1 before a distribution is rejected.
SUM_TOL = 1e-6


def check_int(value: object, name: str, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """Return ``value`` as an ``int`` if it is an integer (not a bool) in [minimum, maximum].

    numpy integers are accepted; floats such as ``2.0`` are not. Raises ``TypeError``
    for a non-integer and ``ValueError`` for one out of range, naming ``name``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return int(value)


def check_real(value: object, name: str, minimum: float | None = None,
               positive: bool = False) -> float:
    """Return ``value`` as a finite ``float``: at least ``minimum``, and above 0 if
    ``positive``. Raises ``TypeError`` for a non-number (bools included) and
    ``ValueError`` for NaN, infinity or a value out of range, naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def check_positive(value: object, name: str) -> float:
    """Return ``value`` as a finite float > 0 (see :func:`check_real`)."""
    return check_real(value, name, positive=True)


def check_probs(
    probs: np.ndarray, name: str = "probs", vocab_size: int | None = None
) -> np.ndarray:
    """Validate probability rows ``[..., V]`` and return them as float64.

    Raises ``ValueError`` naming ``name`` if any entry is NaN/inf or negative,
    if a row does not sum to 1 within ``SUM_TOL``, or if the last axis is not
    ``vocab_size`` long; ``TypeError`` if ``probs`` is not numeric.
    """
    try:
        arr = np.asarray(probs, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be an array of numbers") from err
    if arr.ndim == 0:
        raise ValueError(f"{name} must have at least one axis of length vocab_size")
    if vocab_size is not None and arr.shape[-1] != vocab_size:
        raise ValueError(
            f"{name} has {arr.shape[-1]} entries per row, expected vocab_size={vocab_size}"
        )
    sums = arr.sum(axis=-1)
    if (
        arr.size
        and np.isfinite(sums).all()
        and arr.min() >= 0
        and np.abs(sums - 1.0).max() <= SUM_TOL
    ):
        return arr  # fast path: one pass for the common, valid case
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if np.any(arr < 0):
        raise ValueError(f"{name} contains negative values")
    if np.any(np.abs(sums - 1.0) > SUM_TOL):
        worst = float(sums.ravel()[np.argmax(np.abs(sums - 1.0).ravel())])
        raise ValueError(
            f"{name} rows must sum to 1 (within {SUM_TOL}); found a row summing to {worst!r}"
        )
    return arr


def check_tokens(tokens: object, vocab_size: int, name: str = "tokens") -> np.ndarray:
    """Return ``tokens`` as a 1-D int64 array [n], or raise if it is not one or if an
    id lies outside [0, vocab_size). Any integer dtype is accepted (int32 included)."""
    arr = np.asarray(tokens)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of token ids, got shape {arr.shape}")
    if arr.size == 0:
        return arr.astype(np.int64)
    if arr.dtype != np.int64 and (arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"{name} must contain integer token ids, got dtype {arr.dtype}")
    if arr.min() < 0 or arr.max() >= vocab_size:
        bad = int(arr[(arr < 0) | (arr >= vocab_size)][0])
        raise ValueError(f"{name} contains id {bad}, outside [0, {vocab_size})")
    return arr.astype(np.int64)


def check_prompt(prompt: object, vocab_size: int) -> np.ndarray:
    """A decoder's prompt: a non-empty token array [n_prompt] (see :func:`check_tokens`)."""
    prompt = check_tokens(prompt, vocab_size, name="prompt")
    if prompt.size == 0:
        raise ValueError("prompt must contain at least one token")
    return prompt


def model_window(model: object, name: str) -> int | None:
    """The most tokens ``model`` can read in one call: its ``max_len`` attribute, else its
    ``config.max_len`` (a :class:`specdec_lite.models.transformer.TransformerModel` has 256 for
    the shipped GPT), else ``None`` for a model without a window (n-grams, tables).
    A window that is there but not an integer >= 1 raises, naming ``name.max_len``."""
    window = getattr(model, "max_len", None)
    if window is None:
        window = getattr(getattr(model, "config", None), "max_len", None)
    return None if window is None else check_int(window, f"{name}.max_len", 1)


def check_window(model: object, name: str, n_prompt: int, max_new_tokens: int,
                 n_read: int) -> None:
    """Refuse a run in which ``model`` would be asked to read ``n_read`` tokens in one
    call, more than its :func:`model_window`, before any work is done: ``ValueError``
    naming ``max_new_tokens`` and the numbers. ``n_read`` is what the decoder computed
    from ``n_prompt`` and ``max_new_tokens`` (the longest prefix it ever passes)."""
    window = model_window(model, name)
    if window is not None and n_read > window:
        raise ValueError(
            f"max_new_tokens: prompt ({n_prompt}) + max_new_tokens ({max_new_tokens}) means "
            f"{name} reads {n_read} tokens in its last call, more than its max_len {window}"
        )


def check_eos(eos_id: int | None, vocab_size: int) -> int | None:
    """``None`` (no end-of-sequence token), or a token id in [0, vocab_size)."""
    if eos_id is None:
        return None
    return check_int(eos_id, "eos_id", 0, vocab_size - 1)
