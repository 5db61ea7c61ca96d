"""specdec_lite: speculative decoding in small, readable numpy.

``import specdec_lite`` needs numpy only. Plotting (``specdec_lite.plots``),
widgets (``specdec_lite.widgets``) and training (``specdec_lite.train``) are
imported on their own.
"""

from .corpus import fit_ngrams, load_text
from .decode import Generation, Step, generate, speculative_generate
from .distributions import (
    apply_temperature,
    check_probs,
    entropy,
    sample,
    softmax,
    top_k_filter,
    top_p_filter,
    tv_distance,
)
from .models import MarkovModel, Model, NGramModel, TableModel
from .theory import acceptance_probability, expected_speedup, expected_tokens_per_step, optimal_k
from .tokenizer import CharTokenizer
from .verify import RULES, Verification, residual, verify

__all__ = [
    "RULES",
    "CharTokenizer",
    "Generation",
    "MarkovModel",
    "Model",
    "NGramModel",
    "Step",
    "TableModel",
    "Verification",
    "acceptance_probability",
    "apply_temperature",
    "check_probs",
    "entropy",
    "expected_speedup",
    "expected_tokens_per_step",
    "fit_ngrams",
    "generate",
    "load_text",
    "optimal_k",
    "residual",
    "sample",
    "softmax",
    "speculative_generate",
    "top_k_filter",
    "top_p_filter",
    "tv_distance",
    "verify",
]

__version__ = "0.1.0"
