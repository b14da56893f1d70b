"""ares-rerank: step-level soundness scores for LLM reasoning chains (ARES, arXiv 2507.12948).

Data flow: chain text -> :class:`Chain` (claims) -> backbone (entailment probabilities) -> ARES estimator
(:func:`score_chains`) -> per-step scores (:class:`ChainScores`) -> rerank / reward.
"""

from .backbones import Backbone, ChainBackbone, ClaimTreesOracle, FunctionBackbone, SelectingBackbone, load_backbone
from .chain import Chain, ChainScores, split_sentences, split_steps
from .estimator import AresConfig, sample_size
from .scoring import METHODS, score_chains


__version__ = "0.1.0"

__all__ = [
    "METHODS",
    "AresConfig",
    "Backbone",
    "Chain",
    "ChainBackbone",
    "ChainScores",
    "ClaimTreesOracle",
    "FunctionBackbone",
    "SelectingBackbone",
    "__version__",
    "load_backbone",
    "sample_size",
    "score_chains",
    "split_sentences",
    "split_steps",
]
