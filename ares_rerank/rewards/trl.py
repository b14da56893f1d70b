"""ARES as a TRL reward function (GRPOTrainer, RLOOTrainer) and the ready-made :data:`ares_reward`.

TRL calls a reward function as ``fn(prompts=..., completions=..., completion_ids=..., **kwargs)`` with one entry per
completion (prompts repeated per generation) and extra kwargs: the dataset's other columns, ``trainer_state``, and
the ``log_metric(name, value)`` / ``log_extra(column, values)`` callbacks. It uses ``fn.__name__`` as the metric key
(``rewards/<name>/mean``) and treats ``None`` as "not applicable" (NaN, ignored in the group statistics).

What :class:`AresReward` returns in each robustness case (tested in ``tests/rewards/test_rewards.py``):

==========================================  =======================================================================
completion                                  reward
==========================================  =======================================================================
empty string ``""``                         ``unscorable_value`` (default ``None``): no step to judge
whitespace only                             ``unscorable_value`` (default ``None``)
text without the step separator             a score: the whole completion is one step
one 5,000-word step                         a score (the backbone truncates); ``unscorable_value`` if the backbone
                                            raises on it (other completions of the batch are still scored)
non-string (``None``, ``42``, ...)          ``unscorable_value``
text with a lone surrogate (``"\\udcff"``)   ``unscorable_value``: it cannot be encoded as UTF-8
conversational (``[{"role", "content"}]``)  a score from the assistant messages' text; mixed with strings in one
                                            call, each completion is read in its own format
conversation with non-text content          ``unscorable_value``
==========================================  =======================================================================

With ``on_error="raise"`` bad types and backbone errors raise instead (for debugging). A backbone that cannot be
loaded always raises: that is a configuration error, not a completion to skip.

``ares_reward`` builds its reranker lazily on its first call (importing this module loads no model), so
``trl grpo --reward_funcs ares_rerank.rewards.ares_reward`` works as is; ``ares_rerank.rewards.async_ares_reward`` is
the same reward for TRL's async path (:class:`AsyncAresReward`). That reranker is the default one of
:mod:`~ares_rerank.rewards.default`, configured by :func:`~ares_rerank.rewards.default.configure_default` or the
``ARES_RERANK_*`` environment variables.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Callable, Sequence

from ..aggregate import Aggregate, aggregate_name, get_aggregate
from ..rerank import fingerprint
from ..rerank.records import NO_STEPS
from ..rerank.reranker import AresReranker
from ..utils.checks import is_finite_number, is_number
from .default import backbone_lock, default_is_built, default_reranker
from .stats import completion_stats


__all__ = ["AresReward", "AsyncAresReward", "ares_reward", "async_ares_reward"]

logger = logging.getLogger(__name__)

class AresReward:
    """A TRL reward: the aggregated ARES score of each completion, in [0, 1].

    Picklable (when its backbone is), with a ``__name__`` (TRL's metric key). Prompts and completions may be
    strings (standard format) or message lists (conversational format), mixed in one call. For TRL's async path
    (rewards awaited together, so a served backbone overlaps with other rewards) use :class:`AsyncAresReward`.

    Args:
        reranker: The :class:`~ares_rerank.rerank.AresReranker` to score with; ``None`` uses the default reranker,
            built lazily on the first call (see :func:`configure_default` and the environment variables above).
        aggregate: Chain score used as the reward: ``"final"``, ``"mean"``, ``"min"``, ``"product"`` or a callable;
            ``None`` (default): the reranker's (``"final"`` unless set; ``$ARES_RERANK_AGGREGATE`` for the default
            reranker).
        name: The ``__name__`` (metric key). Default: ``"<method>_<aggregate>"``, e.g. ``"ares_final"``
            (``"ares_reward"`` with the default reranker).
        unscorable_value: Returned for a completion that cannot be scored (empty, blank, not text, backbone
            error). ``None`` (default) is TRL's "not applicable"; e.g. ``0.0`` penalizes instead. Must be finite.
        on_error: ``"none"`` (default) never raises on a completion; ``"raise"`` propagates (debugging).
        log_stats: When TRL passes ``log_metric`` / ``log_extra``, log the scored fraction, mean steps, the
            flagged-step fraction and backbone evaluations, and per-completion ``num_steps`` / ``first_error``.
    """

    def __init__(
        self,
        reranker: AresReranker | None = None,
        aggregate: Aggregate | None = None,
        name: str | None = None,
        unscorable_value: float | None = None,
        on_error: str = "none",
        log_stats: bool = True,
    ) -> None:
        if reranker is not None and not isinstance(reranker, AresReranker):
            raise TypeError(
                f"{type(self).__name__}(reranker=...) must be an AresReranker or None (the default reranker), got "
                f"{type(reranker).__name__}; build one with AresReranker(backbone)."
            )
        if aggregate is not None:
            get_aggregate(aggregate)
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError(f"AresReward(name={name!r}) must be a non-empty string (TRL's metric key) or None.")
        if on_error not in ("none", "raise"):
            raise ValueError(f"AresReward(on_error={on_error!r}) is not supported: use 'none' or 'raise'.")
        if unscorable_value is not None and not is_number(unscorable_value):
            raise TypeError(f"AresReward(unscorable_value={unscorable_value!r}) must be a float or None.")
        if unscorable_value is not None and not is_finite_number(unscorable_value):
            raise ValueError(
                f"AresReward(unscorable_value={unscorable_value!r}) must be finite: a NaN or inf reward poisons the "
                "trainer's group statistics. Pass None (TRL's 'not applicable', ignored in the statistics) or a "
                "penalty such as 0.0."
            )
        self.reranker = reranker
        self.aggregate = aggregate
        self.unscorable_value = None if unscorable_value is None else float(unscorable_value)
        self.on_error = on_error
        self.log_stats = log_stats
        if name is None and reranker is None:
            name = "ares_reward"
        elif name is None:
            chain_score = aggregate if aggregate is not None else reranker.aggregate
            name = f"{reranker.method}_{aggregate_name(chain_score)}".replace("-", "_")
        self.__name__ = name
        fingerprint.register(type(self))

    def __repr__(self) -> str:
        source = "default (lazy)" if self.reranker is None else repr(self.reranker)
        return f"{type(self).__name__}(name={self.__name__!r}, aggregate={self.aggregate!r}, reranker={source})"

    @property
    def is_loaded(self) -> bool:
        """Whether the reranker (and its backbone) exists yet; ``False`` for a default not built so far."""
        return self.reranker is not None or default_is_built()

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        """One reward per completion (see the module docstring for the value of each unscorable case).

        Args:
            prompts: One prompt per completion (TRL repeats each prompt ``num_generations`` times).
            completions: Strings, or lists of ``{"role", "content"}`` messages.
            completion_ids: Token ids (unused; accepted for TRL's signature).
            **kwargs: TRL's extras; ``log_metric`` and ``log_extra`` are used when ``log_stats``; the rest
                (``trainer_state``, dataset columns) are ignored.

        Returns:
            ``len(completions)`` floats in [0, 1], or ``unscorable_value`` where a completion cannot be scored.
        """
        records, threshold = self._score(prompts, completions)
        return self._rewards(records, threshold, kwargs)

    def _score(self, prompts: Sequence[Any], completions: Sequence[Any]) -> tuple[list[dict[str, Any]], float]:
        """The blocking part: build the reranker if needed, score every completion (no progress bar: TRL has its
        own), one scoring at a time per backbone."""
        reranker = self.reranker if self.reranker is not None else default_reranker()
        with backbone_lock(reranker.backbone):
            records = reranker.score_pairs(prompts, completions, aggregate=self.aggregate, on_error=self.on_error,
                                           show_progress_bar=False)
        return records, reranker.threshold

    def _rewards(self, records: list[dict[str, Any]], threshold: float, kwargs: dict[str, Any]) -> list[float | None]:
        failed = [r for r in records if r["error"] and r["error"] != NO_STEPS]  # failures, not empty completions
        if failed:  # one line per call: a reward is called every training step
            indices = [r["index"] for r in failed]
            shown = ", ".join(map(str, indices[:8])) + (", ..." if len(indices) > 8 else "")
            logger.warning("%s could not score %d of %d completions (index %s); the first error: %s", self.__name__,
                           len(failed), len(records), shown, failed[0]["error"])
        if self.log_stats:
            self._log(records, threshold, kwargs.get("log_metric"), kwargs.get("log_extra"))
        return [self.unscorable_value if r["score"] is None else r["score"] for r in records]

    def _log(
        self,
        records: list[dict[str, Any]],
        threshold: float,
        log_metric: Callable[[str, float], None] | None,
        log_extra: Callable[[str, list], None] | None,
    ) -> None:
        stats = completion_stats(records, threshold)  # the names OpenRLHF and verl log as ares_<stat>
        if callable(log_metric) and records:
            log_metric(f"{self.__name__}/scored", sum(stats["scored"]) / len(records))
            for name in ("num_steps", "flagged_frac", "evaluations"):  # over the scored completions
                values = [v for v in stats[name] if v is not None]
                if values:
                    log_metric(f"{self.__name__}/{name}", sum(values) / len(values))
        if callable(log_extra):  # one value per completion; None where unscored
            for name in ("num_steps", "first_error"):
                log_extra(f"{self.__name__}/{name}", [None if v is None else int(v) for v in stats[name]])


async def _call_signature(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    completion_ids: Sequence[Sequence[int]] | None = None,
    **kwargs: Any,
) -> list[float | None]:
    """Never called: its code object, defaults and signature are what :class:`AsyncAresReward` instances show as a
    function (``AsyncAresReward.__call__`` without ``self``; ``tests/rewards/test_async_reward.py`` checks they
    agree)."""
    raise NotImplementedError


class _InstanceSignature:
    """A ``__signature__`` that only instances see: ``inspect.signature`` of the class itself gets ``None`` here and
    goes on to the constructor's, which a plain class attribute would hide."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.signature = inspect.signature(function)

    def __get__(self, obj: Any, owner: type | None = None) -> inspect.Signature | None:
        return None if obj is None else self.signature


class AsyncAresReward(AresReward):
    """:class:`AresReward` for TRL's async path: ``async def __call__``, so GRPOTrainer / RLOOTrainer await it
    together with the other async rewards (``asyncio.gather``) instead of one after another.

    The blocking scoring runs in a worker thread (``asyncio.to_thread``), so a served backbone (an
    ``OpenAIJudge`` or ``VLLMPoolingPRM`` waiting on HTTP) or a model on another device overlaps with the other
    rewards. Two rewards on the same backbone object still score one at a time (a lock per backbone). Same
    arguments, values and logging as :class:`AresReward`; picklable.

    How each TRL release that has async rewards tells them apart, and why an instance passes all of them:

    ===================  ===============================================================================
    TRL                  detection of an async reward function ``f``
    ===================  ===============================================================================
    before 0.27          none: every reward is called synchronously (use :class:`AresReward` there)
    0.27 - 0.29          ``asyncio.iscoroutinefunction(f)``
    1.0 - 1.13           ``inspect.iscoroutinefunction(f)`` (also the experimental AsyncGRPO worker)
    1.14 and later       ``is_async_callable(f)``: the above, or ``inspect.iscoroutinefunction(f.__call__)``
    ===================  ===============================================================================

    The first two look at the object itself, which an instance of a class with an ``async def __call__`` does not
    pass. So an instance is also "function-like" (the duck type of a function that Cython's compiled functions use):
    it has a ``__name__`` and the ``__code__``, ``__defaults__`` and ``__kwdefaults__`` of an ``async def`` with
    ``__call__``'s parameters, which ``inspect.iscoroutinefunction`` (and ``asyncio.iscoroutinefunction``, which
    asks it) accepts on Python 3.10 to 3.13; its ``__signature__`` keeps ``inspect.signature(reward)`` the same as
    the synchronous reward's. These are class attributes, so pickling and copying are unchanged. A subclass must
    keep ``__call__`` an ``async def``.

    Called without ``await`` it returns a coroutine, as any ``async def`` does: a caller that iterates the result
    (TRL before 0.27) fails with ``'coroutine' object is not iterable`` and Python warns that
    ``AsyncAresReward.__call__`` was never awaited; use :class:`AresReward` with the same arguments there.

    Example:
        >>> reward = AsyncAresReward(AresReranker(judge), name="ares_judge")  # doctest: +SKIP
        >>> GRPOTrainer(..., reward_funcs=[reward, other_async_reward])  # doctest: +SKIP
    """

    # Function-like duck typing (see the class docstring): class attributes, read through each instance.
    __code__ = _call_signature.__code__
    __defaults__ = _call_signature.__defaults__
    __kwdefaults__ = _call_signature.__kwdefaults__
    __signature__ = _InstanceSignature(_call_signature)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not inspect.iscoroutinefunction(cls.__call__):
            raise TypeError(
                f"{cls.__name__}.__call__ must be an `async def`: every AsyncAresReward tells TRL that calling it "
                "returns a coroutine. Subclass AresReward for a synchronous reward."
            )

    async def __call__(  # type: ignore[override]
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        """Await one reward per completion (the values of :meth:`AresReward.__call__`)."""
        records, threshold = await asyncio.to_thread(self._score, prompts, completions)
        return self._rewards(records, threshold, kwargs)


# Used by `trl grpo --reward_funcs ares_rerank.rewards.ares_reward` (or `...async_ares_reward`, awaited with the other
# async rewards); each builds the default reranker on its first call.
ares_reward = AresReward(name="ares_reward")
async_ares_reward = AsyncAresReward(name="ares_reward_async")
