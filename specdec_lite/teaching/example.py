"""The book's running example: one prompt, and the two model pairs that continue it.

Every chapter starts from the same line of Python, ``PROMPT``. Chapters 1-3 continue it
with the counted n-gram pair (cheap to fit, easy to reason about); chapters 4 onwards
with the shipped GPT pair (a distilled 1-layer draft for a 5-layer target). Both pairs
share one character tokenizer, so the same prompt ids feed either.
"""

from __future__ import annotations

import numpy as np

PROMPT = "    def __init__(self"
TARGET_ORDER = 5  # the n-gram target looks at the last 4 characters
DRAFT_ORDER = 3  # the n-gram draft looks at the last 2


def ngram_pair() -> tuple:
    """``(tokenizer, target, draft)``: the 5-gram target and 3-gram draft, fitted on the
    training split (about a second)."""
    from ..models.corpus import fit_ngrams

    return fit_ngrams(target_order=TARGET_ORDER, draft_order=DRAFT_ORDER)


def gpt_pair() -> tuple:
    """``(tokenizer, target, draft)``: the shipped GPT target and its distilled draft."""
    from ..pretrained import load_pretrained

    shipped = load_pretrained()
    return shipped.tokenizer, shipped.target, shipped.draft


def prompt_ids(tokenizer) -> np.ndarray:
    """``PROMPT`` encoded with ``tokenizer``: [n_prompt]."""
    return tokenizer.encode(PROMPT)
