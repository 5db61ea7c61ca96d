"""CharTokenizer and the bundled corpus."""

from __future__ import annotations

import numpy as np
import pytest

from specdec_lite import CharTokenizer, load_text
from specdec_lite.models.corpus import manifest
from specdec_lite.models.tokenizer import ASCII_ALPHABET


def test_ascii_alphabet():
    tok = CharTokenizer.ascii()
    assert tok.vocab_size == 96 == len(ASCII_ALPHABET)
    assert tok.encode("\n").tolist() == [0] and tok.encode(" ").tolist() == [1]
    assert tok.encode("~").tolist() == [95]
    text = "".join(ASCII_ALPHABET)
    assert tok.encode(text).tolist() == list(range(96))


@pytest.mark.parametrize("text", ["", "a", "def f(x):\n    return x ** 2  # ~!\n", "\n\n  \n"])
def test_round_trip(text):
    tok = CharTokenizer.ascii()
    ids = tok.encode(text)
    assert ids.dtype == np.int64 and ids.shape == (len(text),)
    assert tok.decode(ids) == text
    assert tok.decode(ids.tolist()) == text


def test_round_trip_on_corpus_slice():
    tok = CharTokenizer.ascii()
    text = load_text("heldout")[:20000]
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert ids.min() >= 0 and ids.max() < tok.vocab_size


def test_custom_alphabet_brute_force():
    tok = CharTokenizer("cab")
    assert tok.encode("abcab").tolist() == ["cab".index(c) for c in "abcab"]
    assert tok.decode([2, 1, 0]) == "bac"


@pytest.mark.parametrize(
    ("text", "char", "pos"),
    [
        ("abc\tdef", "\\t", 3),
        ("é", "é", 0),
        ("ok 🙂 ok", "🙂", 3),
        ("x\u2028", "\\u2028", 1),
        ("ab\ud800", "\\ud800", 2),
    ],
)
def test_unknown_character_error_names_char_and_position(text, char, pos):
    tok = CharTokenizer.ascii()
    with pytest.raises(ValueError) as info:
        tok.encode(text)
    msg = str(info.value)
    assert char in msg and f"position {pos}" in msg, msg


def test_unk_maps_unknown_characters():
    tok = CharTokenizer.ascii(unk="?")
    q = tok.encode("?")[0]
    ids = tok.encode("a\tb🙂\ud800")
    assert ids.tolist() == [tok.encode("a")[0], q, tok.encode("b")[0], q, q]
    assert tok.decode(ids) == "a?b??"  # lossy by design


def test_tokenizer_errors():
    with pytest.raises(ValueError, match="alphabet"):
        CharTokenizer("")
    with pytest.raises(ValueError, match="alphabet"):
        CharTokenizer("aba")
    with pytest.raises(ValueError, match="unk"):
        CharTokenizer("ab", unk="c")
    with pytest.raises(ValueError, match="unk"):
        CharTokenizer("ab", unk="ab")
    tok = CharTokenizer("ab")
    with pytest.raises(TypeError, match="text"):
        tok.encode(b"ab")
    with pytest.raises(ValueError, match="out of range"):
        tok.decode([0, 2])
    with pytest.raises(ValueError, match="out of range"):
        tok.decode([-1])
    with pytest.raises(TypeError, match="ids"):
        tok.decode([0.5])
    assert tok.decode([]) == ""


def test_corpus_splits():
    assert set(manifest()["files"]) >= {"stdlib_train.txt.gz", "stdlib_heldout.txt.gz"}
    with pytest.raises(ValueError, match="split"):
        load_text("test")
