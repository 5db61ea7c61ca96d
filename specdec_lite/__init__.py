"""specdec_lite: speculative decoding in small, readable numpy.

``import specdec_lite`` needs numpy only. Plotting (``specdec_lite.plots``),
widgets (``specdec_lite.widgets``), training (``specdec_lite.train``), metrics
(``specdec_lite.telemetry``), the journal (``specdec_lite.journal``), the HTTP
service (``specdec_lite.service``) and the transformers bridge (``specdec_lite.hf``)
are imported on their own, with their extras.
"""

from .batch import BatchEngine
from .batch_generate import generate_batch, speculative_generate_batch
from .breaker import CircuitBreaker
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
from .draft_length import AdaptiveK, AutoK, FixedK, StepCosts, TheoryK
from .eagle import EagleDraft
from .medusa import (
    MedusaHeads,
    Tree,
    chain_tree,
    dense_tree,
    make_tree,
    sparse_tree,
)
from .medusa_decode import medusa_generate
from .models import FastModel, MarkovModel, Model, NGramModel, TableModel
from .pretrained import Pretrained, load_early_exit, load_pretrained
from .proposers import Draft, ModelDraft, PromptLookup
from .resilient import resilient_generate
from .theory import acceptance_probability, expected_speedup, expected_tokens_per_step, optimal_k
from .tokenizer import CharTokenizer
from .transformer import TransformerConfig, TransformerModel
from .verify import RULES, Verification, residual, verify

__all__ = [
    "RULES",
    "AdaptiveK",
    "AutoK",
    "BatchEngine",
    "CircuitBreaker",
    "CharTokenizer",
    "Draft",
    "EagleDraft",
    "FixedK",
    "FastModel",
    "Generation",
    "MarkovModel",
    "MedusaHeads",
    "Model",
    "ModelDraft",
    "NGramModel",
    "Pretrained",
    "PromptLookup",
    "Step",
    "StepCosts",
    "TableModel",
    "TheoryK",
    "TransformerConfig",
    "TransformerModel",
    "Tree",
    "Verification",
    "acceptance_probability",
    "apply_temperature",
    "chain_tree",
    "check_probs",
    "dense_tree",
    "entropy",
    "expected_speedup",
    "expected_tokens_per_step",
    "fit_ngrams",
    "generate",
    "generate_batch",
    "load_early_exit",
    "load_pretrained",
    "load_text",
    "make_tree",
    "medusa_generate",
    "optimal_k",
    "residual",
    "resilient_generate",
    "sample",
    "softmax",
    "sparse_tree",
    "speculative_generate",
    "speculative_generate_batch",
    "top_k_filter",
    "top_p_filter",
    "tv_distance",
    "verify",
]

__version__ = "0.1.0"
