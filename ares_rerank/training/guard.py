"""What adapting must not lose: chains in wordings the head never saw, and the forgetting check before saving.

A user's chains say nothing about the wordings they do not use, and replaying the head's own training mix guards only
the wordings that mix had: adapting to one new wording cost a second unseen one 0.08 ARES macro-F1 at the threshold
0.5 (issue 51). Two sets of generated chains, in wordings drawn fresh for every run, cover the rest:

- **guard chains** (:func:`fresh_wording_chains` with ``purpose="guard"``): replayed beside the mix and fitted to
  what the head said about them before adapting (a distillation on text neither the mix nor the user shows);
- **check chains** (``purpose="check"``): never trained on; their ARES macro-F1 at 0.5, before and after, is the
  forgetting check, and :func:`back_off` lowers the averaging weight until the drop stays within a bound.

Both are the mix's own generator (:func:`~ares_rerank.training.mix.training_chains`) with half random wordings
(:func:`~ares_rerank.training.wordings.random_templates`) and half composed ones (paraphrase-style: one rule, fact and
step form each), at generator indices and mix seeds no head mix uses, and with every wording the head's mix had
left out, so that neither set repeats what the head was trained on.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

from ..chain import Chain
from .mix import MixArguments, training_chains


__all__ = ["BACK_OFF_FACTORS", "GUARD_PURPOSES", "back_off", "fresh_wording_chains", "guard_pairs"]

# First generator index of each purpose, plus 100,000 per run seed: apart from the evaluation's 0..999, every mix's
# (from 1,000; the shipped head's from 11,000,000) and training/measure_adapt.py's user chains (from 20,000).
GUARD_PURPOSES = {"guard": 40_000_000, "check": 60_000_000}
# The averaging weights a failed forgetting check tries next, as fractions of the one asked for; 0 is the head itself.
BACK_OFF_FACTORS = (0.7, 0.5, 0.35, 0.2, 0.0)
# Chains of a check longer than this many states are not drawn: ARES on them costs the CPU minutes, and the check is
# about wordings, not length (the head's own test split covers the lengths of its mix).
CHECK_MAX_LENGTH = 10


def fresh_wording_chains(mix: MixArguments | None, n: int, seed: int, purpose: str,
                         exclude: Sequence[str] = ()) -> list[Chain]:
    """``n`` labelled ClaimTrees chains in wordings drawn for this run: half random, half composed.

    Args:
        mix: The head's mix (names, shapes, premise selection as it was trained with), or ``None`` for the mix
            defaults.
        n: How many chains.
        seed: The run's seed; another seed draws other wordings and chains.
        purpose: ``"guard"`` (replayed) or ``"check"`` (the forgetting check): disjoint indices and wordings.
        exclude: Template keys (``meta["template"]``) not to use: those of the head's mix.

    Returns:
        The chains, ids ``fresh-<purpose>-<i>-...``, ``meta["template"]`` their wording key, recipe-free.
    """
    if purpose not in GUARD_PURPOSES:
        raise ValueError(f"purpose={purpose!r} must be one of {sorted(GUARD_PURPOSES)}.")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n={n!r} must be an integer >= 0.")
    if n == 0:
        return []
    base = mix if mix is not None else MixArguments()
    lengths = list(base.lengths)
    if purpose == "check":
        lengths = [k for k in lengths if k <= CHECK_MAX_LENGTH] or [min(lengths)]
    drawn = replace(base, chains_file=None, num_chains=n, recipe_share=0.0, random_wording_share=0.5,
                    composed_share=1.0, lengths=lengths, multi_source_share=0.0 if purpose == "check"
                    else base.multi_source_share, first_index=GUARD_PURPOSES[purpose] + 100_000 * seed,
                    mix_seed=GUARD_PURPOSES[purpose] + seed)
    banned, chains, rounds = set(exclude), [], 0
    while len(chains) < n:  # a draw that repeats one of the head's wordings is redrawn with the next indices
        if rounds == 20:
            raise RuntimeError(f"fresh_wording_chains: 20 draws of {n} chains repeated the head's wordings.")
        batch = training_chains(replace(drawn, first_index=drawn.first_index + rounds * n, mix_seed=drawn.mix_seed
                                        + 7919 * rounds))
        chains += [c for c in batch if c.meta["template"] not in banned][:n - len(chains)]
        rounds += 1
    return [Chain(c.base_claims, c.steps, labels=c.labels, id=f"fresh-{purpose}-{i}-{c.id.split('-', 2)[2]}",
                  meta={**c.meta, "purpose": purpose}) for i, c in enumerate(chains)]


def back_off(weight: float, blend: Callable[[float], None], measure: Callable[[], float], before: float,
             bound: float) -> dict[str, Any]:
    """The largest averaging weight, from ``weight`` down (:data:`BACK_OFF_FACTORS`), whose check score stays within
    ``bound`` of ``before``; the model is left blended at it.

    Args:
        weight: The averaging weight asked for (``adapted_weight``).
        blend: Sets the model to ``w`` x adapted + (1 - w) x original weights, for a given ``w``.
        measure: The check score of the model as it is now (ARES macro-F1 at 0.5 of the check chains).
        before: The check score of the original head.
        bound: The largest drop that holds.

    Returns:
        ``{"adapted_weight": the weight kept, "held": bool, "tries": [[w, score], ...], "score": its score}``;
        ``held`` is False only when even weight 0 (the original head) measured below the bound, which a head's own
        weights cannot do unless ``measure`` is not deterministic.
    """
    tries: list[list[float]] = []
    for factor in (1.0, *BACK_OFF_FACTORS):
        w = round(weight * factor, 4)
        if tries and w == tries[-1][0]:
            continue
        blend(w)
        score = float(measure())
        tries.append([w, score])
        if before - score <= bound:
            return {"adapted_weight": w, "held": True, "tries": tries, "score": score}
    best = max(tries, key=lambda t: (t[1], t[0]))  # nothing held: the weight that lost least
    blend(best[0])
    return {"adapted_weight": best[0], "held": False, "tries": tries, "score": best[1]}


def guard_pairs(chains: Sequence[Chain], mix: MixArguments | None, premise_selection: str, seed: int,
                per_source: int | None) -> dict[str, list[dict[str, Any]]]:
    """The training pairs of guard ``chains`` (built as the mix builds its own: its subsets per step and minimal
    pairs, labelled by each chain's rule oracle), ``per_source`` of them (``None``: all) drawn from each of
    ``"fresh random wordings"`` and ``"fresh composed wordings"``."""
    import random

    from .head import claimtrees_oracle_for
    from .pairs import build_pairs
    from .wordings import wording_kind

    base = mix if mix is not None else MixArguments()
    rows: dict[str, list[dict[str, Any]]] = {}
    kind = {c.id: wording_kind(c.meta["template"]) for c in chains}
    for row in build_pairs(chains, premise_selection, claimtrees_oracle_for, base.subsets_per_step, seed,
                           base.minimal_pairs):
        rows.setdefault(f"fresh {kind[row['chain_id']]} wordings", []).append(row)
    rng = random.Random(seed)
    return {source: rng.sample(picked, min(len(picked), per_source if per_source is not None else len(picked)))
            for source, picked in sorted(rows.items())}
