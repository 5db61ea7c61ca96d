"""A SpecDec++-style stop: draft until the predicted chance of a rejection is too high.

SpecDec++ (Huang, Guo and Wang 2024) treats the draft length as a sequential decision and
shows the best rule is a threshold: keep drafting while the probability that every token
drafted so far will be accepted stays above 1 - h; stop as soon as the chance that at
least one of them is rejected exceeds h. It needs, for each drafted token x_i, a
prediction a_i of the chance that the target accepts it, and it gets that from a small
head trained on the target's verdicts.

:class:`AcceptanceHead` is that head at its smallest: a logistic regression over three
numbers read off the row q_i the token was drawn from (SpecDec++ reads the draft's
hidden state with a small network; the row is what every proposer here has):

* log q_i(x_i), how likely the draft thought its own token;
* log max q_i, how sure the draft was of anything;
* H(q_i) / log V, the row's entropy as a fraction of the most it can be.

a_i = sigmoid(w · features + b). The drafting stops after token i when
1 - a_1 ⋯ a_i > ``max_risk``. The decision reads only the rows and tokens drafted so far,
so the exact rule stays exact (chapter 11's theorem): a stop changes how many tokens are
checked, never the law of what is emitted.

:func:`fit_head` fits w and b by Newton's method on soft labels: for a token drawn from
q at temperature 1, the chance the exact rule accepts it is min(1, p(x) / q(x)), known
once the target's row p is known. :mod:`specdec_lite.training.fit_stop_head` collects
those labels for the shipped pair and writes the head into the weights' manifest.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..checks import check_real

FEATURES = ("log_q_token", "log_q_max", "entropy_fraction")
FLOOR = 1e-12  # the smallest probability the features take the log of
MAX_RISK = 0.5  # the default threshold h of the "specdec++" policy
WEIGHTS = Path(__file__).parents[1] / "weights"  # the package's shipped weights


def features(rows: np.ndarray, tokens: np.ndarray) -> np.ndarray:  # [m, V], [m] -> [m, 3]
    """The head's inputs (:data:`FEATURES`) for tokens ``tokens`` drawn from ``rows``."""
    rows = np.asarray(rows, dtype=np.float64)
    tokens = np.asarray(tokens, dtype=np.int64)
    picked = rows[np.arange(len(tokens)), tokens]  # [m]
    safe = np.maximum(rows, FLOOR)  # [m, V]
    entropy = -(rows * np.log(safe)).sum(axis=1)  # [m]
    return np.stack([np.log(np.maximum(picked, FLOOR)), np.log(safe.max(axis=1)),
                     entropy / np.log(rows.shape[1])], axis=1)


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic function, without overflow


@dataclass(frozen=True)
class AcceptanceHead:
    """Predicts the chance that the target accepts a drafted token from the row it was
    drawn from: sigmoid(``weights`` · :func:`features` + ``bias``)."""

    weights: tuple[float, float, float]
    bias: float

    def __post_init__(self) -> None:
        if not isinstance(self.weights, tuple) or len(self.weights) != len(FEATURES):
            raise ValueError(f"weights must be a tuple of {len(FEATURES)} numbers "
                             f"({', '.join(FEATURES)}), got {self.weights!r}")
        for i, w in enumerate(self.weights):
            check_real(w, f"weights[{i}]")
        check_real(self.bias, "bias")

    def accept_chance(self, rows: np.ndarray, tokens: np.ndarray) -> np.ndarray:  # [m]
        """The predicted chance a_i that each token in ``tokens`` [m] is accepted."""
        return self.predict(features(rows, tokens))

    def predict(self, x: np.ndarray) -> np.ndarray:  # [m, 3] -> [m]
        """The predicted chance for tokens whose :func:`features` are ``x``."""
        return sigmoid(np.asarray(x) @ np.asarray(self.weights) + self.bias)

    def record(self) -> dict:
        """The head as JSON-friendly data; :meth:`from_record` reads it back."""
        return {"features": list(FEATURES), "weights": list(self.weights), "bias": self.bias}

    @classmethod
    def from_record(cls, record: object) -> AcceptanceHead:
        """The head :meth:`record` wrote; anything else raises ``ValueError``."""
        if not isinstance(record, dict) or record.get("features") != list(FEATURES):
            raise ValueError(f"a stop head record must name the features {list(FEATURES)}: "
                             f"{record!r:.80}")
        weights = record.get("weights")
        if not isinstance(weights, list):
            raise ValueError(f"a stop head record needs a list of weights: {record!r:.80}")
        return cls(tuple(float(w) for w in weights), float(record.get("bias", np.nan)))


