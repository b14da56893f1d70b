"""One entry point: chains + backbone + method -> per-step scores (ARES or a baseline).

Long calls show a tqdm bar over chains (``show_progress_bar``), advanced once per chunk of ``batch_size`` chains (one
estimator call each: one backbone call per step wave of the chunk).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from contextlib import nullcontext
from typing import Any, Sequence

from .backbones.base import Backbone
from .baselines import BASELINES, CHAIN_BASELINES, baseline_scores
from .chain import Chain, ChainScores
from .estimator.config import AresConfig
from .utils.checks import check_positive_int
from .estimator import ares_scores


__all__ = ["METHODS", "check_batch_size", "length_error", "progress_bar", "score_chains"]

METHODS = ("ares",) + tuple(sorted(BASELINES)) + CHAIN_BASELINES


def length_error(num_steps: int, config: AresConfig | None, chain_id: Any = None) -> str | None:
    """Why a chain of ``num_steps`` steps is too long to score (more than ``config.max_steps``), or ``None``:
    checked before any method allocates memory that grows with the step count."""
    limit = (config or AresConfig()).max_steps
    if limit is None or num_steps <= limit:
        return None
    name = "a chain" if chain_id is None else f"chain {chain_id!r}"
    return (f"{name} has {num_steps} steps, more than max_steps={limit}: its working memory grows with the square "
            "of the step count. Check how the completion splits into steps (step_separator), or raise "
            "AresConfig(max_steps=...) (--max-steps; None: no limit).")


def check_batch_size(batch_size: Any, owner: str) -> int | None:
    """``batch_size`` as a positive int or ``None``; a ValueError naming ``owner`` otherwise."""
    check_positive_int(batch_size, f"{owner}(batch_size", allow_none=True)  # numpy integers too, as in a config
    return None if batch_size is None else int(batch_size)


def progress_bar(total: int, show_progress_bar: bool | None, num_batches: int, desc: str, unit: str) -> Any:
    """A tqdm bar on stderr, or a null context when hidden.

    ``show_progress_bar=None`` shows it when the work takes more than one batch (long calls), ``True`` always,
    ``False`` never (``TQDM_DISABLE=1`` hides every bar too).
    """
    if show_progress_bar is not None and not isinstance(show_progress_bar, bool):
        raise TypeError(f"show_progress_bar={show_progress_bar!r} must be True, False or None (shown for long calls).")
    show = num_batches > 1 if show_progress_bar is None else show_progress_bar
    if not show:
        return nullcontext(None)
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr)


def score_chains(
    chains: Sequence[Chain],
    backbone: Backbone,
    method: str = "ares",
    config: AresConfig | None = None,
    *,
    batch_size: int | None = None,
    show_progress_bar: bool | None = None,
) -> list[ChainScores]:
    """Score every step of every chain.

    Args:
        chains: :class:`Chain` objects (base claims + steps).
        backbone: Any object with ``entailment_probs(premises, hypotheses) -> probabilities``.
        method: ``"ares"`` or a baseline: ``"entail-prev"``, ``"entail-base"``, ``"roscoe-li-self"``,
            ``"roscoe-li-source"``, ``"receval-inter"``, ``"prm-chain"``, ``"llm-judge"``.
        config: ARES settings (ignored by baselines).
        batch_size: Chains per estimator call (each call sends all inputs of one step wave of its chains to the
            backbone as one batch); ``None`` scores all chains in one call. Scores do not depend on it (the sampler
            is seeded per chain).
        show_progress_bar: A tqdm bar over chains on stderr; ``None`` shows it when there is more than one batch.

    Returns:
        One :class:`ChainScores` per chain, in input order.
    """
    if isinstance(chains, Chain):
        raise TypeError("score_chains(chains=...) got a single Chain: pass a list, e.g. score_chains([chain], ...).")
    if isinstance(chains, (str, bytes)) or not isinstance(chains, Iterable):
        raise TypeError(f"score_chains(chains={chains!r:.60}) must be a list of Chain objects, e.g. "
                        "[Chain(base_claims, steps)].")
    chains = list(chains)
    for i, chain in enumerate(chains):
        if not isinstance(chain, Chain):
            raise TypeError(
                f"score_chains(chains[{i}]) is {type(chain).__name__}, expected ares_rerank.Chain "
                "(build one with Chain(base_claims, steps) or Chain.from_text(prompt, completion))."
            )
    if config is not None and not isinstance(config, AresConfig):
        raise TypeError(f"score_chains(config=...) must be an AresConfig, got {type(config).__name__}.")
    if not isinstance(method, str) or (method != "ares" and method not in BASELINES and method not in CHAIN_BASELINES):
        raise ValueError(f"score_chains(method={method!r}) is unknown: use one of {list(METHODS)}.")
    for chain in chains:
        error = length_error(chain.num_steps, config, chain.id)
        if error:
            raise ValueError(f"score_chains: {error}")
    size = check_batch_size(batch_size, "score_chains") or max(len(chains), 1)
    starts = range(0, len(chains), size)
    out: list[ChainScores] = []
    with progress_bar(len(chains), show_progress_bar, len(starts), f"scoring ({method})", "chain") as bar:
        for start in starts:
            chunk = chains[start : start + size]
            if method == "ares":
                out += ares_scores(chunk, backbone, config)
            else:
                out += baseline_scores(chunk, backbone, method)
            if bar is not None:
                bar.update(len(chunk))
    return out
