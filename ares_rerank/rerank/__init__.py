"""Step scores -> choices: the reranker (:mod:`~ares_rerank.rerank.reranker`: ``score`` / ``rank`` / ``select``),
its records (:mod:`~ares_rerank.rerank.records`), final answers (:mod:`~ares_rerank.rerank.answers`) and votes
(:mod:`~ares_rerank.rerank.voting`), data set filters (:mod:`~ares_rerank.rerank.filters`), best-of-N sampling
(:mod:`~ares_rerank.rerank.best_of_n`), and the ``datasets`` fingerprint (:mod:`~ares_rerank.rerank.fingerprint`).

``from ares_rerank.rerank import AresReranker`` (its path before the package had rooms) keeps working.
"""

from __future__ import annotations

from .best_of_n import BestOfN, best_of_n
from .filters import AresFilter, filter_completions
from .records import message_text, rank_records
from .reranker import AresReranker, resolve_backbone


__all__ = [
    "AresFilter",
    "AresReranker",
    "BestOfN",
    "best_of_n",
    "filter_completions",
    "message_text",
    "rank_records",
    "resolve_backbone",
]
