"""Baselines from the ARES paper, with the same backbone and rendering as ARES (ARES_SPEC section 4).

Each is a deterministic function of the chain: every (premises, step) pair it needs, across all chains, goes to
the backbone in one call.

- ``entail-prev``: E(all base claims + all earlier steps, step).
- ``entail-base``: E(base claims only, step).
- ``roscoe-li-self``: min over earlier steps j of E([C_j], step); the first step scores 1.
- ``roscoe-li-source``: min over base claims j of E([B_j], step).
- ``receval-inter``: min over all earlier claims j (base and steps) of E([C_j], step).
- ``prm-chain`` / ``llm-judge``: one pass over the whole chain by a :class:`ChainBackbone`.

A min over an empty set (no base claims, or the first step of ``roscoe-li-self``) is 1.0: nothing contradicts it.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from .backbones.base import Backbone, ChainBackbone, PairBatch, check_probabilities
from .chain import Chain, ChainScores


__all__ = ["BASELINES", "CHAIN_BASELINES", "baseline_scores", "check_method_backbone"]

# For one chain: per step, the premise sets whose entailment of the step is min-reduced into the step's score;
# each set is (claims, how many of them are base claims).
PremiseSet = tuple[list[str], int]
PremiseSets = Callable[[Chain], list[list[PremiseSet]]]


def _entail_prev(chain: Chain) -> list[list[PremiseSet]]:
    return [[(list(chain.base_claims) + list(chain.steps[:k]), chain.num_base)] for k in range(chain.num_steps)]


def _entail_base(chain: Chain) -> list[list[PremiseSet]]:
    return [[(list(chain.base_claims), chain.num_base)] for _ in range(chain.num_steps)]


def _roscoe_li_self(chain: Chain) -> list[list[PremiseSet]]:
    return [[([s], 0) for s in chain.steps[:k]] for k in range(chain.num_steps)]


def _roscoe_li_source(chain: Chain) -> list[list[PremiseSet]]:
    return [[([b], 1) for b in chain.base_claims] for _ in range(chain.num_steps)]


def _receval_inter(chain: Chain) -> list[list[PremiseSet]]:
    claims = chain.claims
    return [[([claims[j]], int(j < chain.num_base)) for j in range(chain.num_base + k)] for k in range(chain.num_steps)]


BASELINES: dict[str, PremiseSets] = {
    "entail-base": _entail_base,
    "entail-prev": _entail_prev,
    "receval-inter": _receval_inter,
    "roscoe-li-self": _roscoe_li_self,
    "roscoe-li-source": _roscoe_li_source,
}
CHAIN_BASELINES = ("llm-judge", "prm-chain")


def baseline_scores(chains: Sequence[Chain], backbone: Backbone, method: str) -> list[ChainScores]:
    """Score every step of every chain with baseline ``method`` (a key of :data:`BASELINES` or a chain baseline)."""
    if method in CHAIN_BASELINES:
        return _whole_chain_scores(chains, backbone, method)
    if method not in BASELINES:
        known = sorted(BASELINES) + list(CHAIN_BASELINES)
        raise ValueError(f"method={method!r} is not a baseline: use one of {known}.")
    batch = PairBatch()  # a pair needed by several steps or chains is asked once
    slots = []  # chain -> step -> indices into the one backbone call
    for chain in chains:
        plan = BASELINES[method](chain)
        slots.append([[batch.add(included, step, n_base) for included, n_base in sets]
                      for step, sets in zip(chain.steps, plan)])
    values = batch.call(backbone)
    out = []
    for chain, chain_slots in zip(chains, slots):
        scores = [float(values[s].min()) if s else 1.0 for s in chain_slots]
        # Distinct pairs this chain needed, per step (a pair shared by two steps of the chain is counted once).
        seen: set[int] = set()
        per_step = []
        for s in chain_slots:
            new = set(s) - seen
            seen |= new
            per_step.append(len(new))
        out.append(
            ChainScores(scores, sum(per_step), per_step, method=method, mode="direct", chain_id=chain.id)
        )
    return out


def check_method_backbone(method: str, backbone: Any) -> None:
    """A TypeError when ``method`` is a whole-chain baseline (:data:`CHAIN_BASELINES`) and ``backbone`` cannot score
    a whole chain (no ``chain_step_probs``); nothing otherwise."""
    if method in CHAIN_BASELINES and not hasattr(backbone, "chain_step_probs"):
        raise TypeError(
            f"method={method!r} needs a backbone that scores a whole chain in one pass (chain_step_probs), and "
            f"{backbone!r} has none: use a PRM backbone (a kind 'prm-...', docs/PRMS.md) for 'prm-chain' or a judge "
            "backbone (kind='judge') for 'llm-judge'."
        )


def _whole_chain_scores(chains: Sequence[Chain], backbone: Backbone, method: str) -> list[ChainScores]:
    check_method_backbone(method, backbone)
    whole: ChainBackbone = backbone  # type: ignore[assignment]
    out = []
    for chain in chains:
        # one finite probability in [0, 1] per step, or our TypeError / ValueError naming the backbone
        raw = check_probabilities(whole.chain_step_probs(chain.base_claims, chain.steps), chain.steps, backbone)
        if getattr(whole, "one_pass_chain", True):
            per_step = [0] * chain.num_steps
            per_step[-1] = 1  # one pass over the whole chain
        else:  # a model that reads one value per input (Universal-PRM): one input per prefix
            per_step = [1] * chain.num_steps
        out.append(ChainScores(raw.tolist(), sum(per_step), per_step, method=method, mode="direct",
                               chain_id=chain.id))
    return out
