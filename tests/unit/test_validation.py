"""Bad input gets a ValueError or TypeError whose message names the parameter.

One table: each row is (id, call, expected exception types, word the message must
contain). No row may produce an IndexError, a NaN or silence.
"""

from __future__ import annotations

import numpy as np
import pytest

from specdec_lite import MarkovModel, NGramModel, TableModel, generate, speculative_generate, verify

V = 4
GOOD = MarkovModel(np.random.default_rng(0).dirichlet(np.ones(V), size=V))
OTHER = MarkovModel(np.random.default_rng(1).dirichlet(np.ones(V), size=V))
ROW = np.full(V, 1 / V)


class BadModel:
    """A model whose probs() breaks the contract in one way."""

    vocab_size = V

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def probs(self, tokens):
        n = len(tokens)
        out = np.full((n, V), 1 / V)
        if self.kind == "nan":
            out[-1, 0] = np.nan
        elif self.kind == "negative":
            out[-1] = [1.5, -0.5, 0.0, 0.0]
        elif self.kind == "sum":
            out[-1] = [0.5, 0.1, 0.1, 0.1]
        elif self.kind == "rows":
            out = out[:1] if n > 1 else np.vstack([out, out])
        elif self.kind == "width":
            out = np.full((n, V + 1), 1 / (V + 1))
        elif self.kind == "1d":
            out = out[-1]
        elif self.kind == "inf":
            out[-1, 1] = np.inf
        return out


def spec(**overrides):
    kwargs = {
        "target": GOOD,
        "draft": OTHER,
        "prompt": [0, 1],
        "k": 3,
        "max_new_tokens": 8,
        "seed": 0,
    }
    kwargs.update(overrides)
    target, draft, prompt = kwargs.pop("target"), kwargs.pop("draft"), kwargs.pop("prompt")
    return lambda: speculative_generate(target, draft, prompt, **kwargs)


def plain(**overrides):
    kwargs = {"model": GOOD, "prompt": [0, 1], "max_new_tokens": 8, "seed": 0}
    kwargs.update(overrides)
    model, prompt = kwargs.pop("model"), kwargs.pop("prompt")
    return lambda: generate(model, prompt, **kwargs)


class NoProbs:
    vocab_size = V


class Windowed:
    """GOOD with a context window of ``max_len`` tokens, as a GPT has."""

    vocab_size = V

    def __init__(self, max_len: object) -> None:
        self.max_len = max_len

    def probs(self, tokens):
        return GOOD.probs(tokens)


NAN_ROW = np.array([np.nan, 0.5, 0.5, 0.0])