def fit_head(x: np.ndarray, y: np.ndarray, *, ridge: float = 1e-3,
             steps: int = 50) -> AcceptanceHead:
    """The logistic regression of soft labels ``y`` [m] in [0, 1] on ``x`` [m, 3]
    (:func:`features`), by Newton's method on the mean cross-entropy plus ``ridge`` times
    the squared weights (the bias is not penalised)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(FEATURES) or len(y) != len(x) or len(x) == 0:
        raise ValueError(f"x must be [m, {len(FEATURES)}] and y [m] with m > 0, got "
                         f"{x.shape} and {y.shape}")
    if not ((y >= 0) & (y <= 1)).all():
        raise ValueError("y must lie in [0, 1]")
    design = np.hstack([x, np.ones((len(x), 1))])  # [m, 4]
    penalty = np.diag([ridge] * len(FEATURES) + [0.0])  # [4, 4]
    theta = np.zeros(design.shape[1])  # [4]
    for _ in range(steps):
        a = sigmoid(design @ theta)  # [m]
        gradient = design.T @ (a - y) / len(y) + penalty @ theta  # [4]
        curvature = (design * (a * (1 - a))[:, None]).T @ design / len(y) + penalty
        step = np.linalg.solve(curvature + 1e-9 * np.eye(len(theta)), gradient)
        theta -= step
        if np.abs(step).max() < 1e-10:
            break
    return AcceptanceHead(tuple(float(t) for t in theta[:-1]), float(theta[-1]))


@dataclass(frozen=True)
class RiskStop:
    """The SpecDec++ stop: drafting goes on while the predicted chance that some token of
    the step is rejected, 1 - a_1 ⋯ a_i (``head`` predicts each a_i), is at most
    ``max_risk`` (their threshold h)."""

    head: AcceptanceHead
    max_risk: float

    def __post_init__(self) -> None:
        if not isinstance(self.head, AcceptanceHead):
            raise TypeError(f"head must be an AcceptanceHead, got {type(self.head).__name__}")
        if not 0 < check_real(self.max_risk, "max_risk", positive=True) < 1:
            raise ValueError(f"max_risk must be in (0, 1), got {self.max_risk}")

    def accept_chance(self, row: np.ndarray, token: int) -> float:
        """a_i for ``token`` drawn from ``row`` [V] (:meth:`AcceptanceHead.accept_chance`
        for one row, in fewer numpy calls: the drafting loop asks once per token)."""
        safe = np.maximum(row, FLOOR)  # [V]
        entropy = -float(row @ np.log(safe)) / np.log(len(row))
        w0, w1, w2 = self.head.weights
        z = (w0 * np.log(max(float(row[token]), FLOOR)) + w1 * np.log(float(safe.max()))
             + w2 * entropy + self.head.bias)
        return float(0.5 * (1.0 + np.tanh(0.5 * z)))

    def keeps_drafting(self, chance: float) -> bool:
        """Whether to draft another token after tokens whose a_i multiply to ``chance``."""
        return 1.0 - chance <= self.max_risk

    def record(self) -> dict:
        return {"max_risk": self.max_risk, "head": self.head.record()}

    @classmethod
    def from_record(cls, record: object) -> RiskStop:
        """The stop :meth:`record` wrote; a bad record raises ``ValueError``."""
        if not isinstance(record, dict) or "max_risk" not in record:
            raise ValueError(f"a risk stop record needs max_risk and head: {record!r:.80}")
        return cls(AcceptanceHead.from_record(record.get("head")), record["max_risk"])


@functools.cache
def shipped_head(weights_dir: Path = WEIGHTS) -> AcceptanceHead:
    """The head fitted for the shipped draft and target
    (:mod:`specdec_lite.training.fit_stop_head`), checked against the sha256 the weights'
    manifest records for it; ``ValueError`` naming the file if it differs."""
    entry = json.loads((weights_dir / "manifest.json").read_text()).get("stop_head")
    if not isinstance(entry, dict) or not {"file", "sha256"} <= set(entry):
        raise ValueError(f"{weights_dir / 'manifest.json'} lacks stop_head.file and .sha256")
    data = (weights_dir / entry["file"]).read_bytes()
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ValueError(f"{weights_dir / entry['file']} does not match its sha256 in the "
                         "manifest")
    return AcceptanceHead.from_record(json.loads(data))


__all__ = ["FEATURES", "MAX_RISK", "AcceptanceHead", "RiskStop", "features", "fit_head",
           "shipped_head"]
