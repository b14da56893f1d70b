"""Generated best-of-N candidate sets: N sampled-looking solutions per problem, some sound, some with one injected
error whose consequences change the final answer, for accuracy-against-N where no public candidate set is at hand.

Task metadata:
    name: ``ClaimTrees-BoN`` and ``Recipes-BoN``.
    problems: a ClaimTrees rule set (a path of ``length`` rules from the starting fact, plus ``branches`` distractor
        rule chains that start from a state nothing derives), or a CaptainCook4D recipe with every claim present.
    candidates: each is sound with the problem's own probability ``p`` (drawn uniformly from ``sound_range``: easy
        and hard problems); otherwise it makes one of the problem's few *common mistakes* (weights 0.6 / 0.3 / 0.1,
        so wrong answers cluster as real samples' do):

        - ClaimTrees: at a random step the chain uses a rule that does not exist to jump into a distractor chain,
          then follows that chain's (existing) rules to its end: every later step is locally valid, the final
          state -- the answer -- is wrong.
        - Recipes: one step cooks with an ingredient the pantry does not hold (a substitution taken from another
          recipe); the steps that depend on it follow. The answer is the set of ingredients the chain cooks with.

    labels: ``correct`` per candidate (its answer equals the sound chain's); every step of a sound chain is sound.
    answer: :func:`claimtrees_answer` (the last state) / :func:`recipe_answer` (the ingredients used); pass them as
        ``answer_fn`` to the votes.

Sound candidates of one problem share their text (the rule path is unique), so scorers see each distinct chain once.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..chain import Chain
from .claimtrees import ClaimTreesTemplates, claimtrees_names
from .recipes import ingredient_claim, load_recipe_graphs, recipe_steps


__all__ = ["BonCandidateSet", "ClaimTreesLayout", "MISTAKE_WEIGHTS", "RecipeLayout", "claimtrees_answer",
           "claimtrees_bon", "claimtrees_layouts", "claimtrees_step", "recipe_answer", "recipe_layouts", "recipes_bon",
           "substitute_ingredient"]

#: How often a wrong candidate makes each of a problem's common mistakes.
MISTAKE_WEIGHTS = (0.6, 0.3, 0.1)
_TEMPLATES = ClaimTreesTemplates()
_LAST_STATE = re.compile(r"now I have (\S+)\s*$")
_COOKED_WITH = re.compile(r"have all necessary ingredients \((.*?)\),")


@dataclass
class BonCandidateSet:
    """One problem with its N candidates.

    Attributes:
        id: ``claimtrees-bon-<i>`` / ``recipes-bon-<recipe>-<i>``.
        base_claims: The problem's claims (what the prompt states).
        candidates: N chains (their steps are the candidate's text, one step per paragraph).
        correct: Per candidate, whether its final answer is the right one.
        answer: The right answer (as :func:`claimtrees_answer` / :func:`recipe_answer` read it).
        meta: ``p_sound`` and the mistakes made.
    """

    id: str
    base_claims: list[str]
    candidates: list[Chain]
    correct: list[bool]
    answer: Any
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class ClaimTreesLayout:
    """A ClaimTrees best-of-N problem's structure.

    Attributes:
        base_claims: The rules (shuffled) and the starting fact, last.
        path: The states from the starting fact to the answer (``length + 1``).
        branches: Each distractor chain's states (``branch_length + 1``): its first state is derived by nothing.
    """

    base_claims: list[str]
    path: list[str]
    branches: list[list[str]]


@dataclass
class RecipeLayout:
    """A recipe best-of-N problem's structure.

    Attributes:
        recipe: The recipe graph's name.
        base_claims: The rules and the pantry (shuffled), then ``We now START.``.
        steps: The sound steps, in order.
        cooking: The indices of the steps that cook with named ingredients (where a substitution can happen).
        absent: Ingredients of other recipes that this pantry lacks (the substitutes).
    """

    recipe: str
    base_claims: list[str]
    steps: list[str]
    cooking: list[int]
    absent: list[str]


def claimtrees_answer(text: str) -> str | None:
    """A ClaimTrees candidate's answer: the state its last step ends with (``now I have Q``), or ``None``."""
    match = _LAST_STATE.search(text.strip())
    return match.group(1) if match else None


def recipe_answer(text: str) -> tuple[str, ...] | None:
    """A recipe candidate's answer: the sorted ingredients its steps cook with, or ``None`` when it names none."""
    found = sorted({x.strip() for group in _COOKED_WITH.findall(text) for x in group.split(", and ") if x.strip()})
    return tuple(found) or None


def _check(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name}={value!r} must be an int >= {low}.")


def _check_range(sound_range: Sequence[float]) -> tuple[float, float]:
    if len(sound_range) != 2 or not 0.0 <= sound_range[0] <= sound_range[1] <= 1.0:
        raise ValueError(f"sound_range={tuple(sound_range)!r} must be (low, high) with 0 <= low <= high <= 1.")
    return float(sound_range[0]), float(sound_range[1])


def claimtrees_step(p: str, q: str) -> str:
    """The step that uses rule ``p -> q`` from state ``p``."""
    return _TEMPLATES.step.format(p=p, q=q)


def substitute_ingredient(claim: str, wrong: str) -> str:
    """A recipe step claim that cooks with ``wrong`` instead of the first ingredient it names."""
    used = _COOKED_WITH.search(claim).group(1).split(", and ")
    return claim.replace(f"ingredients ({', and '.join(used)}),",
                         "ingredients (" + ", and ".join([wrong if x == used[0] else x for x in used]) + "),")


def _claimtrees_layout(rng: random.Random, pool: list[str], length: int, branches: int,
                       branch_length: int) -> ClaimTreesLayout:
    names = rng.sample(pool, length + 1 + branches * (branch_length + 1))
    path, rest = names[: length + 1], names[length + 1:]
    chains = [rest[j * (branch_length + 1):(j + 1) * (branch_length + 1)] for j in range(branches)]
    base = [_TEMPLATES.rule.format(p=a, q=b) for a, b in zip(path, path[1:])]
    base += [_TEMPLATES.rule.format(p=a, q=b) for chain in chains for a, b in zip(chain, chain[1:])]
    rng.shuffle(base)
    base.append(_TEMPLATES.fact.format(p=path[0]))
    return ClaimTreesLayout(base, path, chains)


def _claimtrees_pool(length: int, branches: int, branch_length: int) -> list[str]:
    return claimtrees_names(min(936, max(60, 2 * (length + 1 + branches * (branch_length + 1)))))


def claimtrees_layouts(n: int = 200, length: int = 6, branches: int = 3, branch_length: int = 2,
                       seed: int = 0) -> list[ClaimTreesLayout]:
    """The problems of :func:`claimtrees_bon` (same arguments, same problems), without candidates."""
    for name, value, low in (("n", n, 1), ("length", length, 2), ("branches", branches, 1),
                             ("branch_length", branch_length, 1)):
        _check(name, value, low)
    pool = _claimtrees_pool(length, branches, branch_length)
    return [_claimtrees_layout(random.Random(f"claimtrees-bon/{seed}/{i}"), pool, length, branches, branch_length)
            for i in range(n)]


def claimtrees_bon(
    n: int = 200,
    candidates: int = 16,
    length: int = 6,
    branches: int = 3,
    branch_length: int = 2,
    sound_range: Sequence[float] = (0.05, 0.6),
    seed: int = 0,
) -> list[BonCandidateSet]:
    """ClaimTrees best-of-N problems (see the module docstring).

    Args:
        n: Problems.
        candidates: Candidates per problem (N).
        length: Rules on the path from the starting fact to the answer.
        branches: Distractor rule chains, one per common mistake (at most 3 are used as mistakes).
        branch_length: Rules in each distractor chain (its states: ``branch_length + 1``).
        sound_range: Each problem's chance that a candidate is sound is drawn uniformly from this range.
        seed: Seeds everything; problem ``i`` depends only on ``seed`` and ``i``.
    """
    for name, value, low in (("n", n, 1), ("candidates", candidates, 1), ("length", length, 2),
                             ("branches", branches, 1), ("branch_length", branch_length, 1)):
        _check(name, value, low)
    low, high = _check_range(sound_range)
    pool = _claimtrees_pool(length, branches, branch_length)
    out = []
    for i in range(n):
        rng = random.Random(f"claimtrees-bon/{seed}/{i}")
        layout = _claimtrees_layout(rng, pool, length, branches, branch_length)
        base, path, chains = layout.base_claims, layout.path, layout.branches
        sound_steps = [claimtrees_step(a, b) for a, b in zip(path, path[1:])]
        p_sound = rng.uniform(low, high)
        mistakes = chains[: len(MISTAKE_WEIGHTS)]
        weights = MISTAKE_WEIGHTS[: len(mistakes)]
        made, texts, correct = [], [], []
        for c in range(candidates):
            if rng.random() < p_sound:
                steps, ok, mistake = sound_steps, True, None
            else:
                mistake = rng.choices(range(len(mistakes)), weights)[0]
                branch = mistakes[mistake]
                k = rng.randrange(length)  # the first k steps are sound, then the jump
                steps = sound_steps[:k] + [claimtrees_step(path[k], branch[0])]
                steps += [claimtrees_step(a, b) for a, b in zip(branch, branch[1:])]
                ok = False
            made.append(mistake)
            labels = [0] * len(steps) if ok else [int(j >= k) for j in range(len(steps))]
            texts.append(Chain(list(base), list(steps), labels=labels, id=f"claimtrees-bon-{i}-{c}"))
            correct.append(ok)
        out.append(BonCandidateSet(f"claimtrees-bon-{i}", base, texts, correct, path[-1],
                                   {"p_sound": p_sound, "mistakes": made}))
    return out


def _recipe_graphs(recipes: Sequence[str] | None, data_dir: str | None) -> tuple[list[str], dict, list[str]]:
    graphs = dict(load_recipe_graphs(data_dir))
    names = sorted(graphs) if recipes is None else list(recipes)
    unknown = [r for r in names if r not in graphs]
    if unknown or not names:
        raise ValueError(f"recipes={unknown or names!r}: no such recipe graphs; choose from {sorted(graphs)}.")
    all_ingredients = sorted({x for g in graphs.values() for x in g["all_mapped_ingredients_unique"] if x != "None"})
    return names, graphs, all_ingredients


def _recipe_layout(name: str, graph: dict, rng: random.Random, all_ingredients: list[str]) -> RecipeLayout:
    steps = recipe_steps(graph)
    present = [x for x in graph["all_mapped_ingredients_unique"] if x != "None"]
    base = sorted({s.rule for s in steps if s.rule is not None}) + [ingredient_claim(x) for x in present]
    rng.shuffle(base)
    base.append("We now START.")
    cooking = [j for j, s in enumerate(steps) if s.ingredients and "ingredients (" in s.claim]
    return RecipeLayout(name, base, [s.claim for s in steps], cooking, [x for x in all_ingredients if x not in present])


def recipe_layouts(n: int = 60, recipes: Sequence[str] | None = None, seed: int = 0,
                   data_dir: str | None = None) -> list[RecipeLayout]:
    """The problems of :func:`recipes_bon` (same arguments, same problems), without candidates."""
    _check("n", n, 1)
    names, graphs, all_ingredients = _recipe_graphs(recipes, data_dir)
    return [_recipe_layout(names[i % len(names)], graphs[names[i % len(names)]],
                           random.Random(f"recipes-bon/{seed}/{i}/{names[i % len(names)]}"), all_ingredients)
            for i in range(n)]


def recipes_bon(
    n: int = 60,
    candidates: int = 16,
    recipes: Sequence[str] | None = None,
    sound_range: Sequence[float] = (0.05, 0.6),
    seed: int = 0,
    data_dir: str | None = None,
) -> list[BonCandidateSet]:
    """Recipe best-of-N problems (see the module docstring): problem ``i`` cooks ``recipes[i % len(recipes)]``.

    Args:
        n: Problems.
        candidates: Candidates per problem (N).
        recipes: Recipe graph names (file stems) to use; ``None``: all graphs in ``data_dir``.
        sound_range: Each problem's chance that a candidate is sound is drawn uniformly from this range.
        seed: Seeds everything; problem ``i`` depends only on ``seed``, ``i`` and its recipe.
        data_dir: The folder holding ``recipe_graphs/`` (``None``: ``$ARES_DATA_DIR``).
    """
    _check("n", n, 1)
    _check("candidates", candidates, 1)
    low, high = _check_range(sound_range)
    names, graphs, all_ingredients = _recipe_graphs(recipes, data_dir)
    out = []
    for i in range(n):
        name = names[i % len(names)]
        rng = random.Random(f"recipes-bon/{seed}/{i}/{name}")
        layout = _recipe_layout(name, graphs[name], rng, all_ingredients)
        base, sound_steps = layout.base_claims, layout.steps
        mistakes = []
        for _ in MISTAKE_WEIGHTS:  # a step, an ingredient it names, and the wrong one used instead
            j = rng.choice(layout.cooking)
            mistakes.append((j, substitute_ingredient(sound_steps[j], rng.choice(layout.absent))))
        p_sound = rng.uniform(low, high)
        chains, correct, made = [], [], []
        for c in range(candidates):
            if rng.random() < p_sound:
                chain_steps, labels, mistake = sound_steps, [0] * len(sound_steps), None
            else:
                mistake = rng.choices(range(len(mistakes)), MISTAKE_WEIGHTS)[0]
                j, swapped = mistakes[mistake]
                chain_steps = sound_steps[:j] + [swapped] + sound_steps[j + 1:]
                labels = [int(k == j) for k in range(len(chain_steps))]
            made.append(mistake)
            chains.append(Chain(list(base), list(chain_steps), labels=labels, id=f"recipes-bon-{name}-{i}-{c}"))
            correct.append(mistake is None)
        answer = recipe_answer("\n\n".join(sound_steps))
        out.append(BonCandidateSet(f"recipes-bon-{name}-{i}", base, chains, correct, answer,
                                   {"p_sound": p_sound, "mistakes": made, "recipe": name}))
    return out
