"""The pair cache the model backbones share: an LRU mapping, work counters, and one lookup-compute-store pass.

Every backbone that runs a model (the Hugging Face backbones in :mod:`~ares_rerank.backbones.hf` and its
subclasses, the served :class:`~ares_rerank.backbones.openai_judge.OpenAIJudge`) answers a call the same way:

1. each pair is keyed by what the model will read (:func:`pair_keys`): the premises its selector keeps, their roles
   (PRMs render base claims and earlier steps apart), and the hypothesis;
2. :func:`cached_values` computes each distinct key not in the :class:`LRUCache` once, in one batch, stores it, and
   answers the rest from the cache (a duplicate in the same call counts as a cache hit).

Whole-chain scores (PRM whole-chain, LLM-Judge) go through the same pass with one key per chain
(:func:`cached_value`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

from .base import check_pairs
from .selection import PremiseSelector, apply_selector


__all__ = ["LRUCache", "PairKey", "ScoringStats", "cached_value", "cached_values", "pair_keys"]

# (selected premises, their roles or None, hypothesis): what a model backbone reads for one pair.
PairKey = tuple[tuple[str, ...], tuple[str, ...] | None, str]


@dataclass
class ScoringStats:
    """Counters of one backbone's work since creation (or its ``reset_stats()``).

    Attributes:
        forward_passes: Model forward calls (one per batch, two for a batch whose shared head ran once), or requests
            sent to a server.
        pairs_computed: (premises, hypothesis) items that went through the model.
        cache_hits: Items answered from the cache (or by a duplicate in the same call).
        pairs_windowed: Items whose premises did not fit the window, so the window policy dropped some.
        premises_dropped: Premises dropped by the window policy, summed over items.
        hypotheses_truncated: Steps cut to fit the window alone (``overlong_steps="truncate"``).
    """

    forward_passes: int = 0
    pairs_computed: int = 0
    cache_hits: int = 0
    pairs_windowed: int = 0
    premises_dropped: int = 0
    hypotheses_truncated: int = 0


class LRUCache:
    """A bounded mapping that forgets the least recently used entry first.

    Args:
        maxsize: How many entries it keeps; 0 keeps none (every lookup misses).
    """

    def __init__(self, maxsize: int) -> None:
        if not isinstance(maxsize, int) or isinstance(maxsize, bool) or maxsize < 0:
            raise ValueError(f"cache_size={maxsize!r} must be a non-negative integer (0 disables the cache).")
        self.maxsize = maxsize
        self._data: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value stored for ``key`` (now the most recently used), else ``default``."""
        if key not in self._data:
            return default
        self._data.move_to_end(key)
        return self._data[key]

    def put(self, key: Hashable, value: Any) -> None:
        """Store ``value`` for ``key``, forgetting the least recently used entries beyond ``maxsize``."""
        if self.maxsize == 0:
            return
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        self._data.clear()


def pair_keys(
    selector: PremiseSelector,
    premises: Sequence[Sequence[str]],
    hypotheses: Sequence[str],
    roles: Sequence[Sequence[str] | None] | None = None,
) -> list[PairKey]:
    """One cache key per pair: the premises ``selector`` keeps (in order), their roles, and the hypothesis.

    Args:
        selector: The backbone's premise selection (applied here, before the cache).
        premises: Included claims per pair.
        hypotheses: One hypothesis per premise list.
        roles: Per pair, one role per premise (e.g. ``"base"`` / ``"step"``), or ``None`` for a backbone that
            renders every premise alike.

    Returns:
        ``(selected premises, their roles or None, hypothesis)`` per pair, all strings.
    """
    premises, hypotheses = check_pairs(premises, hypotheses)
    keys = []
    for claims, claim_roles, hypothesis in zip(premises, roles or [None] * len(premises), hypotheses):
        kept = apply_selector(selector, claims, hypothesis)
        selected_roles = None if claim_roles is None else tuple(claim_roles[j] for j in kept)
        keys.append((tuple(claims[j] for j in kept), selected_roles, hypothesis))
    return keys


def cached_values(
    cache: LRUCache,
    stats: ScoringStats,
    keys: Sequence[Hashable],
    compute: Callable[[list[Hashable]], Sequence[Any]],
) -> list[Any]:
    """The value of every key: each distinct key missing from ``cache`` is computed once, in ONE ``compute`` call.

    Args:
        cache: Looked up first; every computed value is stored in it.
        stats: ``stats.cache_hits`` counts keys answered from the cache or by a duplicate earlier in ``keys``.
        keys: Hashable keys, e.g. from :func:`pair_keys`.
        compute: ``compute(missing keys) -> one value per key``, in order; not called when nothing is missing.

    Returns:
        One value per key of ``keys``, in order.
    """
    todo: dict[Hashable, None] = {}
    for key in keys:
        if key in cache or key in todo:
            stats.cache_hits += 1
        else:
            todo[key] = None
    fresh: dict[Hashable, Any] = {}
    if todo:
        values = list(compute(list(todo)))
        if len(values) != len(todo):
            raise RuntimeError(f"compute returned {len(values)} values for {len(todo)} keys: return one per key.")
        fresh = dict(zip(todo, values))
    results = {key: cache.get(key) for key in keys if key not in fresh}
    results.update(fresh)
    for key, value in fresh.items():
        cache.put(key, value)
    return [results[key] for key in keys]


def cached_value(cache: LRUCache, stats: ScoringStats, key: Hashable, compute: Callable[[], Any]) -> Any:
    """:func:`cached_values` for one key: the cached value, else ``compute()`` (then stored)."""
    return cached_values(cache, stats, [key], lambda _: [compute()])[0]
