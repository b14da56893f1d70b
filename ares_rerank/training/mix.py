"""The training chains of an entailment head: your own labelled chains (``chains_file``), or the generated mix of
the default head, and the held-out sets it is judged on.

A MiniLM head trained on one spelling of ClaimTrees keys on that spelling (FINDINGS.md: a head trained on 2-character
names fell to 0.31 macro-F1 on 3-character names). The mix therefore varies what real chains vary:

- **names**: 1 letter, 2 and 4 characters (A-Z then A-Z0-9) and short English words (4-7 letters). Three-character
  names are never trained on: they are a held-out generalization set.
- **templates**: six wordings of the rule / fact / step sentences (:data:`TRAIN_TEMPLATES`); a seventh
  (:data:`HELDOUT_TEMPLATES`) is never trained on.
- **shapes**: vanilla chains of :data:`TRAIN_LENGTHS` states, multi-source single-sink trees and insertion chains.
  Lengths 7, 14, 30 and 50 are never trained on.
- **indices**: generator indices start at :data:`TRAIN_FIRST_INDEX` (one million), disjoint from the evaluation
  sets, which use the first N indices as the paper's protocol does.

CaptainCookRecipes is not in the mix: it is evaluated out of domain.
"""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass, field
from typing import Sequence

from ..chain import Chain
from ..data.claimtrees import ClaimTreesTemplates, claimtrees_example


__all__ = [
    "HELDOUT_TEMPLATES",
    "NAME_STYLES",
    "TRAIN_FIRST_INDEX",
    "TRAIN_LENGTHS",
    "TRAIN_TEMPLATES",
    "MixArguments",
    "random_names",
    "rename_states",
    "templates_of",
    "training_chains",
]

TRAIN_FIRST_INDEX = 1_000_000
TRAIN_LENGTHS = (3, 4, 5, 6, 8, 10, 12, 16, 20)

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
# Never trained on: new verbs, and the conclusion named before the premise in the step.
HELDOUT_TEMPLATES: dict[str, ClaimTreesTemplates] = {
    "given": ClaimTreesTemplates(
        rule="Given {p}, one may conclude {q}.",
        fact="We know {p}.",
        step="We know {p}; concluding {q} from {p} by the given rule, we now know {q}.",
    ),
}

NAME_STYLES = ("letter", "pair", "quad", "word")
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
_LETTERS = tuple(c for c in string.ascii_uppercase if c not in "AI")  # "A" and "I" read as English words
_CHARS = string.ascii_uppercase + string.digits


@dataclass
class MixArguments:
    """What the training chains look like (all ClaimTrees; every chain gets its own names and template)."""

    chains_file: str | None = field(default=None, metadata={
        "help": "A JSONL file of your own labelled chains ({base_claims, steps, labels: 1 = unsound per step} or "
                "{prompt, completion, labels}) to train on instead of generating the ClaimTrees mix; the generator "
                "fields below are then unused. Pairs come from the gold labels (sound prefixes), plus oracle pairs "
                "for chains whose meta holds ClaimTrees rules."})
    num_chains: int = field(default=900, metadata={"help": "ClaimTrees chains generated for train + val + test."})
    val_fraction: float = field(default=0.08, metadata={"help": "Share of chains (by id) for early stopping."})
    test_fraction: float = field(default=0.08, metadata={"help": "Share of chains (by id) for calibration / ECE."})
    lengths: list[int] = field(default_factory=lambda: list(TRAIN_LENGTHS),
                               metadata={"help": "States of vanilla chains (one drawn per chain)."})
    templates: list[str] = field(default_factory=lambda: list(TRAIN_TEMPLATES),
                                 metadata={"help": f"Template sets to train on, from {list(TRAIN_TEMPLATES)}."})
    name_styles: list[str] = field(default_factory=lambda: list(NAME_STYLES),
                                   metadata={"help": f"State-name styles to train on, from {list(NAME_STYLES)}."})
    multi_source_share: float = field(default=0.15, metadata={"help": "Share of multi-source (sXdY) chains."})
    insertion_share: float = field(default=0.15, metadata={"help": "Share of insertion (vVi I) chains."})
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
        for name in ("val_fraction", "test_fraction", "multi_source_share", "insertion_share"):
            value = getattr(self, name)
            if not 0.0 <= float(value) < 1.0:
                raise ValueError(f"MixArguments({name}={value!r}) must lie in [0, 1).")
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
        if self.first_index < 1000:
            raise ValueError(f"MixArguments(first_index={self.first_index}) must be >= 1000 (evaluation uses 0..999).")


def random_names(count: int, style: str, rng: random.Random) -> list[str]:
    """``count`` distinct state names of one style (never 3 characters long: that length is held out)."""
    if style == "letter":
        pool: Sequence[str] = _LETTERS
    elif style == "word":
        pool = _WORDS
    elif style in ("pair", "quad"):
        width = 2 if style == "pair" else 4
        names: set[str] = set()
        while len(names) < count:
            names.add(rng.choice(string.ascii_uppercase) + "".join(rng.choice(_CHARS) for _ in range(width - 1)))
        return sorted(names, key=lambda _: rng.random())
    else:
        raise ValueError(f"style={style!r} is not a name style: use one of {NAME_STYLES}.")
    if count > len(pool):
        raise ValueError(f"style={style!r} has only {len(pool)} names, {count} requested: use a longer style.")
    return rng.sample(pool, count)


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


def templates_of(chain: Chain) -> ClaimTreesTemplates:
    """The templates a mix chain was written with (``meta["template"]``, a key of the train or held-out sets)."""
    name = chain.meta.get("template", "paper")
    table = {**TRAIN_TEMPLATES, **HELDOUT_TEMPLATES}
    if name not in table:
        raise ValueError(f"chain {chain.id!r} has meta['template']={name!r}, not one of {sorted(table)}.")
    return table[name]


def _shape(rng: random.Random, args: MixArguments, style: str) -> dict:
    """Generator keyword arguments for one chain, respecting the capacity of the name style."""
    cap = len(_LETTERS) if style == "letter" else len(_WORDS) if style == "word" else 10_000
    draw = rng.random()
    if draw < args.multi_source_share:
        return {"variant": "multi_source", "sources": rng.choice((2, 3, 4)), "depth": rng.choice((3, 4, 5))}
    if draw < args.multi_source_share + args.insertion_share:
        return {"variant": "insertion", "valid": rng.randint(4, 10), "inserted": rng.choice((1, 1, 2))}
    return {"variant": "vanilla", "length": rng.choice([n for n in args.lengths if n <= cap] or [min(args.lengths)])}


def training_chains(args: MixArguments) -> list[Chain]:
    """The labelled chains of the mix, ``args.num_chains`` of them, each with its own names and template (or the
    chains of ``args.chains_file`` as they are).

    Chain ids are unique (``mix-<i>-<template>-<style>``); ``meta["template"]`` and ``meta["name_style"]`` record
    the draw. Deterministic for fixed ``args``.
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
    chains = []
    for i in range(args.num_chains):
        style, template = rng.choice(args.name_styles), rng.choice(args.templates)
        kwargs = _shape(rng, args, style)
        length = kwargs.pop("length", 10)
        base = claimtrees_example(args.first_index + i, length, templates=TRAIN_TEMPLATES[template], **kwargs)
        chain = rename_states(base, random_names(len(base.meta["names"]), style, rng))
        meta = {**chain.meta, "template": template, "name_style": style}
        chains.append(Chain(chain.base_claims, chain.steps, labels=chain.labels,
                            id=f"mix-{i}-{template}-{style}", meta=meta))
    return chains
