"""Step scores -> rewards for RL trainers.

- :mod:`~ares_rerank.rewards.trl`: TRL reward functions (:class:`AresReward`, :class:`AsyncAresReward` and the
  ready-made :data:`ares_reward` / :data:`async_ares_reward`);
- :mod:`~ares_rerank.rewards.default`: the default reranker those use, configured by :func:`configure_default` or
  the ``ARES_RERANK_*`` environment variables;
- :mod:`~ares_rerank.rewards.stats`: the one conversion of score records into rewards and log statistics;
- :mod:`~ares_rerank.rewards.batcher`, :mod:`~ares_rerank.rewards.openrlhf`, :mod:`~ares_rerank.rewards.server`:
  many clients' completions -> one reranker call -> OpenRLHF's remote reward protocol (``ares-rerank serve``);
- :mod:`~ares_rerank.rewards.verl`: verl's reward functions and dense reward manager (``pkg://ares_rerank.verl``
  keeps working).

``trl grpo --reward_funcs ares_rerank.rewards.ares_reward`` (and ``.async_ares_reward``) keeps working.
"""

from __future__ import annotations

from .default import (
    AGGREGATE_ENV,
    BACKBONE_ENV,
    BACKBONE_OPTIONS_ENV,
    KIND_ENV,
    RERANKER_OPTIONS_ENV,
    backbone_lock,
    configure_default,
    default_reranker,
    settings_from_env,
)
from .trl import AresReward, AsyncAresReward, ares_reward, async_ares_reward


__all__ = [
    "AGGREGATE_ENV",
    "BACKBONE_ENV",
    "BACKBONE_OPTIONS_ENV",
    "KIND_ENV",
    "RERANKER_OPTIONS_ENV",
    "AresReward",
    "AsyncAresReward",
    "ares_reward",
    "async_ares_reward",
    "backbone_lock",
    "configure_default",
    "default_reranker",
    "settings_from_env",
]
