"""Premise masks, the bookkeeping both ARES estimators share: the batch one over finished chains
(:mod:`~ares_rerank.estimator.batch`) and the streaming one over chains being written
(:mod:`~ares_rerank.estimator.stream`).

A mask is a row of booleans over a chain's claims: which earlier claims are accepted. Exact mode keeps weighted
masks (``rows`` ``(R, n + m)`` bool and ``weights`` ``(R,)``), sample mode one mask per trajectory. Per step:

1. :func:`group_inputs` finds the distinct backbone inputs among the masks (projected onto the premises a planned
   selector keeps, when the backbone has one);
2. exact mode prunes (:func:`prune_groups`: the lightest groups that need a backbone call are left unevaluated while
   the dropped mass stays within the budget, then any beyond ``max_masks``);
3. :func:`exact_step` (exact) turns the backbone's values into tau_k and its hard bound (:func:`certified`);
4. :func:`split_masks` extends every mask by the step (accepted with ``w * q``, rejected with ``w * (1 - q)``) and
   :func:`keep_heaviest` caps how many masks are kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .config import AresConfig


__all__ = [
    "MaskGroups",
    "certified",
    "exact_step",
    "group_inputs",
    "groups_to_drop",
    "keep_heaviest",
    "prune_groups",
    "row_keys",
    "split_masks",
]


@dataclass
class MaskGroups:
    """The distinct backbone inputs of one step among a set of masks.

    Attributes:
        selected: One tuple of claim indices per group: what the backbone reads (after the selector's plan).
        representative: A row index per group; that row's accepted claims are what the backbone is sent.
        inverse: ``(R,)`` the group of every row.
    """

    selected: list[tuple[int, ...]]
    representative: list[int]
    inverse: np.ndarray


def row_keys(bits: np.ndarray, counts: np.ndarray | None) -> np.ndarray:
    """One hashable key per row of ``bits`` ``(R, c)`` (and ``counts`` ``(R,)``): packed bytes viewed as void."""
    parts = [np.packbits(bits, axis=1), np.ones((len(bits), 1), dtype=np.uint8)]  # the 1s keep the key non-empty
    if counts is not None:
        parts.append(counts.astype(">u4").view(np.uint8).reshape(len(bits), 4))
    packed = np.ascontiguousarray(np.concatenate(parts, axis=1))
    return packed.view(np.dtype((np.void, packed.shape[1]))).reshape(-1)


def group_inputs(rows: np.ndarray, upto: int, plan: Any) -> MaskGroups:
    """Group ``rows`` by the input the backbone reads for the step after claim ``upto - 1``.

    Without a plan a mask's input is its accepted claims among the first ``upto``. With a planned selector
    (``plan.support``: the claims that can matter; ``plan.select(present, count)``: the premises it keeps), masks are
    compared on the support only (vectorized, no premise list per mask), then merged where the selector keeps the
    same premises.
    """
    support = None if plan is None else list(plan.support)
    counts = rows[:, :upto].sum(axis=1)
    keyed = rows[:, :upto] if plan is None else rows[:, support]
    key_counts = counts if plan is not None and plan.uses_count else None
    _, first, inverse = np.unique(row_keys(keyed, key_counts), return_index=True, return_inverse=True)
    index: dict[tuple[int, ...], int] = {}
    selected: list[tuple[int, ...]] = []
    representative: list[int] = []
    group_of = np.empty(len(first), dtype=np.int64)
    for g, r in enumerate(first.tolist()):
        if plan is None:
            chosen = tuple(np.flatnonzero(rows[r, :upto]).tolist())
        else:
            present = [i for i, bit in zip(support, keyed[r].tolist()) if bit]
            chosen = tuple(plan.select(present, int(counts[r])))
        if chosen not in index:
            index[chosen] = len(selected)
            selected.append(chosen)
            representative.append(r)
        group_of[g] = index[chosen]
    return MaskGroups(selected, representative, group_of[inverse.reshape(-1)])


def split_masks(rows: np.ndarray, weights: np.ndarray, bit: int, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each mask -> (claim ``bit`` accepted, ``w*q``) and (rejected, ``w*(1-q)``); masks of weight 0 are dropped."""
    accepted = rows.copy()
    accepted[:, bit] = True
    rows = np.concatenate([accepted, rows])
    weights = np.concatenate([weights * q, weights * (1.0 - q)])
    live = weights > 0.0
    return rows[live], weights[live]


def keep_heaviest(rows: np.ndarray, weights: np.ndarray,
                  cap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, weights, light rows, light weights)``: the ``cap`` heaviest masks in their order, and the rest (whose
    mass the caller adds to the dropped mass)."""
    if len(rows) <= cap:
        return rows, weights, rows[:0], weights[:0]
    order = np.argsort(-weights, kind="stable")
    light, keep = order[cap:], np.sort(order[:cap])
    return rows[keep], weights[keep], rows[light], weights[light]


def groups_to_drop(group_weights: np.ndarray, need: Sequence[int], dropped: float,
                   config: AresConfig) -> tuple[list[int], float]:
    """Exact mode's pruning: the lightest groups that need a backbone call, left unevaluated while the dropped mass
    stays within ``config.prune_budget`` (at least one group is kept), then any beyond ``config.mask_budget`` groups.
    Returns the groups to drop and the dropped mass after them. The budget is spent greedily from the first step:
    measured cheaper than any schedule."""
    order = sorted(need, key=lambda g: (group_weights[g], g))
    over = max(0, len(group_weights) - config.mask_budget)
    drop: list[int] = []
    for g in order:
        within = dropped + group_weights[g] <= config.prune_budget
        if len(drop) + 1 >= len(group_weights) or not (within or len(drop) < over):
            break
        drop.append(g)
        dropped += float(group_weights[g])
    return drop, dropped


def prune_groups(inverse: np.ndarray, weights: np.ndarray, num_groups: int, need: Sequence[int], dropped: float,
                 config: AresConfig) -> tuple[np.ndarray | None, float]:
    """``(out, dropped)``: which rows leave the exact enumeration (``None`` when none do) under
    :func:`groups_to_drop`, given each row's group ``inverse`` (of ``num_groups``) and the groups that ``need`` a
    backbone call."""
    group_weights = np.bincount(inverse, weights=weights, minlength=num_groups)
    drop, dropped = groups_to_drop(group_weights, need, dropped, config)
    return (np.isin(inverse, drop) if drop else None), dropped


def exact_step(weights: np.ndarray, q: np.ndarray, dropped: float, eps: float) -> tuple[float, float, float]:
    """``(S, point, bound)`` of one exact step: tau_k lies in ``[S, S + D]`` (S: the kept masks' sum of ``w * q``,
    D: the dropped mass). The point reported is the one nearest the kept masks' mean ``S / (1 - D)`` (what the dropped
    masks most resemble) whose worst-case error stays within ``max(eps, D / 2)``: the mean itself while D <= eps,
    pulled toward the midpoint only as far as needed."""
    total, kept = float(weights @ q), float(weights.sum())
    if dropped > 0.0:
        mean = min(1.0, max(0.0, total / kept)) if kept > 0.0 else 0.5
        point, bound = certified(total, total + dropped, mean, eps)
        return total, point, bound
    return total, min(1.0, max(0.0, total)), 0.0


def certified(low: float, high: float, estimate: float, eps: float) -> tuple[float, float]:
    """``(point, bound)``: the point nearest ``estimate`` whose distance to both ends of ``[low, high]`` (where the
    truth lies) stays within ``max(eps, (high - low) / 2)``, and that distance."""
    allowed = max(eps, (high - low) / 2.0)
    point = min(max(estimate, high - allowed), low + allowed)
    return point, max(point - low, high - point)