CASES = [
    # k
    ("k=0", spec(k=0), "k"),
    ("k=-1", spec(k=-1), "k"),
    ("k=True", spec(k=True), "k"),
    ("k=2.0", spec(k=2.0), "k"),
    ("k='2'", spec(k="2"), "k"),
    ("k=None", spec(k=None), "k"),
    # max_new_tokens
    ("max_new_tokens=-1", spec(max_new_tokens=-1), "max_new_tokens"),
    ("max_new_tokens=2.5", spec(max_new_tokens=2.5), "max_new_tokens"),
    ("max_new_tokens=True", spec(max_new_tokens=True), "max_new_tokens"),
    ("plain max_new_tokens=-1", plain(max_new_tokens=-1), "max_new_tokens"),
    ("max_new_tokens past the target's window", spec(target=Windowed(8)), "max_new_tokens"),
    ("max_new_tokens past the draft's window", spec(draft=Windowed(7)), "max_new_tokens"),
    ("plain max_new_tokens past the window", plain(model=Windowed(8)), "max_new_tokens"),
    ("window not an int", plain(model=Windowed(8.5)), "model.max_len"),
    # temperature
    ("temperature=-1", spec(temperature=-1.0), "temperature"),
    ("temperature=nan", spec(temperature=float("nan")), "temperature"),
    ("temperature=inf", spec(temperature=float("inf")), "temperature"),
    ("temperature='1'", spec(temperature="1"), "temperature"),
    ("plain temperature=nan", plain(temperature=float("nan")), "temperature"),
    ("plain temperature=-0.5", plain(temperature=-0.5), "temperature"),
    # vocabularies and models
    ("vocab mismatch", spec(draft=TableModel(np.full(V + 1, 1 / (V + 1)))), "vocab_size"),
    ("target without probs", spec(target=NoProbs()), "target"),
    ("draft without probs", spec(draft=NoProbs()), "draft"),
    ("model without probs", plain(model=NoProbs()), "model"),
    # prompt
    ("prompt id too large", spec(prompt=[0, V]), "prompt"),
    ("prompt id negative", spec(prompt=[-1, 0]), "prompt"),
    ("prompt empty", spec(prompt=[]), "prompt"),
    ("prompt 2-D", spec(prompt=[[0, 1]]), "prompt"),
    ("prompt floats", spec(prompt=[0.5, 1.0]), "prompt"),
    ("plain prompt id too large", plain(prompt=[9]), "prompt"),
    ("plain prompt empty", plain(prompt=np.zeros(0, dtype=int)), "prompt"),
    # eos
    ("eos_id too large", spec(eos_id=V), "eos_id"),
    ("eos_id negative", spec(eos_id=-1), "eos_id"),
    # rules
    ("unknown rule", spec(rule="fast"), "rule"),
    ("threshold without theta", spec(rule="threshold"), "theta"),
    ("theta=0", spec(rule="threshold", theta=0), "theta"),
    ("theta<0", spec(rule="threshold", theta=-1.0), "theta"),
    ("theta=nan", spec(rule="threshold", theta=float("nan")), "theta"),
    ("theta='1'", spec(rule="threshold", theta="1"), "theta"),
    ("eps=0", spec(rule="typical", eps=0.0), "eps"),
    ("delta<0", spec(rule="typical", delta=-0.3), "delta"),
    ("unknown param", spec(rule="exact", tau=1.0), "tau"),
    ("param for other rule", spec(rule="typical", theta=1.0), "theta"),
    # seed
    ("seed='abc'", spec(seed="abc"), "seed"),
    ("seed=1.5", spec(seed=1.5), "seed"),
    ("seed=-1", spec(seed=-1), "seed"),
    ("plain seed=[1]", plain(seed=[1]), "seed"),
    # verify directly
    (
        "verify unknown rule",
        lambda: verify([0], ROW[None], np.stack([ROW, ROW]), None, rule="x"),
        "rule",
    ),
    (
        "verify theta<=0",
        lambda: verify(
            [0],
            ROW[None],
            np.stack([ROW, ROW]),
            np.random.default_rng(0),
            rule="threshold",
            theta=0.0,
        ),
        "theta",
    ),
    (
        "verify shapes",
        lambda: verify([0, 1], ROW[None], np.stack([ROW, ROW]), np.random.default_rng(0)),
        "target_probs",
    ),
    (
        "verify float draft tokens",
        lambda: verify([0.0], ROW[None], np.stack([ROW, ROW]), 0),
        "draft_tokens",
    ),
    ("verify bool draft tokens", lambda: verify([True], ROW[None], np.stack([ROW, ROW]), 0),
     "draft_tokens"),
    ("verify NaN target row", lambda: verify([0], ROW[None], np.stack([ROW, NAN_ROW]), 0),
     "target_probs"),
    ("verify zero draft row", lambda: verify([0], np.zeros((1, V)), np.stack([ROW, ROW]), 0),
     "draft_probs"),
    ("verify rng='x'", lambda: verify([0], ROW[None], np.stack([ROW, ROW]), "x"), "rng"),
    # models
    ("NGramModel order", lambda: NGramModel(0, V), "order"),
    ("NGramModel vocab_size", lambda: NGramModel(2, 0), "vocab_size"),
    ("NGramModel smoothing", lambda: NGramModel(2, V, smoothing="kn"), "smoothing"),
    ("TableModel NaN", lambda: TableModel([np.nan, 1.0]), "table"),
    ("MarkovModel rows", lambda: MarkovModel(np.full((2, 2), 0.3)), "transition"),
]

for kind in ("nan", "inf", "negative", "sum", "rows", "width", "1d"):
    CASES.append((f"target {kind}", spec(target=BadModel(kind)), "target"))
    CASES.append((f"draft {kind}", spec(draft=BadModel(kind)), "draft"))
    CASES.append((f"plain model {kind}", plain(model=BadModel(kind)), "model"))


@pytest.mark.parametrize(("call", "name"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    assert not isinstance(info.value, IndexError)
    assert name in str(info.value), f"message {str(info.value)!r} does not name {name!r}"


def test_bad_models_fail_at_every_temperature():
    for temperature in (0.0, 0.5, 1.0):
        for kind in ("nan", "negative", "sum"):
            with pytest.raises(ValueError, match="target"):
                spec(target=BadModel(kind), temperature=temperature)()
