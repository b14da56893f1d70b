"""One entry point: chains + backbone + method -> per-step scores (ARES or a baseline)."""

from __future__ import annotations

from typing import Sequence

from .backbones.base import Backbone
from .baselines import BASELINES, CHAIN_BASELINES, baseline_scores
from .chain import Chain, ChainScores
from .estimator import AresConfig, ares_scores


__all__ = ["METHODS", "score_chains"]

METHODS = ("ares",) + tuple(sorted(BASELINES)) + CHAIN_BASELINES


def score_chains(
    chains: Sequence[Chain],
    backbone: Backbone,
    method: str = "ares",
    config: AresConfig | None = None,
) -> list[ChainScores]:
    """Score every step of every chain.

    Args:
        chains: :class:`Chain` objects (base claims + steps).
        backbone: Any object with ``entailment_probs(premises, hypotheses) -> probabilities``.
        method: ``"ares"`` or a baseline: ``"entail-prev"``, ``"entail-base"``, ``"roscoe-li-self"``,
            ``"roscoe-li-source"``, ``"receval-inter"``, ``"prm-chain"``, ``"llm-judge"``.
        config: ARES settings (ignored by baselines).

    Returns:
        One :class:`ChainScores` per chain, in input order.
    """
    if isinstance(chains, Chain):
        raise TypeError("score_chains(chains=...) got a single Chain: pass a list, e.g. score_chains([chain], ...).")
    chains = list(chains)
    for i, chain in enumerate(chains):
        if not isinstance(chain, Chain):
            raise TypeError(
                f"score_chains(chains[{i}]) is {type(chain).__name__}, expected ares_rerank.Chain "
                "(build one with Chain(base_claims, steps) or Chain.from_text(prompt, completion))."
            )
    if config is not None and not isinstance(config, AresConfig):
        raise TypeError(f"score_chains(config=...) must be an AresConfig, got {type(config).__name__}.")
    if not chains:
        return []
    if method == "ares":
        return ares_scores(chains, backbone, config)
    if method in BASELINES or method in CHAIN_BASELINES:
        return baseline_scores(chains, backbone, method)
    raise ValueError(f"score_chains(method={method!r}) is unknown: use one of {list(METHODS)}.")
