"""specdec_lite: speculative decoding in small, readable numpy.

``import specdec_lite`` needs numpy only. Plotting (``specdec_lite.plots``),
widgets (``specdec_lite.teaching.widgets``), training (``specdec_lite.training.train``), metrics
(``specdec_lite.engine.telemetry``), the journal (``specdec_lite.engine.journal``), the HTTP
service (``specdec_lite.service``) and the transformers bridge (``specdec_lite.hf.bridge``)
are imported on their own, with their extras.
"""

from .drafting.draft_length import AdaptiveK, AutoK, FixedK, StepCosts, TheoryK
from .drafting.eagle import EagleDraft
from .drafting.medusa import (
    MedusaHeads,
    Tree,
    chain_tree,
    dense_tree,
    make_tree,
    sparse_tree,
)
from .drafting.proposers import Draft, ModelDraft, PromptLookup
from .engine.batch import BatchEngine
from .engine.batch_generate import generate_batch, speculative_generate_batch
from .engine.breaker import CircuitBreaker
from .engine.decode import generate, speculative_generate
from .engine.medusa_decode import medusa_generate
from .engine.resilient import resilient_generate
from .engine.trace import Generation, Step
from .models.corpus import fit_ngrams, load_text
from .models.ngram import FastModel, MarkovModel, Model, NGramModel, TableModel
from .models.tokenizer import CharTokenizer
from .models.transformer import TransformerConfig, TransformerModel
from .pretrained import Pretrained, load_early_exit, load_pretrained
from .rules.distributions import (
    apply_temperature,
    check_probs,
    entropy,
    sample,
    softmax,
    top_k_filter,
    top_p_filter,
    tv_distance,
)
from .rules.theory import (
    acceptance_probability,
    expected_speedup,
    expected_tokens_per_step,
    optimal_k,
)
from .rules.verify import RULES, Verification, residual, verify

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
