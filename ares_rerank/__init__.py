"""ares-rerank: step-level soundness scores for LLM reasoning chains (ARES, arXiv 2507.12948).

Data flow, one room each: chain text -> :class:`Chain` (``chain.py``: claims) -> the ARES estimator (``estimator/``)
asking a backbone for entailment probabilities (``backbones/``) -> per-step scores (:class:`ChainScores`, through
:func:`score_chains` in ``scoring.py``) -> rerank (``rerank/``) / rewards (``rewards/``) / search (``search/``).
"""

from importlib.metadata import PackageNotFoundError, version

from .aggregate import AGGREGATES, aggregate_scores
from .backbones import Backbone, ChainBackbone, ClaimTreesOracle, FunctionBackbone, SelectingBackbone, load_backbone
from .backbones.demo import DemoBackboneWarning
from .chain import Chain, ChainScores, split_sentences, split_steps
from .estimator import AresConfig, sample_size
from .rerank import AresFilter, AresReranker, BestOfN, best_of_n, filter_completions
from .rewards import AresReward, AsyncAresReward
from .scoring import METHODS, score_chains


try:  # the installed distribution's version, one source of truth (pyproject.toml)
    __version__ = version("ares-rerank")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

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
