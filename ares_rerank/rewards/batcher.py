"""Reward scoring for RL trainers' reward services: many callers' completions -> one reranker call -> each caller's
own records (what those records become for a trainer is :mod:`~ares_rerank.rewards.stats`).

Used by the reward server (:mod:`~ares_rerank.rewards.server`, ``ares-rerank serve``) and the verl reward functions
(:mod:`~ares_rerank.rewards.verl`).

:class:`RewardBatcher` owns one :class:`~ares_rerank.rerank.AresReranker`: callers on any thread ``submit`` (prompts,
completions) jobs; one worker thread takes the queued jobs (up to ``max_batch`` completions, waiting at most
``max_wait`` seconds for more after the first) and scores them with one ``score_pairs`` call, then hands every job
exactly its own records, in its own order. Only the worker touches the reranker, so its backbone (whose caches are not
thread-safe) needs no lock; do not score with the same reranker elsewhere while a batcher runs. The queue is bounded
in completions (``max_queue``): a job that does not fit is refused at once with :class:`QueueFull`, never blocked.

Scores do not depend on how jobs are batched together: ``score_pairs`` scores each chain on its own, so the records
equal those of one ``score_pairs(prompts, completions, on_error="none")`` call per job, and rewards from
:func:`~ares_rerank.rewards.stats.reward_values` equal
``AresReward(reranker, unscorable_value=...)(prompts, completions)``.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..utils.checks import check_positive_int, is_finite_number


__all__ = ["BatcherClosed", "QueueFull", "RewardBatcher"]

logger = logging.getLogger(__name__)


class QueueFull(RuntimeError):
    """A job does not fit in the batcher's queue now (``queued + len(job) > max_queue``): retry later."""


class BatcherClosed(RuntimeError):
    """The batcher was closed (the server is shutting down): it takes no new job."""


@dataclass
class _Job:
    prompts: list[Any]
    completions: list[Any]
    future: Future = field(default_factory=Future)


