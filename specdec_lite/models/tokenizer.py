"""Character-level tokenizer.

Every character of ``alphabet`` gets one id, in order. Unknown characters are
an error by default: ``encode`` raises ``ValueError`` naming the character and
its position. Pass ``unk`` (a character that is in the alphabet) to map unknown
characters to that character's id instead; the mapping is then lossy and
``decode(encode(s)) != s`` for such strings.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

#: Newline followed by the 95 printable ASCII characters (space .. tilde).
ASCII_ALPHABET = "\n" + "".join(chr(c) for c in range(32, 127))


class CharTokenizer:
    """Map characters to integer ids and back."""

    def __init__(self, alphabet: str, unk: str | None = None) -> None:
        if not isinstance(alphabet, str) or not alphabet:
            raise ValueError("alphabet must be a non-empty string")
        if len(set(alphabet)) != len(alphabet):
            raise ValueError("alphabet must not repeat characters")
        if unk is not None and (not isinstance(unk, str) or len(unk) != 1 or unk not in alphabet):
            raise ValueError(f"unk must be one character of the alphabet, got {unk!r}")
        self.alphabet = alphabet
        self.unk = unk
        self._index = {ch: i for i, ch in enumerate(alphabet)}
        self._lookup = np.full(max(map(ord, alphabet)) + 1, -1, dtype=np.int64)  # codepoint -> id
        for ch, i in self._index.items():
            self._lookup[ord(ch)] = i

    @classmethod
    def ascii(cls, unk: str | None = None) -> CharTokenizer:
        """The 96-symbol tokenizer used by the bundled corpus and models."""
        return cls(ASCII_ALPHABET, unk=unk)

    @property
    def vocab_size(self) -> int:
        return len(self.alphabet)

    def encode(self, text: str) -> np.ndarray:
        """Return the ids of ``text`` as an int64 array of shape [len(text)]."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, got {type(text).__name__}")
        # surrogatepass: a lone surrogate is just another unknown character (or unk)
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)  # [n]
        in_table = codes < self._lookup.size
        ids = np.full(codes.shape, -1, dtype=np.int64)  # [n]
        ids[in_table] = self._lookup[codes[in_table]]
        unknown = np.flatnonzero(ids < 0)
        if unknown.size:
            if self.unk is None:
                pos = int(unknown[0])
                raise ValueError(
                    f"text contains {text[pos]!r} at position {pos}, "
                    "which is not in the tokenizer's alphabet"
                )
            ids[unknown] = self._index[self.unk]
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """Return the text for a sequence of ids."""
        ids = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids).ravel()
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"ids must be integers, got dtype {ids.dtype}")
        bad = (ids < 0) | (ids >= self.vocab_size)
        if bad.any():
            raise ValueError(
                f"id {int(ids[bad][0])} is out of range for vocab_size {self.vocab_size}"
            )
        return "".join(self.alphabet[i] for i in ids.tolist())
