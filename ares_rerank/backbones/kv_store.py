"""Prefix reuse across calls for causal decoders: the KV cache of recent inputs, kept so that a later input that
extends one runs only its new tokens.

Within one call, :meth:`~ares_rerank.backbones.hf.HFBackbone.forward_logits` runs a batch's shared head once
(:mod:`~ares_rerank.backbones.prefix`). Across calls the inputs grow: ARES scores step k+1 after step k, and at prior 1
with a confident PRM the input for step k+1 is the input for step k plus one step (the question, every earlier step,
the judged one); a whole-chain pass extends every prefix. Without this store each of those inputs is read from its
first token, so the tokens that reach the model grow with the square of the chain's length.

:class:`PrefixStore` keeps, per input read, the per-layer keys and values of its one row and its (transformed) logits
at every position, least recently used first out, bounded in bytes. A new input takes the stored input with which it
shares the longest head, a view of that head's keys and values as its cache, the stored logits for those positions,
and runs only the rest (the values agree with the full pass to float rounding). Only plain full-attention layers are
stored: a model with sliding-window or other cache layers turns the store off. An input stored while a shorter one
it extends is stored drops that one (its head is in the new one), so a chain scored step by step keeps one input.

What it holds: per token, ``2 * layers * kv_heads * head_dim`` numbers (SmolLM2-135M in float32: 46 KB; a 7B Qwen2 in
bfloat16: 57 KB), so 1 GiB holds about 20,000 tokens: ARES on 20 chains of 600 tokens at once, or 35 of them.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Hashable, Sequence


__all__ = ["ANCHOR", "PrefixStore", "StoredInput"]

# Inputs are indexed by their first ANCHOR token ids (a chat template's head plus the start of the question); shorter
# inputs are not stored (too short to be worth a call of their own).
ANCHOR = 16


@dataclass
class StoredInput:
    """One input read earlier: its token ids (a numpy array), per layer ``(keys, values)`` of shape
    ``(1, kv_heads, length, head_dim)``, and its transformed logits ``(length, ...)``."""

    ids: Any
    layers: list[tuple[Any, Any]]
    logits: Any
    nbytes: int


class PrefixStore:
    """Recent inputs' KV caches and logits, keyed by the caller's transform and the token ids (module docstring).

    Args:
        max_bytes: The most it holds (keys, values and logits); the least recently used input goes first.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self._entries: OrderedDict[tuple[Hashable, bytes], StoredInput] = OrderedDict()
        self._index: dict[tuple[Hashable, tuple[int, ...]], set[tuple[Hashable, bytes]]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def longest(self, transform_key: Hashable, ids: Sequence[int]) -> tuple[StoredInput | None, int]:
        """The stored input sharing the longest head with ``ids`` (read with the same transform), and that length,
        at most ``len(ids) - 1`` (the input keeps at least one token of its own); ``(None, 0)`` when none."""
        import numpy as np

        if len(ids) <= ANCHOR:
            return None, 0
        keys = self._index.get((transform_key, tuple(ids[:ANCHOR])), ())
        query = np.asarray(ids, dtype=np.int64)
        best, length = None, 0
        for key in keys:
            stored = self._entries[key].ids
            n = min(len(stored), len(query))
            differ = np.flatnonzero(stored[:n] != query[:n])
            shared = int(differ[0]) if differ.size else n
            if shared > length:
                best, length = key, shared
        if best is None:
            return None, 0
        self._entries.move_to_end(best)
        return self._entries[best], min(length, len(ids) - 1)

    def put(self, transform_key: Hashable, ids: Sequence[int], layers: list[tuple[Any, Any]], logits: Any) -> None:
        """Keep one input (its layers and logits are stored as given: pass tensors that nothing else writes to)."""
        import numpy as np

        if len(ids) <= ANCHOR:
            return
        array = np.asarray(ids, dtype=np.int64)
        key = (transform_key, array.tobytes())
        nbytes = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        nbytes += logits.numel() * logits.element_size()
        if key in self._entries or nbytes > self.max_bytes:
            return
        anchor = (transform_key, tuple(array[:ANCHOR].tolist()))
        for old_key in list(self._index.get(anchor, ())):  # an input this one extends is covered by it: drop it
            old = self._entries[old_key].ids
            if len(old) < len(array) and (array[: len(old)] == old).all():
                self._drop(old_key)
        self._entries[key] = StoredInput(array, layers, logits, nbytes)
        self._index.setdefault(anchor, set()).add(key)
        self.nbytes += nbytes
        while self.nbytes > self.max_bytes:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: tuple[Hashable, bytes]) -> None:
        old = self._entries.pop(key)
        anchor = (key[0], tuple(old.ids[:ANCHOR].tolist()))
        self._index[anchor].discard(key)
        if not self._index[anchor]:
            del self._index[anchor]
        self.nbytes -= old.nbytes

    def clear(self) -> None:
        self._entries.clear()
        self._index.clear()
        self.nbytes = 0
