"""Three ClaimTrees wordings that no training template, composed form, random wording or held-out wording uses, for
measuring ``ares-rerank adapt`` (``python -m training.measure_adapt``); checkout-only, never part of any mix.

``ratified`` is the wording a user adapts the head to; ``cultivated`` is a second unseen wording that adapting must
not break. ``kindled`` is a third one, written after the adaptation's defaults were chosen (the averaging weight 0.7
was picked looking at ``cultivated``), so it checks those defaults on a wording no choice was made on. Their verbs
and participles ("ratifying", "endorses", "ratified", "wherefore"; "cultivating", "sprouts", "cultivated";
"kindling", "ignites", "kindled") occur in no training form and lie outside the random wordings' vocabulary
(tests/training/test_adapt.py checks both), so no head of the recipe has seen them.
"""

from __future__ import annotations

from ares_rerank.data.claimtrees import ClaimTreesTemplates


__all__ = ["UNSEEN_WORDINGS"]

UNSEEN_WORDINGS: dict[str, ClaimTreesTemplates] = {
    "ratified": ClaimTreesTemplates(
        rule="Ratifying {p} endorses {q}.",
        fact="{p} is ratified.",
        step="{p} is ratified, and ratifying {p} endorses {q}; wherefore {q} is ratified.",
    ),
    "cultivated": ClaimTreesTemplates(
        rule="Cultivating {p} sprouts {q}.",
        fact="{p} is cultivated.",
        step="{q} is cultivated, since {p} is cultivated and cultivating {p} sprouts {q}.",
    ),
    "kindled": ClaimTreesTemplates(
        rule="Kindling {p} ignites {q}.",
        fact="{p} is kindled.",
        step="{q} is kindled: kindling {p} ignites {q}, and {p} is kindled.",
    ),
}
