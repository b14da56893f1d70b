"""The training chains of an entailment head: your own labelled chains (``chains_file``), or the generated mix of
the default head, and the held-out sets it is judged on.

A MiniLM head trained on one spelling of ClaimTrees keys on that spelling (FINDINGS.md: a head trained on 2-character
names fell to 0.31 macro-F1 on 3-character names, and one trained on four wordings rejected sound steps of a fifth).
The mix therefore varies what real chains vary:

- **names** (:mod:`~ares_rerank.training.names`): one letter, codes of 2 and 4-12 characters (A-Z then A-Z0-9),
  capitalized and lower-case English words, and names of two or three capitalized words. Three-character names are
  never trained on: they are a held-out generalization set.
- **wordings** (:mod:`~ares_rerank.training.wordings`): six coherent template sets (``TRAIN_TEMPLATES``) and, for
  ``composed_share`` of the chains, one form each from ``RULE_FORMS``, ``FACT_FORMS`` and ``STEP_FORMS`` (21 x 14 x
  21 = 6,174 wordings: word order, passive voice, "so / hence / therefore / thus / it follows", steps from a few words
  to three sentences, with and without a restated rule); and, for ``random_wording_share`` of the chains, a random
  wording (``random_templates``): sentences of random English words around the names, new for every chain, where
  only structure says which claim is a rule, a fact or a step. Four more (``HELDOUT_TEMPLATES``: ``given``,
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

import os
import random
from dataclasses import dataclass, field
from typing import Sequence

from ..chain import Chain
from ..data.claimtrees import ClaimTreesTemplates, claimtrees_example
from .names import NAME_STYLES, name_capacity, random_names, rename_states
from .wordings import FACT_FORMS, RULE_FORMS, STEP_FORMS, TRAIN_TEMPLATES, templates_of, wording_kind


__all__ = [
    "DISTRACTOR_KINDS",
    "HELDOUT_RECIPES",
    "MENTION_FORMS",
    "MISSING_RULE_FORMS",
    "TRAIN_FIRST_INDEX",
    "TRAIN_LENGTHS",
    "MixArguments",
    "add_distractors",
    "chain_source",
    "training_chains",
]

TRAIN_FIRST_INDEX = 1_000_000
TRAIN_LENGTHS = (3, 4, 5, 6, 8, 10, 12, 16, 20)

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
        for name in ("val_fraction", "test_fraction"):  # early stopping and calibration need held-out chains
            if getattr(self, name) <= 0.0:
                raise ValueError(f"MixArguments({name}={getattr(self, name)!r}) must be above 0: the val split "
                                 "drives early stopping and the test split the calibration report, e.g. 0.04.")
        if not isinstance(self.subsets_per_step, int) or self.subsets_per_step < 0:
            raise ValueError(f"MixArguments(subsets_per_step={self.subsets_per_step!r}) must be an int >= 0.")
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


def _shape(rng: random.Random, args: MixArguments, style: str) -> dict:
    """Generator keyword arguments for one chain, respecting the capacity of the name style."""
    cap = name_capacity(style) - (args.max_distractors if args.distractor_share > 0 else 0)  # distractor names
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


def chain_source(chain: Chain) -> str:
    """The part of a mix ``chain`` comes from: ``"recipe graphs"``, ``"random wordings"``, ``"composed wordings"``,
    ``"fixed wordings"`` (ClaimTrees in one of the mix's ``templates``) or ``"given chains"`` (a ``chains_file``'s,
    which carry no mix record)."""
    if chain.meta.get("oracle") == "recipe":
        return "recipe graphs"
    template = chain.meta.get("template")
    if not isinstance(template, str) or not chain.id.startswith("mix-"):
        return "given chains"
    return f"{wording_kind(template)} wordings"


def training_chains(args: MixArguments, data_dir: str | os.PathLike[str] | None = None) -> list[Chain]:
    """The labelled chains of the mix, ``args.num_chains`` of them (or the chains of ``args.chains_file`` as they are);
    ``data_dir`` holds ``recipe_graphs/`` for recipe chains (``None`` reads ``$ARES_DATA_DIR``).

    ClaimTrees chains get their own names, wording, shape and (some) distractors; ids are unique
    (``mix-<i>-<template>-<style>``) and ``meta`` records the draw (``template``, ``name_style``, ``distractors``).
    Recipe chains (``recipe_share``) come from the graphs outside ``heldout_recipes``, with ``meta["split_group"]``
    naming the recipe so that :func:`~ares_rerank.training.pairs.split_chains` keeps a recipe in one split.
    Deterministic for fixed ``args``.
    """
    if args.chains_file:
        from ..chain import read_chains

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

        graphs = [(name, g) for name, g in load_recipe_graphs(data_dir)
                  if name not in set(args.heldout_recipes)]
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
