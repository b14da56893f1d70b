"""Per-step scores -> one chain score, for reranking, rewards and filters.

Data flow: :class:`~ares_rerank.chain.ChainScores` (``tau_k`` per step) -> an aggregate -> one float per chain.

- ``final``: the last step's score. Under ARES a step is scored on the accepted earlier claims only, so an
  unsupported step anywhere drags every step that depends on it down: the final step reflects the whole chain.
- ``mean``: the step average ("step avg" in the paper's best-of-2 table).
- ``min``: the weakest step.
- ``product``: the product of step scores (the chance every step holds if they were independent; harsh on long
  chains).

Any callable ``fn(step_scores: list[float]) -> float`` works too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Callable, Sequence, Union

from .utils.checks import is_finite_number, is_number


__all__ = ["AGGREGATES", "Aggregate", "aggregate_name", "aggregate_scores", "get_aggregate"]

Aggregate = Union[str, Callable[[Sequence[float]], float]]


def _final(scores: Sequence[float]) -> float:
    return float(scores[-1])


def _mean(scores: Sequence[float]) -> float:
    return float(sum(scores) / len(scores))


def _min(scores: Sequence[float]) -> float:
    return float(min(scores))


def _product(scores: Sequence[float]) -> float:
    return float(math.prod(scores))


AGGREGATES: dict[str, Callable[[Sequence[float]], float]] = {
    "final": _final,
    "mean": _mean,
    "min": _min,
    "product": _product,
}


def get_aggregate(aggregate: Aggregate) -> Callable[[Sequence[float]], float]:
    """Resolve an aggregate name (a key of :data:`AGGREGATES`) or a callable to a callable.

    Raises:
        ValueError: An unknown name.
        TypeError: Neither a string nor a callable.
    """
    if isinstance(aggregate, str):
        if aggregate not in AGGREGATES:
            raise ValueError(
                f"aggregate={aggregate!r} is unknown: use one of {sorted(AGGREGATES)} or pass a callable "
                "fn(step_scores: list[float]) -> float."
            )
        return AGGREGATES[aggregate]
    if callable(aggregate):
        return aggregate
    raise TypeError(
        f"aggregate must be a name ({sorted(AGGREGATES)}) or a callable fn(step_scores) -> float, "
        f"got {type(aggregate).__name__}."
    )


def aggregate_name(aggregate: Aggregate) -> str:
    """A short name for logs and metric keys: the registry key, or the callable's ``__name__``."""
    if isinstance(aggregate, str):
        return aggregate
    return getattr(aggregate, "__name__", type(aggregate).__name__)


def aggregate_scores(step_scores: Sequence[float], aggregate: Aggregate = "final") -> float:
    """One chain score from per-step scores.

    Args:
        step_scores: ``tau_k`` per step (at least one).
        aggregate: A name from :data:`AGGREGATES` or a callable ``fn(step_scores) -> float``.

    Returns:
        The chain score as a float.

    Raises:
        ValueError: No step scores, a non-finite step score, or the aggregate returned a non-finite value.
    """
    fn = get_aggregate(aggregate)
    if isinstance(step_scores, (str, bytes, Mapping)) or not isinstance(step_scores, Iterable):
        raise TypeError(f"aggregate_scores(step_scores={step_scores!r:.60}) must be a list of step scores (floats in "
                        "[0, 1]), e.g. ChainScores.step_scores.")
    scores = list(step_scores)
    wrong = next((i for i, s in enumerate(scores) if not is_number(s)), None)
    if wrong is not None:  # "12" was read as 12.0, None raised float()'s own TypeError
        raise TypeError(f"aggregate_scores(step_scores=...) holds {scores[wrong]!r} at step {wrong}: step scores are "
                        "numbers in [0, 1].")
    if not scores:
        raise ValueError("aggregate_scores(step_scores=[]) has nothing to aggregate: a chain has at least one step.")
    bad = [i for i, s in enumerate(scores) if not is_finite_number(s)]
    if bad:  # min() and max() would skip a NaN silently
        raise ValueError(
            f"aggregate_scores(step_scores=...) holds {scores[bad[0]]!r} at step {bad[0]} ({len(bad)} non-finite in "
            f"all): step scores must be finite (ARES scores lie in [0, 1]); check the backbone that produced them."
        )
    scores = [float(s) for s in scores]
    outside = next((i for i, s in enumerate(scores) if not 0.0 <= s <= 1.0), None)
    if outside is not None:
        raise ValueError(f"aggregate_scores(step_scores=...) holds {scores[outside]!r} at step {outside}: step scores "
                         "lie in [0, 1] (ARES, the baselines and PRMs give probabilities).")
    value = fn(scores)
    if not is_number(value):  # a string "0.7" was taken as 0.7
        raise TypeError(
            f"aggregate {aggregate_name(aggregate)!r} returned {value!r}; it must return one float per chain."
        )
    if not is_finite_number(value):
        raise ValueError(
            f"aggregate {aggregate_name(aggregate)!r} returned {value!r} for step scores {scores}: return a finite "
            "float."
        )
    return float(value)
