"""Shared-prefix reuse for causal decoders: the inputs of one ARES step share a long head (chat template, system
prompt, the question, often earlier steps), which runs once with a KV cache while only the suffixes run per row.

Used by :meth:`~ares_rerank.backbones.hf.HFBackbone.forward_logits` (the PRMs and the LLM judge) when
``prefix_cache`` is on: :func:`plan_batches` orders items by token ids and cuts batches where a new shared head starts,
:func:`shared_prefix_length` finds a batch's head, :func:`logits_with_shared_head` runs it (:func:`head_states`: the
head's pass and its cache, also what a local generative verifier samples from). Bidirectional encoders
(BERT, MiniLM) cannot reuse a prefix (a head's states depend on what follows): :func:`causal_cache_argument` tells
them apart. Torch and transformers are imported inside the functions that need them.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Sequence


__all__ = [
    "CALL_COST",
    "TokenStats",
    "causal_cache_argument",
    "forward_parameters",
    "head_states",
    "logits_with_shared_head",
    "output_logits",
    "plan_batches",
    "shared_prefix_length",
]

# The fixed cost of one model call, in token positions: what batching weighs against the tokens a shared head saves
# (a call with a shared head is two calls: the head, then the suffixes).
CALL_COST = 32


@dataclass
class TokenStats:
    """Token counters of the passes through :meth:`HFBackbone.forward_logits` (the PRMs and the LLM judge) since
    creation (or ``reset_stats()``).

    Attributes:
        tokens: Real (non-padding) token positions that reached the model; a shared head counts once per batch.
        positions: Positions computed, padding included (the compute actually spent).
        reused: Token positions not recomputed because a batch's shared head ran once: ``(batch - 1) * head``.
        shared_heads: Batches whose shared head ran once with a KV cache.
    """

    tokens: int = 0
    positions: int = 0
    reused: int = 0
    shared_heads: int = 0


def causal_cache_argument(model: Any) -> str | None:
    """The keyword ``model.forward`` takes a KV cache by, if the model is a causal decoder; else ``None``.

    A model qualifies when its forward names a cache argument (``cache`` in current transformers,
    ``past_key_values`` before the rename) and every attention module that says whether it is causal says so. A
    bidirectional encoder (BERT: ``is_causal=False``), a forward without a cache argument (remote code that takes
    only ``input_ids``) or anything that is not a torch module gets ``None``.
    """
    import torch

    if not isinstance(model, torch.nn.Module):
        return None
    params = forward_parameters(model)
    name = next((n for n in ("cache", "past_key_values") if n in params), None)
    flags = [m.is_causal for m in model.modules() if isinstance(getattr(m, "is_causal", None), bool)]
    return name if name is not None and flags and all(flags) else None


def forward_parameters(model: Any) -> frozenset[str]:
    """The parameter names of ``model.forward`` (empty when its signature cannot be read). Read once per backbone:
    :meth:`HFBackbone.__init__` keeps what :func:`logits_with_shared_head` needs."""
    try:
        return frozenset(inspect.signature(model.forward).parameters)
    except (AttributeError, TypeError, ValueError):
        return frozenset()


def shared_prefix_length(rows: Sequence[Sequence[int]]) -> int:
    """The longest token head all ``rows`` share, leaving every row at least one token of its own (0 for < 2 rows)."""
    if len(rows) < 2:
        return 0
    first, limit = rows[0], min(len(r) for r in rows) - 1
    n = 0
    while n < limit and all(r[n] == first[n] for r in rows):
        n += 1
    return n


def plan_batches(sequences: Sequence[Sequence[int]], batch_size: int, call_cost: int = CALL_COST,
                 shared_heads: bool = True) -> list[list[int]]:
    """Batches of indices, cut where the cost model says so: the positions computed (padding counted) plus
    ``call_cost`` per model call, minimised by dynamic programming over runs of at most ``batch_size`` items.

    With ``shared_heads`` (the prefix-cache path), items go in token-id (lexicographic) order, where items with a
    common head are neighbours and a run's common head is the shortest common head of neighbours within it; a batch
    whose head runs once costs ``head + n * (longest - head)`` and two calls. So a batch does not straddle two chains'
    inputs when that would cut their shared head short, and unrelated items still fill batches. Without (every
    other model), items go in length order and a batch costs ``n * longest``: a wave whose lengths spread widely
    (ARES's premise subsets: 40 to 400 tokens in one step) is cut where padding would cost more than a call, instead
    of every ``batch_size`` items (on PRMBench, 33% fewer positions for ARES, 4% for Entail-Prev).

    Returns:
        Lists of indices into ``sequences``; every index once.
    """
    if shared_heads:
        order = sorted(range(len(sequences)), key=lambda i: list(sequences[i]))
    else:
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    seqs = [sequences[i] for i in order]
    adjacent = [0] * len(seqs)  # the head each item shares with the one before it (none without shared_heads)
    if shared_heads:
        adjacent[1:] = [shared_prefix_length([seqs[j - 1], seqs[j]]) for j in range(1, len(seqs))]
    best, cut = [0.0] + [float("inf")] * len(seqs), [0] * (len(seqs) + 1)
    for end in range(1, len(seqs) + 1):
        head, longest, shortest = 1 << 62, 0, 1 << 62
        for start in range(end - 1, max(end - batch_size, 0) - 1, -1):
            longest, shortest = max(longest, len(seqs[start])), min(shortest, len(seqs[start]))
            n = end - start
            if n > 1:
                head = min(head, adjacent[start + 1])
            shared = min(head, shortest - 1) if n > 1 else 0
            cost = n * longest + call_cost
            if shared and (n - 1) * shared > call_cost:
                cost = min(cost, shared + n * (longest - shared) + 2 * call_cost)
            if best[start] + cost < best[end]:
                best[end], cut[end] = best[start] + cost, start
    batches, end = [], len(seqs)
    while end:
        batches.append(order[cut[end] : end])
        end = cut[end]
    return batches[::-1]


def logits_with_shared_head(model: Any, batch: dict[str, Any], head: int, cache_argument: str,
                            transform: Callable[[Any], Any], position_ids: bool) -> Any:
    """Logits of a right-padded ``batch`` from one pass over its first ``head`` tokens (shared by every row) and one
    over the suffixes on that KV cache, repeated to the batch; laid out as the full pass lays them out.

    Args:
        model: A causal decoder whose forward takes a cache by ``cache_argument`` (:func:`causal_cache_argument`).
        batch: ``{key: (rows, width)}`` tensors with ``attention_mask``; every row starts with the same ``head``
            tokens and keeps at least one of its own.
        head: The shared head's length.
        cache_argument: The forward keyword of the cache (``cache`` or ``past_key_values``).
        transform: Applied to each ``(rows, length, classes)`` piece of logits before they are joined.
        position_ids: Whether the forward takes ``position_ids`` (:func:`forward_parameters`); then the suffixes'
            positions are passed, continuing after the head.

    Returns:
        ``((rows, width, ...) logits, the filled cache)``, or ``None`` when the model did not fill the cache (the
        caller runs it whole).
    """
    import torch

    rows, width = batch["attention_mask"].shape
    ran = head_states(model, {key: value[:1, :head] for key, value in batch.items()}, cache_argument, rows)
    if ran is None:
        return None
    output, cache = ran
    head_logits = transform(output_logits(output))
    rest = {key: value[:, head:] for key, value in batch.items() if key != "attention_mask"}
    rest["attention_mask"] = batch["attention_mask"]  # (rows, width): the cached head, then each suffix
    if position_ids:  # positions continue after the head
        device = batch["attention_mask"].device
        rest["position_ids"] = torch.arange(head, width, device=device).expand(rows, -1)
    tail_logits = transform(output_logits(model(**rest, **{cache_argument: cache}, use_cache=True)))
    return torch.cat([head_logits.expand(rows, *head_logits.shape[1:]), tail_logits], dim=1), cache


def head_states(model: Any, head: dict[str, Any], cache_argument: str, rows: int,
                logits: bool = True) -> tuple[Any, Any] | None:
    """One pass over a ``(1, length)`` input (``head``: ``{key: tensor}`` with ``attention_mask``) filling a fresh KV
    cache, then the cache repeated to ``rows`` rows: ``(the model's output, the cache)``, or ``None`` when the model
    did not fill it. Without ``logits``, a model that takes ``logits_to_keep`` computes its last position's only
    (the LM head over a whole prompt is a fifth of a small model's work)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    keep = {} if logits or "logits_to_keep" not in forward_parameters(model) else {"logits_to_keep": 1}
    output = model(**head, **{cache_argument: cache}, use_cache=True, **keep)
    if cache.get_seq_length() != head["attention_mask"].shape[1]:
        return None
    if rows > 1:
        cache.batch_repeat_interleave(rows)  # (1, heads, length, dim) -> (rows, heads, length, dim) per layer
    return output, cache


def output_logits(output: Any) -> Any:
    """``output.logits``, or the first element of a tuple output (some remote-code models)."""
    return output.logits if hasattr(output, "logits") else output[0]
