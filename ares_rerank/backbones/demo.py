"""No silent demo: notice when the embedded demo head scores text outside its domain, and say so once, loudly.

The head shipped in ``ares_rerank/default_head`` is an entailment head trained on ClaimTrees rule chains and cooking
recipes only. On a math problem its scores carry no signal (the head shipped before it gave every step of every
candidate 0.006-0.09), so a reranker picks at random and GRPO scales near-constant or random rewards up to full-size
advantages. :class:`~ares_rerank.rerank.AresReranker` (and so
:class:`~ares_rerank.rewards.AresReward` and :class:`~ares_rerank.rerank.AresFilter`) checks each scoring call with
:func:`off_domain_reason` while its backbone :func:`is_demo_backbone`, and warns once per reranker with
:class:`DemoBackboneWarning`, naming what to pass instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Sequence


__all__ = ["DEMO_DOMAIN", "DemoBackboneWarning", "demo_warning_message", "is_demo_backbone", "off_domain_reason"]

#: The domain of the embedded head; a backbone whose ``domain`` attribute (or calibration ``"domain"``) names it is
#: treated as the demo.
DEMO_DOMAIN = "claimtrees"

#: Scores at or below this, for every step of a call, are "pinned near 0".
PINNED_SCORE = 0.1
_MIN_PINNED_STEPS = 4
_MIN_PINNED_CHAINS = 2

# Math-shaped text: an equation, LaTeX, a dollar sign or digit-operator-digit. ClaimTrees claims have none of these
# (their rules are written "A1 -> B1").
_MATH = re.compile(r"=|\\[a-zA-Z]+|\$|\d\s*[-+*/^×÷]\s*\d")


class DemoBackboneWarning(UserWarning):
    """The embedded demo head (ClaimTrees rule chains and recipes only) is scoring text that does not look like its
    domain."""


def _attribute(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name, None)
    except Exception:  # noqa: BLE001 -- a backbone's __getattr__ may raise anything; then it has no such attribute
        return None


def _names_demo_domain(value: Any) -> bool:
    return isinstance(value, str) and DEMO_DOMAIN in value.lower()


def is_demo_backbone(backbone: Any) -> bool:
    """Whether ``backbone`` is the embedded demo head: loaded from the shipped folder (``backbone.source`` is
    :data:`~ares_rerank.backbones.hub.DEFAULT_HEAD_DIR`), or stating a ClaimTrees domain (a ``domain`` attribute, or
    the ``"domain"`` of its ``calibration`` mapping, as a copy of the head calibrated elsewhere carries)."""
    calibration = _attribute(backbone, "calibration")
    if _names_demo_domain(_attribute(backbone, "domain")) or (
        isinstance(calibration, Mapping) and _names_demo_domain(calibration.get("domain"))
    ):
        return True
    source = _attribute(backbone, "source")
    if not isinstance(source, (str, Path)) or not str(source):
        return False
    from .hub import DEFAULT_HEAD_DIR

    try:
        return Path(source).resolve() == DEFAULT_HEAD_DIR.resolve()
    except (OSError, RuntimeError, ValueError):
        return False


def off_domain_reason(steps: Sequence[Sequence[str]], step_scores: Sequence[Sequence[float]]) -> str | None:
    """Why the chains of one scoring call look outside the demo head's domain, or ``None``.

    Args:
        steps: The steps of each scored chain.
        step_scores: Their scores (same shape).

    Returns:
        A reason when most steps are math-shaped (equations, LaTeX, arithmetic), or when every step of at least
        two chains (four steps in all) scored at most :data:`PINNED_SCORE`; else ``None``.
    """
    flat_steps = [s for chain in steps for s in chain]
    if flat_steps and 2 * sum(bool(_MATH.search(s)) for s in flat_steps) > len(flat_steps):
        return f"{sum(bool(_MATH.search(s)) for s in flat_steps)} of its {len(flat_steps)} steps look like math"
    flat_scores = [float(x) for chain in step_scores for x in chain]
    if (
        len(step_scores) >= _MIN_PINNED_CHAINS
        and len(flat_scores) >= _MIN_PINNED_STEPS
        and max(flat_scores) <= PINNED_SCORE
    ):
        return (
            f"every one of the {len(flat_scores)} steps of {len(step_scores)} candidates scored at most "
            f"{PINNED_SCORE} (pinned near 0)"
        )
    return None


def demo_warning_message(owner: str, reason: str) -> str:
    """The warning text: what is wrong, why it matters, and what to pass instead."""
    return (
        f"{owner} is scoring with the embedded demo head (an entailment head trained on ClaimTrees rule chains "
        f"and cooking recipes only), and {reason}: these scores are not meaningful (a reranker picks at random; GRPO "
        "scales such rewards up to full-size advantages). Pass a backbone for your domain: a process reward model "
        "(load_backbone('Qwen/Qwen2.5-Math-PRM-7B'); the published PRM families are listed in docs/PRMS.md), an LLM "
        "judge (kind='judge', or kind='openai' for a served one) or a head you trained; on the command line "
        "--backbone PATH [--kind prm-qwen|prm-math-shepherd|prm-rlhflow|prm-skywork|prm-trl|judge]; for "
        "ares_rerank.rewards.ares_reward set ARES_RERANK_BACKBONE and ARES_RERANK_KIND."
    )
