"""The ARES estimator: a chain's claims and a backbone -> tau per step, with its certificate.

- :mod:`~ares_rerank.estimator.batch`: :func:`ares_scores` over finished chains (exact, sample and auto modes; the
  formula and the guarantee are in its docstring, after You et al., 2025, Alg. 1);
- :mod:`~ares_rerank.estimator.stream`: :class:`AresStream`, the same estimate while a chain is written, one step
  at a time, forkable (step-level search);
- :mod:`~ares_rerank.estimator.masks`: the premise-mask bookkeeping both share (grouping masks into backbone inputs,
  pruning, splitting, the cap);
- :mod:`~ares_rerank.estimator.sequential`: sample mode's ``stopping="betting"`` rule (anytime-valid betting
  confidence sequences, checked after each batch of trajectories), the default for a sampled backbone.

``AresConfig`` (the settings) and the sample-size checks are importable from here too, where users found them.
"""

from __future__ import annotations

from .config import DEFAULT_MAX_SAMPLES, MAX_SAMPLE_BYTES, AresConfig, check_sample_size, sample_size
from .batch import ares_scores, check_evaluations
from .masks import certified, exact_step, groups_to_drop, row_keys, split_masks
from .stream import AresStream, StreamState


__all__ = [
    "DEFAULT_MAX_SAMPLES",
    "ESTIMATOR_REVISION",
    "MAX_SAMPLE_BYTES",
    "AresConfig",
    "AresStream",
    "StreamState",
    "ares_scores",
    "certified",
    "check_evaluations",
    "check_sample_size",
    "exact_step",
    "groups_to_drop",
    "row_keys",
    "sample_size",
    "split_masks",
]

#: Bumped whenever the same settings can give different scores, in the estimator or in a premise selector it projects
#: masks through (score caches key on it, so an upgrade never reads scores no longer given). 2: exact mode reports the
#: kept masks' mean, default prune budget eps. 3: ``relevant`` selection treats bare numbers as quantities.
#: 4: exact mode reports the point nearest the mean within max(eps, D / 2); auto falls back only beyond that.
#: 5: ``relevant`` is symbols-only again when the hypothesis has any symbol (revision 3's rule is ``relevant-words``).
#: (A new default, such as ``max_masks`` 64 -> 16, needs no bump: the score caches key on every setting.)
#: 6: auto mode's hard budget is 2 eps, and once max_masks pushes the dropped mass past it, auto mode samples the
#: dropped masks (a tail) instead of restarting as sample mode.
#: 7: ``relevant-words`` ranks under its cap by each claim's whole text (a recipe step's own rule and ``We now
#: START.`` before other rules that share only ``START`` and a quantity with it).
ESTIMATOR_REVISION = 7
