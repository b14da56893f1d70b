"""Keep completions whose ARES chain score passes a threshold, or the top-k per prompt (rejection sampling).

Works on plain lists (:meth:`AresFilter.keep_mask`, :func:`filter_completions`) and on ``datasets.Dataset``:

- flat rows ``{"prompt", "completion"}``: ``ds.filter(f, batched=True)`` keeps rows; ``ds.map(f.add_scores,
  batched=True)`` adds a score and a keep column. Top-k groups rows by prompt *within each batch*: give
  ``Dataset.filter`` a ``batch_size`` that holds all rows of a prompt (rows of a prompt next to each other).
- grouped rows ``{"prompt", "completions": [candidates]}``: ``ds.map(f.keep_candidates, batched=True)`` keeps the
  passing candidates of each row (and their scores).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from .aggregate import Aggregate, get_aggregate
from .rerank import AresReranker


__all__ = ["AresFilter", "filter_completions"]


class AresFilter:
    """Keep completions by chain score: ``score >= threshold`` and/or among the ``top_k`` of their prompt.

    Unscorable completions (empty, blank, not text, backbone error) are never kept. With both criteria a
    completion must pass the threshold and be among the best ``top_k`` of its prompt (ties: earlier row first).

    Args:
        reranker: The reranker that scores (its method, backbone and step splitting apply).
        threshold: Minimum chain score to keep, or ``None``; a finite number, in [0, 1] with a built-in aggregate
            (else a ValueError: NaN, inf or 5 would keep nothing or everything without a word).
        top_k: Keep at most this many completions per prompt, or ``None``.
        aggregate: Chain score (default: the reranker's).
        prompt_column, completion_column: Dataset columns read by ``__call__`` / ``add_scores`` /
            ``keep_candidates``.
        score_column, keep_column: Columns written by ``add_scores`` (``keep_candidates`` writes ``score_column``).
    """

    def __init__(
        self,
        reranker: AresReranker,
        threshold: float | None = None,
        top_k: int | None = None,
        aggregate: Aggregate | None = None,
        prompt_column: str = "prompt",
        completion_column: str = "completion",
        score_column: str = "ares_score",
        keep_column: str = "ares_keep",
    ) -> None:
        if not isinstance(reranker, AresReranker):
            raise TypeError(f"AresFilter(reranker=...) must be an AresReranker, got {type(reranker).__name__}.")
        if threshold is None and top_k is None:
            raise ValueError("AresFilter needs threshold=..., top_k=..., or both (e.g. threshold=0.5).")
        if threshold is not None:
            _check_threshold(threshold, aggregate if aggregate is not None else reranker.aggregate)
        if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1):
            raise ValueError(f"AresFilter(top_k={top_k!r}) must be a positive int or None.")
        if aggregate is not None:
            get_aggregate(aggregate)
        self.reranker = reranker
        self.threshold = None if threshold is None else float(threshold)
        self.top_k = top_k
        self.aggregate = aggregate
        self.prompt_column = prompt_column
        self.completion_column = completion_column
        self.score_column = score_column
        self.keep_column = keep_column

    def __repr__(self) -> str:
        return f"AresFilter(threshold={self.threshold}, top_k={self.top_k}, reranker={self.reranker!r})"

    # -- lists ----------------------------------------------------------------------------------------------------
    def scores(self, prompts: Sequence[Any], completions: Sequence[Any]) -> list[float | None]:
        """Chain score per (prompt, completion) pair, one estimator call; ``None`` where unscorable."""
        records = self.reranker.score_pairs(prompts, completions, aggregate=self.aggregate, on_error="none")
        return [r["score"] for r in records]

    def keep_mask(
        self, prompts: Sequence[Any], completions: Sequence[Any], scores: Sequence[float | None] | None = None
    ) -> list[bool]:
        """Which pairs to keep; ``scores`` (from :meth:`scores`) skips scoring when given."""
        scores = self.scores(prompts, completions) if scores is None else list(scores)
        keep = [s is not None and (self.threshold is None or s >= self.threshold) for s in scores]
        if self.top_k is None:
            return keep
        groups: dict[str, list[int]] = {}
        for i, prompt in enumerate(prompts):
            groups.setdefault(repr(prompt), []).append(i)  # repr: conversations (lists of dicts) are unhashable
        for rows in groups.values():
            passing = sorted((i for i in rows if keep[i]), key=lambda i: (-scores[i], i))
            for i in passing[self.top_k :]:
                keep[i] = False
        return keep

    # -- datasets -----------------------------------------------------------------------------------------------
    def _columns(self, batch: dict[str, list]) -> tuple[list, list]:
        for column in (self.prompt_column, self.completion_column):
            if column not in batch:
                raise ValueError(
                    f"AresFilter: the batch has no column {column!r} (columns: {sorted(batch)}); set "
                    "prompt_column= / completion_column=, and call Dataset.filter / map with batched=True."
                )
        return list(batch[self.prompt_column]), list(batch[self.completion_column])

    def __call__(self, batch: dict[str, list]) -> list[bool]:
        """For ``Dataset.filter(ares_filter, batched=True)``: one keep flag per row of the batch."""
        return self.keep_mask(*self._columns(batch))

    def add_scores(self, batch: dict[str, list]) -> dict[str, list]:
        """For ``Dataset.map(ares_filter.add_scores, batched=True)``: adds ``score_column`` and ``keep_column``."""
        prompts, completions = self._columns(batch)
        scores = self.scores(prompts, completions)
        return {self.score_column: scores, self.keep_column: self.keep_mask(prompts, completions, scores)}

    def keep_candidates(self, batch: dict[str, list]) -> dict[str, list]:
        """For grouped rows (``completion_column`` holds a list of candidates per prompt), with
        ``Dataset.map(..., batched=True)``: keeps the passing candidates of each row and writes their scores to
        ``score_column``. All rows of the batch are scored in one estimator call."""
        prompts, groups = self._columns(batch)
        for i, group in enumerate(groups):
            if isinstance(group, str) or not isinstance(group, (list, tuple)):
                raise TypeError(
                    f"AresFilter.keep_candidates: row {i} of column {self.completion_column!r} is "
                    f"{type(group).__name__}, expected a list of candidates; for one completion per row use "
                    "Dataset.filter(ares_filter, batched=True) or add_scores."
                )
        flat_prompts = [p for p, group in zip(prompts, groups) for _ in group]
        flat = [c for group in groups for c in group]
        flat_scores = self.scores(flat_prompts, flat)
        row_ids = [i for i, group in enumerate(groups) for _ in group]
        keep = self.keep_mask(row_ids, flat, flat_scores)  # row ids as the grouping key: top-k per row
        kept = {self.completion_column: [[] for _ in groups], self.score_column: [[] for _ in groups]}
        for row, candidate, score, ok in zip(row_ids, flat, flat_scores, keep):
            if ok:
                kept[self.completion_column][row].append(candidate)
                kept[self.score_column][row].append(score)
        return kept


def _check_threshold(threshold: Any, aggregate: Aggregate) -> None:
    """A finite number; in [0, 1] with a built-in aggregate (its scores lie there, so any other value keeps all or
    nothing). A callable aggregate may score on another scale: only finiteness is required then."""
    if not isinstance(threshold, (int, float)) or isinstance(threshold, bool):
        raise TypeError(f"AresFilter(threshold={threshold!r}) must be a float or None.")
    if not math.isfinite(threshold):
        raise ValueError(
            f"AresFilter(threshold={threshold!r}) must be a finite number (NaN or inf keeps nothing or everything): "
            "e.g. threshold=0.5, or threshold=None to keep by top_k alone."
        )
    if isinstance(aggregate, str) and not 0.0 <= threshold <= 1.0:
        raise ValueError(
            f"AresFilter(threshold={threshold!r}) is outside [0, 1], where chain scores with aggregate={aggregate!r} "
            "lie (it would keep nothing or everything): pass a threshold in [0, 1], e.g. 0.5."
        )


def filter_completions(
    reranker: AresReranker,
    prompts: Sequence[Any],
    completions: Sequence[Any],
    threshold: float | None = None,
    top_k: int | None = None,
    aggregate: Aggregate | None = None,
) -> list[dict[str, Any]]:
    """The kept pairs of two aligned lists, as ``{"index", "prompt", "completion", "score"}`` records in input order.

    See :class:`AresFilter` for the rules.
    """
    ares_filter = AresFilter(reranker, threshold=threshold, top_k=top_k, aggregate=aggregate)
    scores = ares_filter.scores(prompts, completions)
    keep = ares_filter.keep_mask(prompts, completions, scores)
    return [
        {"index": i, "prompt": p, "completion": c, "score": s}
        for i, (p, c, s, ok) in enumerate(zip(prompts, completions, scores, keep))
        if ok
    ]
