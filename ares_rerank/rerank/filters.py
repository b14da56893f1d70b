"""Keep completions whose ARES chain score passes a threshold, or the top-k per prompt (rejection sampling).

Works on plain lists (:meth:`AresFilter.keep_mask`, :func:`filter_completions`) and on ``datasets.Dataset``:

- ``ares_filter.filter_dataset(ds)``: correct for any dataset, batch size, row order and ``num_proc``: one
  ``Dataset.map`` adds a score per row, then the threshold and the top-k per prompt are applied over the whole
  dataset (two passes).
- flat rows ``{"prompt", "completion"}``: ``ds.filter(ares_filter)`` keeps rows, with or without ``batched=True``
  (datasets' default is one row per call: correct, but one estimator call per row; ``batched=True`` scores a batch
  per call). ``ds.map(ares_filter.add_scores, batched=True)`` adds a score and a keep column.
  With ``top_k``, ``Dataset.filter`` / ``map`` see ``batch_size`` rows at a time, so every prompt's rows must lie in
  one batch: they must be next to each other, and a prompt whose rows continue from the previous batch is an error
  naming the fixes (``group_size=`` with a ``batch_size`` that is a multiple of it, checked per batch, also under
  ``num_proc``; ``batch_size=None``; or ``filter_dataset``). Without ``batched=True``, ``top_k`` is an error.
- grouped rows ``{"prompt", "completions": [candidates]}``: ``ds.map(f.keep_candidates, batched=True)`` keeps the
  passing candidates of each row (and their scores), whatever the batch borders.

Filters hash cheaply for datasets' cache (:mod:`~ares_rerank.rerank.fingerprint`: no model weights are pickled) and stay
picklable for ``num_proc``.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from . import fingerprint
from ..aggregate import Aggregate, get_aggregate
from ..utils.checks import check_positive_int, is_finite_number, is_number
from .reranker import AresReranker


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
            ``keep_candidates`` / ``filter_dataset``.
        score_column, keep_column: Columns written by ``add_scores`` (``keep_candidates`` and ``filter_dataset``
            write ``score_column``).
        group_size: With ``top_k`` on flat rows: every prompt has exactly this many rows, next to each other (as
            TRL and ``best_of_n`` write them). Each batch is then checked to hold whole groups, so ``Dataset.filter``
            with a ``batch_size`` that is a multiple of ``group_size`` is correct whatever the batch borders, also
            with ``num_proc``.
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
        group_size: int | None = None,
    ) -> None:
        if not isinstance(reranker, AresReranker):
            raise TypeError(f"AresFilter(reranker=...) must be an AresReranker, got {type(reranker).__name__}.")
        if threshold is None and top_k is None:
            raise ValueError("AresFilter needs threshold=..., top_k=..., or both (e.g. threshold=0.5).")
        if threshold is not None:
            _check_threshold(threshold, aggregate if aggregate is not None else reranker.aggregate)
        for name, value in (("top_k", top_k), ("group_size", group_size)):
            check_positive_int(value, f"AresFilter({name}", allow_none=True)
        if aggregate is not None:
            get_aggregate(aggregate)
        columns = {"prompt_column": prompt_column, "completion_column": completion_column,
                   "score_column": score_column, "keep_column": keep_column}
        if len(set(columns.values())) < len(columns):  # score_column="completion" replaced the texts with scores
            raise ValueError(f"AresFilter column names {columns} must differ: the scores would overwrite a column "
                             "the filter reads (or each other).")
        self.reranker = reranker
        self.threshold = None if threshold is None else float(threshold)
        self.top_k = None if top_k is None else int(top_k)
        self.aggregate = aggregate
        self.prompt_column = prompt_column
        self.completion_column = completion_column
        self.score_column = score_column
        self.keep_column = keep_column
        self.group_size = group_size
        self._borders = _BatchBorders()
        self._pid = os.getpid()  # a copy in another process is a datasets worker (num_proc > 1): it sees one shard
        fingerprint.register(type(self), import_datasets=True)
        fingerprint.register(type(reranker), import_datasets=True)

    def __repr__(self) -> str:
        return f"AresFilter(threshold={self.threshold}, top_k={self.top_k}, reranker={self.reranker!r})"

    # -- lists ----------------------------------------------------------------------------------------------------
    def scores(
        self, prompts: Sequence[Any], completions: Sequence[Any], *, show_progress_bar: bool | None = None
    ) -> list[float | None]:
        """Chain score per (prompt, completion) pair; ``None`` where unscorable."""
        records = self.reranker.score_pairs(prompts, completions, aggregate=self.aggregate, on_error="none",
                                            show_progress_bar=show_progress_bar)
        return [r["score"] for r in records]

    def keep_mask(
        self, prompts: Sequence[Any], completions: Sequence[Any], scores: Sequence[float | None] | None = None
    ) -> list[bool]:
        """Which pairs to keep; ``scores`` (from :meth:`scores`: one number in [0, 1] or ``None`` per pair) skips
        scoring when given."""
        if scores is None:
            return self._keep(prompts, self.scores(prompts, completions))
        scores = list(scores)
        if not len(scores) == len(prompts) == len(completions):
            raise ValueError(f"AresFilter.keep_mask: {len(scores)} scores for {len(prompts)} prompts and "
                             f"{len(completions)} completions: pass one score (or None) per pair, as scores() returns.")
        for i, score in enumerate(scores):
            if score is not None and not (is_number(score) and 0.0 <= score <= 1.0):
                raise ValueError(f"AresFilter.keep_mask: scores[{i}]={score!r} must be a number in [0, 1] or None "
                                 "(unscored), as scores() returns.")
        return self._keep(prompts, scores)

    def _keep(self, prompts: Sequence[Any], scores: Sequence[float | None]) -> list[bool]:
        keep = [s is not None and (self.threshold is None or s >= self.threshold) for s in scores]
        if self.top_k is None:
            return keep
        groups: dict[str, list[int]] = {}
        for i, prompt in enumerate(prompts):
            groups.setdefault(_key(prompt), []).append(i)
        for rows in groups.values():
            passing = sorted((i for i in rows if keep[i]), key=lambda i: (-scores[i], i))
            for i in passing[self.top_k :]:
                keep[i] = False
        return keep

    # -- datasets -----------------------------------------------------------------------------------------------
    def _columns(self, batch: dict[str, Any]) -> tuple[list, list, bool]:
        """The prompt and completion columns as lists, and whether datasets passed one row (``batched=False``)."""
        for column in (self.prompt_column, self.completion_column):
            if column not in batch:
                raise ValueError(
                    f"AresFilter: the batch has no column {column!r} (columns: {sorted(batch)}); set "
                    "prompt_column= / completion_column=."
                )
        prompts, completions = batch[self.prompt_column], batch[self.completion_column]
        if _is_one_prompt(prompts):
            return [prompts], [completions], True
        if not isinstance(completions, list) or len(completions) != len(prompts):
            raise ValueError(
                f"AresFilter: column {self.prompt_column!r} holds a batch of {len(prompts)} prompts but "
                f"{self.completion_column!r} is not a list of as many completions; call Dataset.filter / map with "
                "batched=True on flat rows (one completion per row)."
            )
        return list(prompts), list(completions), False

    def _batch_keep(self, prompts: list, scores: list[float | None], one_row: bool) -> list[bool]:
        if self.top_k is not None and one_row:
            raise ValueError(
                f"AresFilter(top_k={self.top_k}) needs all rows of a prompt at once, but datasets passed one row "
                "(Dataset.filter / map without batched=True): call ds.filter(ares_filter, batched=True, "
                "batch_size=...) on rows grouped by prompt (see group_size=), or ares_filter.filter_dataset(ds), "
                "which is correct for any batch size and row order."
            )
        if self.top_k is not None:
            keys = [_key(p) for p in prompts]
            _check_whole_groups(keys, self.group_size, self.top_k)
            if self.group_size is None and os.getpid() != self._pid:
                raise ValueError(
                    f"AresFilter(top_k={self.top_k}) runs in a datasets worker process (num_proc > 1), which sees one "
                    "shard: a prompt whose rows are split between two shards would get a top-k in each. Pass "
                    "group_size= (rows per prompt, whole groups per batch), use num_proc=1, or "
                    "ares_filter.filter_dataset(ds, num_proc=...), which groups rows by prompt first."
                )
            if self.group_size is None:
                self._borders.check(keys, self.top_k)
        return self._keep(prompts, scores)

    def __call__(self, batch: dict[str, Any]) -> list[bool] | bool:
        """For ``Dataset.filter(ares_filter)``: one keep flag per row of the batch (``batched=True``), or one flag
        for one row (datasets' default, threshold only)."""
        prompts, completions, one_row = self._columns(batch)
        scores = self.scores(prompts, completions, show_progress_bar=False)
        keep = self._batch_keep(prompts, scores, one_row)
        return keep[0] if one_row else keep

    def add_scores(self, batch: dict[str, Any]) -> dict[str, Any]:
        """For ``Dataset.map(ares_filter.add_scores, batched=True)``: adds ``score_column`` and ``keep_column``
        (one row at a time without ``batched=True``, threshold only)."""
        prompts, completions, one_row = self._columns(batch)
        scores = self.scores(prompts, completions, show_progress_bar=False)
        keep = self._batch_keep(prompts, scores, one_row)
        if one_row:
            return {self.score_column: scores[0], self.keep_column: keep[0]}
        return {self.score_column: scores, self.keep_column: keep}

    def _score_rows(self, batch: dict[str, list]) -> dict[str, list]:
        prompts, completions, _ = self._columns(batch)
        return {self.score_column: self.scores(prompts, completions, show_progress_bar=False)}

    def filter_dataset(
        self, dataset: Any, *, batch_size: int = 256, num_proc: int | None = None, keep_scores: bool = False
    ) -> Any:
        """The kept rows of a ``datasets.Dataset``, in order; correct for any row order, batch size and
        ``num_proc``.

        Two passes: ``Dataset.map`` scores every row (``batch_size`` rows per call, ``num_proc`` processes), then
        the threshold and the top-k per prompt are applied over the whole score column and the kept rows selected.

        Args:
            dataset: A ``datasets.Dataset`` with ``prompt_column`` and ``completion_column``.
            batch_size: Rows per scoring call.
            num_proc: Processes for the scoring pass (the filter is pickled to each; its hash stays cheap).
            keep_scores: Keep the ``score_column`` in the result.
        """
        if not callable(getattr(dataset, "map", None)) or not callable(getattr(dataset, "select", None)):
            raise TypeError(f"AresFilter.filter_dataset(dataset=...) takes a datasets.Dataset, got "
                            f"{type(dataset).__name__}: for lists use ares_filter.keep_mask(prompts, completions) or "
                            "filter_completions.")
        check_positive_int(batch_size, "AresFilter.filter_dataset(batch_size", 1000)
        if self.score_column in dataset.column_names:  # it would be overwritten, then removed
            raise ValueError(f"AresFilter.filter_dataset: the dataset already has a column {self.score_column!r}, "
                             "which the scores would overwrite (and drop): pass score_column= another name.")
        if len(dataset) == 0:  # map writes no column for no rows; nothing to keep
            return dataset
        scored = dataset.map(self._score_rows, batched=True, batch_size=batch_size, num_proc=num_proc,
                             desc="ARES scores")
        keep = self._keep(scored[self.prompt_column], scored[self.score_column])
        kept = scored.select([i for i, ok in enumerate(keep) if ok])
        return kept if keep_scores else kept.remove_columns(self.score_column)

    def keep_candidates(self, batch: dict[str, Any]) -> dict[str, Any]:
        """For grouped rows (``completion_column`` holds a list of candidates per prompt), with
        ``Dataset.map(..., batched=True)``: keeps the passing candidates of each row and writes their scores to
        ``score_column``. All rows of the batch are scored in one call; without ``batched=True``, one row."""
        one_row = _is_one_prompt(batch.get(self.prompt_column))
        if one_row:
            batch = {key: [value] for key, value in batch.items()}
        prompts, groups, _ = self._columns(batch)
        for i, group in enumerate(groups):
            if isinstance(group, str) or not isinstance(group, (list, tuple)):
                raise TypeError(
                    f"AresFilter.keep_candidates: row {i} of column {self.completion_column!r} is "
                    f"{type(group).__name__}, expected a list of candidates; for one completion per row use "
                    "Dataset.filter(ares_filter) or add_scores."
                )
        flat_prompts = [p for p, group in zip(prompts, groups) for _ in group]
        flat = [c for group in groups for c in group]
        flat_scores = self.scores(flat_prompts, flat, show_progress_bar=False)
        row_ids = [i for i, group in enumerate(groups) for _ in group]
        keep = self._keep(row_ids, flat_scores)  # row ids as the grouping key: top-k per row
        kept = {self.completion_column: [[] for _ in groups], self.score_column: [[] for _ in groups]}
        for row, candidate, score, ok in zip(row_ids, flat, flat_scores, keep):
            if ok:
                kept[self.completion_column][row].append(candidate)
                kept[self.score_column][row].append(score)
        return {k: v[0] for k, v in kept.items()} if one_row else kept


def _key(prompt: Any) -> str:
    return repr(prompt)  # conversations (lists of dicts) are unhashable


def _is_one_prompt(value: Any) -> bool:
    """A single row's prompt (a string, a conversation, or anything but a list of prompts)."""
    if not isinstance(value, list):
        return True
    return bool(value) and all(isinstance(m, dict) for m in value)


def _short(key: str) -> str:
    return key if len(key) <= 60 else key[:57] + "..."


def _check_whole_groups(keys: list[str], group_size: int | None, top_k: int) -> None:
    """Every prompt's rows next to each other; with ``group_size``, the batch is whole groups of that size."""
    if group_size is not None:
        for start in range(0, len(keys), group_size):
            block = keys[start : start + group_size]
            if len(block) != group_size or len(set(block)) != 1:
                raise ValueError(
                    f"AresFilter(top_k={top_k}, group_size={group_size}): rows {start}-{start + len(block) - 1} of "
                    f"this batch of {len(keys)} are not one whole group of {group_size} rows of one prompt (prompts "
                    f"{sorted({_short(k) for k in block})}): every prompt needs exactly group_size rows next to each "
                    "other, and Dataset.filter / map a batch_size (and, with num_proc, shards) that is a multiple of "
                    "group_size; or use ares_filter.filter_dataset(ds), which takes any row order and batch size."
                )
        return
    last_seen: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key in last_seen and last_seen[key] != i - 1:
            raise ValueError(
                f"AresFilter(top_k={top_k}): the rows of prompt {_short(key)} are not next to each other (rows "
                f"{last_seen[key]} and {i} of this batch, other prompts between them), so its rows may also lie in "
                "other batches, where Dataset.filter / map would take a separate top-k: use "
                "ares_filter.filter_dataset(ds) (any row order and batch size), or sort the rows by prompt and pass "
                "group_size= with a batch_size that is a multiple of it."
            )
        last_seen[key] = i


class _BatchBorders:
    """Remembers the last prompt of the previous batch: a prompt whose rows continue across a batch border would
    get a top-k per part. A new pass (another ``filter`` call) starts after a short batch (the last of a pass) or
    with the same first batch as the pass before."""

    def __init__(self) -> None:
        self.first: int | None = None  # hash of the first batch of the current pass
        self.size = 0  # its size: every batch of a pass but the last has it
        self.last_key: str | None = None
        self.ended = True

    def check(self, keys: list[str], top_k: int) -> None:
        if not keys:
            return
        first = hash(tuple(keys))
        if self.ended or first == self.first:
            self.first, self.size = first, len(keys)
        elif keys[0] == self.last_key:
            self.ended = True  # the error ends this pass; the next call starts afresh
            raise ValueError(
                f"AresFilter(top_k={top_k}): the rows of prompt {_short(keys[0])} continue from the previous batch "
                "(Dataset.filter / map pass batch_size rows at a time), so its top-k would be taken over each part "
                "separately: use ares_filter.filter_dataset(ds) (any batch size), batch_size=None (one batch), or "
                "pass group_size= with a batch_size that is a multiple of it."
            )
        self.last_key = keys[-1]
        self.ended = len(keys) < self.size


def _check_threshold(threshold: Any, aggregate: Aggregate) -> None:
    """A finite number; in [0, 1] with a built-in aggregate (its scores lie there, so any other value keeps all or
    nothing). A callable aggregate may score on another scale: only finiteness is required then."""
    if not is_number(threshold):  # numpy floats included
        raise TypeError(f"AresFilter(threshold={threshold!r}) must be a float or None.")
    if not is_finite_number(threshold):
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
