"""ares-rerank: step-level soundness scores for LLM reasoning chains (ARES, arXiv 2507.12948).

Data flow: chain text -> :class:`Chain` (claims) -> backbone (entailment probabilities) -> ARES estimator
(:func:`score_chains`) -> per-step scores (:class:`ChainScores`) -> rerank / reward.
"""

from .aggregate import AGGREGATES, aggregate_scores
from .backbones import Backbone, ChainBackbone, ClaimTreesOracle, FunctionBackbone, SelectingBackbone, load_backbone
from .chain import Chain, ChainScores, split_sentences, split_steps
from .domain import DemoBackboneWarning
from .config import AresConfig, sample_size
from .filters import AresFilter, filter_completions
from .generation import BestOfN, best_of_n
from .rerank import AresReranker
from .rewards import AresReward, AsyncAresReward
from .scoring import METHODS, score_chains


__version__ = "0.1.0"

__all__ = [
    "AGGREGATES",
    "METHODS",
    "AresConfig",
    "AresFilter",
    "AresReranker",
    "AresReward",
    "AsyncAresReward",
    "Backbone",
    "BestOfN",
    "Chain",
    "ChainBackbone",
    "ChainScores",
    "ClaimTreesOracle",
    "DemoBackboneWarning",
    "FunctionBackbone",
    "SelectingBackbone",
    "__version__",
    "aggregate_scores",
    "best_of_n",
    "filter_completions",
    "load_backbone",
    "sample_size",
    "score_chains",
    "split_sentences",
    "split_steps",
]
