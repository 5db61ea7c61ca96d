"""The bundled corpus: Python standard-library source, with provenance.

See ``data/corpus_manifest.json`` for the exact module list, Python version and
checksums, and ``data/PYTHON_LICENSE.txt`` for the PSF licence. The files are
rebuilt by ``scripts/build_corpus.py``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from importlib import resources

SPLITS = ("train", "heldout")


def _data_file(name: str):
    return resources.files("specdec_lite") / "data" / name


def manifest() -> dict:
    """The corpus manifest: source, licence, split rule and per-file checksums."""
    return json.loads(_data_file("corpus_manifest.json").read_text())


def load_text(split: str = "train") -> str:
    """Return the ``"train"`` or ``"heldout"`` split as one string, checksum-verified."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    name = f"stdlib_{split}.txt.gz"
    data = gzip.decompress(_data_file(name).read_bytes())
    expected = manifest()["files"][name]["sha256_of_text"]
    if hashlib.sha256(data).hexdigest() != expected:
        raise ValueError(f"corpus file {name} does not match its sha256 in corpus_manifest.json")
    return data.decode("ascii")


def fit_ngrams(target_order: int = 5, draft_order: int = 3) -> tuple:
    """Fit the book's n-gram target and draft on the training split.

    Returns ``(tokenizer, target, draft)``: ``CharTokenizer.ascii()`` and two
    Witten–Bell ``NGramModel``s. Takes about a second.
    """
    from .ngram import NGramModel
    from .tokenizer import CharTokenizer

    tokenizer = CharTokenizer.ascii()
    ids = tokenizer.encode(load_text("train"))
    target = NGramModel(target_order, tokenizer.vocab_size).fit(ids)
    draft = NGramModel(draft_order, tokenizer.vocab_size).fit(ids)
    return tokenizer, target, draft

