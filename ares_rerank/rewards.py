"""ARES as a TRL reward function (GRPOTrainer, RLOOTrainer) and the ready-made :data:`ares_reward`.

TRL calls a reward function as ``fn(prompts=..., completions=..., completion_ids=..., **kwargs)`` with one entry per
completion (prompts repeated per generation) and extra kwargs: the dataset's other columns, ``trainer_state``, and
the ``log_metric(name, value)`` / ``log_extra(column, values)`` callbacks. It uses ``fn.__name__`` as the metric key
(``rewards/<name>/mean``) and treats ``None`` as "not applicable" (NaN, ignored in the group statistics).

What :class:`AresReward` returns in each robustness case (tested in ``tests/test_rewards.py``):

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

``ares_reward`` builds its reranker lazily on its first call (importing this module loads no model): the backbone
is ``configure_default(backbone=...)``, else ``$ARES_RERANK_BACKBONE``, else ``"default"``, loaded with
``ares_rerank.load_backbone``. So ``trl grpo --reward_funcs ares_rerank.rewards.ares_reward`` works as is.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any, Callable, Sequence

from .aggregate import Aggregate, aggregate_name, get_aggregate
from .backbones.base import Backbone
from .rerank import AresReranker


__all__ = ["BACKBONE_ENV", "AresReward", "ares_reward", "configure_default", "default_reranker"]

logger = logging.getLogger(__name__)

BACKBONE_ENV = "ARES_RERANK_BACKBONE"

_default_settings: dict[str, Any] = {}
_default: AresReranker | None = None


def configure_default(backbone: Backbone | str | None = None, **reranker_kwargs: Any) -> None:
    """Choose what the default reranker (used by :data:`ares_reward` and ``AresReward(None)``) is built from.

    Nothing is loaded here: the reranker is (re)built on the next call that needs it.

    Args:
        backbone: A backbone object, or a name / path for ``ares_rerank.load_backbone``. ``None``:
            ``$ARES_RERANK_BACKBONE``, else ``"default"``.
        **reranker_kwargs: Keyword arguments of :class:`~ares_rerank.rerank.AresReranker` (``config``,
            ``method``, ``step_separator``, ``prompt_split``, ...).
    """
    global _default
    _default_settings.clear()
    _default_settings.update(reranker_kwargs)
    if backbone is not None:
        _default_settings["backbone"] = backbone
    _default = None


def default_reranker() -> AresReranker:
    """The default reranker, built (and its backbone loaded) on the first call, then reused."""
    global _default
    if _default is None:
        settings = dict(_default_settings)
        backbone = settings.pop("backbone", None) or os.environ.get(BACKBONE_ENV) or "default"
        logger.info("Building the default ARES reranker with backbone %r.", backbone)
        _default = AresReranker(backbone, **settings)
    return _default


class AresReward:
    """A TRL reward: the aggregated ARES score of each completion, in [0, 1].

    Picklable (when its backbone is), with a ``__name__`` (TRL's metric key). Prompts and completions may be
    strings (standard format) or message lists (conversational format), mixed in one call.

    Args:
        reranker: The :class:`~ares_rerank.rerank.AresReranker` to score with; ``None`` uses the default reranker,
            built lazily on the first call (see :func:`configure_default`).
        aggregate: Chain score used as the reward: ``"final"`` (default), ``"mean"``, ``"min"``, ``"product"`` or
            a callable.
        name: The ``__name__`` (metric key). Default: ``"<method>_<aggregate>"``, e.g. ``"ares_final"``.
        unscorable_value: Returned for a completion that cannot be scored (empty, blank, not text, backbone
            error). ``None`` (default) is TRL's "not applicable"; e.g. ``0.0`` penalizes instead. Must be finite.
        on_error: ``"none"`` (default) never raises on a completion; ``"raise"`` propagates (debugging).
        log_stats: When TRL passes ``log_metric`` / ``log_extra``, log the scored fraction, mean steps, the
            flagged-step fraction and backbone evaluations, and per-completion ``num_steps`` / ``first_error``.
    """

    def __init__(
        self,
        reranker: AresReranker | None = None,
        aggregate: Aggregate = "final",
        name: str | None = None,
        unscorable_value: float | None = None,
        on_error: str = "none",
        log_stats: bool = True,
    ) -> None:
        if reranker is not None and not isinstance(reranker, AresReranker):
            raise TypeError(
                f"AresReward(reranker=...) must be an AresReranker or None (the default reranker), got "
                f"{type(reranker).__name__}; build one with AresReranker(backbone)."
            )
        get_aggregate(aggregate)
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError(f"AresReward(name={name!r}) must be a non-empty string (TRL's metric key) or None.")
        if on_error not in ("none", "raise"):
            raise ValueError(f"AresReward(on_error={on_error!r}) is not supported: use 'none' or 'raise'.")
        if unscorable_value is not None and (
            not isinstance(unscorable_value, (int, float)) or isinstance(unscorable_value, bool)
        ):
            raise TypeError(f"AresReward(unscorable_value={unscorable_value!r}) must be a float or None.")
        if unscorable_value is not None and not math.isfinite(unscorable_value):
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
        method = reranker.method if reranker is not None else "ares"
        self.__name__ = name or f"{method}_{aggregate_name(aggregate)}".replace("-", "_")

    def __repr__(self) -> str:
        source = "default (lazy)" if self.reranker is None else repr(self.reranker)
        return f"AresReward(name={self.__name__!r}, aggregate={self.aggregate!r}, reranker={source})"

    @property
    def is_loaded(self) -> bool:
        """Whether the reranker (and its backbone) exists yet; ``False`` for a default not built so far."""
        return self.reranker is not None or _default is not None

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
        reranker = self.reranker if self.reranker is not None else default_reranker()
        records = reranker.score_pairs(prompts, completions, aggregate=self.aggregate, on_error=self.on_error)
        for record in records:
            if record["error"] and record["steps"]:  # a backbone / aggregate failure, not just an empty completion
                logger.warning("%s could not score completion %d: %s", self.__name__, record["index"], record["error"])
        if self.log_stats:
            self._log(records, reranker.config.threshold, kwargs.get("log_metric"), kwargs.get("log_extra"))
        return [self.unscorable_value if r["score"] is None else r["score"] for r in records]

    def _log(
        self,
        records: list[dict[str, Any]],
        threshold: float,
        log_metric: Callable[[str, float], None] | None,
        log_extra: Callable[[str, list], None] | None,
    ) -> None:
        scored = [r for r in records if r["score"] is not None]
        if callable(log_metric) and records:
            log_metric(f"{self.__name__}/scored_frac", len(scored) / len(records))
            if scored:
                steps = [s for r in scored for s in r["step_scores"]]
                log_metric(f"{self.__name__}/num_steps_mean", len(steps) / len(scored))
                log_metric(f"{self.__name__}/flagged_step_frac", sum(s <= threshold for s in steps) / len(steps))
                evaluations = [r["certificate"]["evaluations"] for r in scored]
                log_metric(f"{self.__name__}/evaluations_mean", sum(evaluations) / len(scored))
        if callable(log_extra):  # one value per completion; None where unscored
            scored_ids = {id(r) for r in scored}
            num_steps = [len(r["steps"]) if id(r) in scored_ids else None for r in records]
            first_error = [r["first_error"] if id(r) in scored_ids else None for r in records]
            log_extra(f"{self.__name__}/num_steps", num_steps)
            log_extra(f"{self.__name__}/first_error", first_error)


# Used by `trl grpo --reward_funcs ares_rerank.rewards.ares_reward`; builds the default reranker on its first call.
ares_reward = AresReward(name="ares_reward")
