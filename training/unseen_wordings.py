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


__all__ = ["GENERATORS", "UNSEEN_WORDINGS", "generated_wording", "later_wording"]

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


# A generator of further coherent wordings, written on 2026-12-02 after the defaults of adapt's guard (issue 51:
# 40 guard chains, 24 check chains, bound 0.02) were fixed and before any head was measured on them: no default was
# chosen on any of its wordings. Each seed draws a verb (words of 10+ letters or rare ones, outside the random
# wordings' vocabulary of 3-9 letter words and every training form), a rule, fact and step shape and a connective.
_VERBS = (("consecrating", "consecrates", "consecrated"), ("bequeathing", "bequeaths", "bequeathed"),
          ("emblazoning", "emblazons", "emblazoned"), ("vouchsafing", "vouchsafes", "vouchsafed"),
          ("promulgating", "promulgates", "promulgated"), ("countersigning", "countersigns", "countersigned"),
          ("transmuting", "transmutes", "transmuted"), ("enshrining", "enshrines", "enshrined"))
_CONNECTIVES = ("ergo", "thereupon", "forthwith", "whereby")
_RULES = ("{G} {{p}} {V} {{q}}.", "Any {{p}} {E} {V} {{q}}.")
_FACTS = ("{{p}} is {E}.", "{{p}} has been {E}.")
_STEPS = ("{C}, {{q}} is {E}: {{p}} is {E} and {g} {{p}} {V} {{q}}.",
          "{{p}} being {E}, and {g} {{p}} {V} {{q}}, {C} {{q}} is {E}.",
          "{G} {{p}} {V} {{q}}; {{p}} is {E}, {C} {{q}} is {E}.")


def generated_wording(seed: int) -> ClaimTreesTemplates:
    """A coherent unseen wording (rule, fact and step in one verb), deterministic in ``seed`` (0, 1, 2, ...)."""
    import random

    rng = random.Random(f"generated-wording-{seed}")
    gerund, third, participle = rng.choice(_VERBS)
    words = {"G": gerund.capitalize(), "g": gerund, "V": third, "E": participle, "C": rng.choice(_CONNECTIVES)}
    fact = rng.choice(_FACTS).format(**words)
    rule, step = rng.choice(_RULES).format(**words), rng.choice(_STEPS).format(**words)
    if fact.endswith("has been " + participle + "."):  # the step says what the fact says
        step = step.replace("is " + participle, "has been " + participle)
    return ClaimTreesTemplates(rule=rule, fact=fact, step=step[0].upper() + step[1:])


# A second generator, written on 2026-12-06 after adapt's defaults were chosen on generated_wording's wordings (the
# check grew to 48 chains there) and before any head was measured on it: other verbs, connectives and shapes (the fact
# says "is perennially" or "is demonstrably", which the steps repeat), so the defaults' final measurement reads
# wordings no choice was made on, from a generator no choice was made on. Its words have 10 letters or more: outside
# the random wordings' vocabulary, every training form and the first generator.
_LATER_VERBS = (("galvanizing", "galvanizes", "galvanized"), ("sanctifying", "sanctifies", "sanctified"),
                ("amalgamating", "amalgamates", "amalgamated"), ("crystallizing", "crystallizes", "crystallized"),
                ("reverberating", "reverberates", "reverberated"), ("emancipating", "emancipates", "emancipated"),
                ("substantiating", "substantiates", "substantiated"), ("magnetizing", "magnetizes", "magnetized"))
_LATER_CONNECTIVES = ("inexorably", "unfailingly", "incontestably", "indubitably")
_LATER_RULES = ("{G} {{p}} invariably {V} {{q}}.", "{G} {{p}} unconditionally {V} {{q}}.")
_LATER_FACTS = ("perennially", "demonstrably")
_LATER_STEPS = ("{C}, {{q}} {F}: {{p}} {F} and {g} {{p}} {V} {{q}}.",
                "{{p}} {F}; {g} {{p}} {V} {{q}}; {C} {{q}} {F}.",
                "{G} {{p}} {V} {{q}} and {{p}} {F}, consequentially {{q}} {F}.")


def later_wording(seed: int) -> ClaimTreesTemplates:
    """A coherent unseen wording from the second generator (see above), deterministic in ``seed``."""
    import random

    rng = random.Random(f"later-wording-{seed}")
    gerund, third, participle = rng.choice(_LATER_VERBS)
    said = f"is {rng.choice(_LATER_FACTS)} {participle}"
    words = {"G": gerund.capitalize(), "g": gerund, "V": third, "E": participle, "F": said,
             "C": rng.choice(_LATER_CONNECTIVES)}
    rule, step = rng.choice(_LATER_RULES).format(**words), rng.choice(_LATER_STEPS).format(**words)
    return ClaimTreesTemplates(rule=rule, fact="{p} " + said + ".", step=step[0].upper() + step[1:])


GENERATORS = {"generated": generated_wording, "later": later_wording}
