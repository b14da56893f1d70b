"""Score records -> what a trainer reads: one finite reward per completion, per-completion statistics for its
logs, and where each step ends in the response. The one conversion for TRL (:mod:`~ares_rerank.rewards.trl`),
OpenRLHF (:mod:`~ares_rerank.rewards.openrlhf`) and verl (:mod:`~ares_rerank.rewards.verl`).

The statistics (:data:`STATS`, per completion, docs/CONVENTIONS.md): ``scored`` (1 or 0), ``num_steps``,
``first_error`` (the first step with tau <= threshold, -1 when none), ``flagged_frac`` (the fraction of steps with
tau <= threshold) and ``evaluations`` (distinct backbone inputs asked). TRL logs ``<reward name>/<stat>`` (``scored``
over every completion, the others over the scored ones); OpenRLHF's ``extra_logs`` and verl's
``reward_extra_info`` carry ``ares_<stat>`` per completion, with 0 (``first_error``: -1) where unscored, since they
turn every value into a float tensor.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Sequence

from ..utils.checks import is_finite_number


__all__ = ["LOG_KEYS", "STATS", "completion_logs", "completion_stats", "reward_values", "step_ends"]

logger = logging.getLogger(__name__)

#: The per-completion statistics, in order.
STATS = ("scored", "num_steps", "first_error", "flagged_frac", "evaluations")
#: Their names in OpenRLHF's ``extra_logs`` and verl's ``reward_extra_info``.
LOG_KEYS = tuple(f"ares_{name}" for name in STATS)


def completion_stats(records: Sequence[dict[str, Any]], threshold: float) -> dict[str, list[float | None]]:
    """:data:`STATS` -> one value per record, aligned to ``records``; ``None`` where the record was not scored
    (``scored`` is 0.0 there)."""
    stats: dict[str, list[float | None]] = {name: [] for name in STATS}
    for record in records:
        scored = record["score"] is not None
        stats["scored"].append(float(scored))
        if not scored:
            for name in STATS[1:]:
                stats[name].append(None)
            continue
        steps = record["step_scores"]
        stats["num_steps"].append(float(len(steps)))
        stats["first_error"].append(float(record["first_error"]))
        stats["flagged_frac"].append(sum(s <= threshold for s in steps) / len(steps) if steps else 0.0)
        stats["evaluations"].append(float((record.get("certificate") or {}).get("evaluations") or 0))
    return stats


def completion_logs(records: Sequence[dict[str, Any]], threshold: float) -> dict[str, list[float]]:
    """:func:`completion_stats` under :data:`LOG_KEYS`, never ``None`` (OpenRLHF turns each list into a float tensor
    and averages it): an unscored completion has 0.0, and -1.0 as its ``ares_first_error``."""
    unscored = {"first_error": -1.0}
    return {f"ares_{name}": [unscored.get(name, 0.0) if v is None else float(v) for v in values]
            for name, values in completion_stats(records, threshold).items()}


def reward_values(records: Sequence[dict[str, Any]], unscorable_value: float) -> list[float]:
    """One finite reward per record: its score, or ``unscorable_value`` where it has none (what
    ``AresReward(reranker, unscorable_value=...)`` returns for the same records)."""
    if not is_finite_number(unscorable_value):
        raise ValueError(f"unscorable_value={unscorable_value!r} must be a finite number (RL trainers need a float "
                         "for every completion), e.g. 0.0.")
    for record in records:
        if record["error"] and record["score"] is None:
            logger.debug("completion %d is unscorable: %s", record["index"], record["error"])
    return [float(unscorable_value) if r["score"] is None else float(r["score"]) for r in records]


def step_ends(text: str, steps: Sequence[str]) -> list[int]:
    """For each step (in order, as ``split_steps`` cut them from ``text``), the character offset in ``text`` just
    past its end.

    Steps are stripped pieces of ``text`` in order, found from where the previous one ended; a step whose whitespace
    was normalised (a ``\\r\\n`` line ending) is matched with any whitespace between its words. A step found nowhere
    (it cannot happen for steps that ``split_steps`` cut from ``text``) ends at the end of the text.
    """
    ends, cursor = [], 0
    for step in steps:
        start = text.find(step, cursor)
        if start >= 0:
            end = start + len(step)
        else:
            pattern = r"\s+".join(re.escape(word) for word in step.split())
            match = re.compile(pattern).search(text, cursor) if pattern else None
            end = match.end() if match else len(text)
        ends.append(end)
        cursor = end
    return ends