class RewardBatcher:
    """Score (prompt, completion) jobs from many threads in shared reranker calls (see the module docstring).

    Args:
        reranker: The :class:`~ares_rerank.rerank.AresReranker` to score with; the batcher's worker thread is its only
            user while the batcher is open.
        max_batch: Completions per ``score_pairs`` call (a larger job is scored alone, whole; the reranker's own
            ``batch_size`` still splits the call into estimator calls).
        max_wait: Seconds the worker waits for more jobs after the first one of a batch (0: score what is queued).
        max_queue: Completions that may wait at once; a job that would pass it raises :class:`QueueFull`.
    """

    def __init__(self, reranker: Any, *, max_batch: int = 64, max_wait: float = 0.01, max_queue: int = 8192) -> None:
        if not hasattr(reranker, "score_pairs"):
            raise TypeError(f"RewardBatcher(reranker=...) must be an AresReranker, got {type(reranker).__name__}.")
        self.max_batch = check_positive_int(max_batch, "RewardBatcher(max_batch", 64)
        self.max_queue = check_positive_int(max_queue, "RewardBatcher(max_queue", 8192)
        if not is_finite_number(max_wait) or max_wait < 0:
            raise ValueError(f"RewardBatcher(max_wait={max_wait!r}) must be a finite number of seconds >= 0, e.g. "
                             "max_wait=0.01.")
        self.max_wait = float(max_wait)
        self.reranker = reranker
        self.batches = 0  # score_pairs calls made (for tests and /health)
        self._jobs: collections.deque[_Job] = collections.deque()
        self._queued = 0
        self._closed = False
        self._cond = threading.Condition()
        self._worker = threading.Thread(target=self._run, name="ares-reward-batcher", daemon=True)
        self._worker.start()

    def __repr__(self) -> str:
        return (f"RewardBatcher({self.reranker!r}, max_batch={self.max_batch}, max_wait={self.max_wait:g}, "
                f"max_queue={self.max_queue})")

    @property
    def queued(self) -> int:
        """Completions waiting to be scored (not counting the batch being scored)."""
        return self._queued

    @property
    def closed(self) -> bool:
        return self._closed

    def submit(self, prompts: Sequence[Any], completions: Sequence[Any]) -> Future:
        """Queue one job; its future's result is one ``score_pairs`` record per completion, in order (``index`` is
        the position in this job).

        Raises:
            ValueError: ``prompts`` and ``completions`` differ in length, or the job is larger than ``max_queue``.
            QueueFull: The queue cannot take the job now (retry later).
            BatcherClosed: :meth:`close` was called.
        """
        prompts, completions = list(prompts), list(completions)
        if len(prompts) != len(completions):
            raise ValueError(f"RewardBatcher.submit got {len(prompts)} prompts for {len(completions)} completions: "
                             "pass one prompt per completion.")
        if len(completions) > self.max_queue:
            raise ValueError(f"a job of {len(completions)} completions can never fit max_queue={self.max_queue}: "
                             "split it, or raise max_queue.")
        job = _Job(prompts, completions)
        with self._cond:
            if self._closed:
                raise BatcherClosed("the reward batcher is closed (shutting down): it takes no new job.")
            if self._queued + len(completions) > self.max_queue:
                raise QueueFull(f"the scoring queue holds {self._queued} completions and takes at most "
                                f"{self.max_queue}: this job of {len(completions)} does not fit now.")
            self._jobs.append(job)
            self._queued += len(completions)
            self._cond.notify_all()
        return job.future

    def score(self, prompts: Sequence[Any], completions: Sequence[Any]) -> list[dict[str, Any]]:
        """:meth:`submit` and wait for the records."""
        return self.submit(prompts, completions).result()

    def close(self, timeout: float | None = None) -> bool:
        """Take no new job, score every queued one, then stop the worker; ``True`` when it stopped within
        ``timeout`` seconds (``None``: wait as long as scoring takes)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._worker.join(timeout)
        return not self._worker.is_alive()

    # -- the worker ---------------------------------------------------------------------------------------------
    def _run(self) -> None:
        jobs: list[_Job] = []
        try:
            while True:
                jobs = self._take() or []
                if not jobs:
                    return
                self._score(jobs)
        finally:  # normally nothing is left; if the worker dies, no caller waits forever
            with self._cond:
                self._closed = True
                left, self._queued = jobs + list(self._jobs), 0
                self._jobs.clear()
            for job in left:
                if not job.future.done():
                    job.future.set_exception(BatcherClosed("the reward batcher's worker stopped before scoring this "
                                                           "job; see the server log."))

    def _take(self) -> list[_Job] | None:
        """The next batch: the first queued job, and the ones behind it while they fit ``max_batch`` completions
        (waiting up to ``max_wait`` for them); ``None`` once closed and empty."""
        with self._cond:
            while not self._jobs and not self._closed:
                self._cond.wait()
            if not self._jobs:
                return None
            deadline = time.monotonic() + self.max_wait
            while self._queued < self.max_batch and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            jobs = [self._jobs.popleft()]
            size = len(jobs[0].completions)
            while self._jobs and size + len(self._jobs[0].completions) <= self.max_batch:
                job = self._jobs.popleft()
                jobs.append(job)
                size += len(job.completions)
            self._queued -= size
            return jobs

    def _score(self, jobs: list[_Job]) -> None:
        prompts = [p for job in jobs for p in job.prompts]
        completions = [c for job in jobs for c in job.completions]
        self.batches += 1
        try:
            records = self.reranker.score_pairs(prompts, completions, on_error="none", show_progress_bar=False)
        except Exception as err:  # noqa: BLE001 -- handed to every waiting caller; the worker keeps running
            logger.exception("Scoring a batch of %d completions failed.", len(completions))
            for job in jobs:
                job.future.set_exception(err)
            return
        start = 0
        for job in jobs:
            own = records[start : start + len(job.completions)]
            for i, record in enumerate(own):
                record["index"] = i
            job.future.set_result(own)
            start += len(job.completions)
