"""A simulated step generator: a seeded policy over ClaimTrees and recipe problems that errs at a step with
probability p and then continues from its error, so that step-level search can be compared without a model.

Task metadata:
    name: ``ClaimTrees-steps`` and ``Recipes-steps``.
    problems: the best-of-N problems of :mod:`ares_rerank.data.bon` (same seeds, same base claims): a ClaimTrees
        rule path with distractor chains, or a recipe with its pantry. The prompt is the base claims, one a line
        (score with ``prompt_split="lines"``).
    policy: at each step where an error is possible, the policy errs with the problem's probability ``p`` (drawn
        uniformly from ``p_range`` per problem), otherwise takes the sound step; an error propagates:

        - ClaimTrees: at any path step it jumps into a distractor chain with a rule that does not exist (one of the
          problem's chains, weights :data:`~ares_rerank.data.bon.MISTAKE_WEIGHTS`), then follows that chain's
          rules to its end: every later step is locally valid, the final state -- the answer -- is wrong.
        - Recipes: at a step that cooks with named ingredients it uses the problem's substitute for that step (an
          ingredient the pantry lacks) and then cooks on with it: the answer (the ingredients used) keeps it.

    answer: :func:`~ares_rerank.data.bon.claimtrees_answer` / :func:`~ares_rerank.data.bon.recipe_answer`; a
        candidate cut before its end has no right answer.
    cost: a step costs its characters (a policy's token count).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..data.bon import (
    MISTAKE_WEIGHTS,
    claimtrees_answer,
    claimtrees_layouts,
    claimtrees_step,
    recipe_answer,
    recipe_layouts,
    substitute_ingredient,
)
from ..search import GeneratedStep


__all__ = ["SimulatedPolicy", "SimulatedProblem", "SimulatedTask", "claimtrees_simulation", "recipes_simulation"]


@dataclass
class SimulatedProblem:
    """One problem of the simulated generator.

    Attributes:
        id: ``claimtrees-steps-<i>`` / ``recipes-steps-<recipe>-<i>``.
        prompt: The base claims, one a line.
        sound: The sound solution's steps.
        mistakes: Step index -> the erring continuations possible there: ``(weight, steps from that index on)``.
        answer: The right answer.
        p: The chance of an error at each step where one is possible.
    """

    id: str
    prompt: str
    sound: list[str]
    mistakes: dict[int, list[tuple[float, list[str]]]]
    answer: Any
    p: float


@dataclass
class SimulatedTask:
    """Problems with their policy and answer function."""

    name: str
    problems: list[SimulatedProblem]
    answer_fn: Callable[[str], Any]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def policy(self) -> "SimulatedPolicy":
        return SimulatedPolicy(self.problems)


class SimulatedPolicy:
    """``policy(prompt, steps, rng)`` for :func:`ares_rerank.search.step_generator` (see the module docstring).

    Raises:
        ValueError: The prompt is not one of the problems', or the steps are not a path this policy can take.
    """

    __name__ = "SimulatedPolicy"

    def __init__(self, problems: Sequence[SimulatedProblem]) -> None:
        self.problems = {p.prompt: p for p in problems}

    def __call__(self, prompt: Any, steps: list[str], rng: random.Random) -> GeneratedStep | None:
        problem = self.problems.get(prompt)
        if problem is None:
            raise ValueError(f"SimulatedPolicy: prompt {str(prompt)[:60]!r}... is none of its problems'.")
        k = 0
        while k < len(steps) and k < len(problem.sound) and steps[k] == problem.sound[k]:
            k += 1
        if k == len(steps):  # on the sound path
            if k == len(problem.sound):
                return None
            options = problem.mistakes.get(k)
            path = problem.sound[k:]
            if options and rng.random() < problem.p:
                path = rng.choices([o[1] for o in options], [o[0] for o in options])[0]
            return GeneratedStep(path[0], len(path[0]), len(path) == 1)
        rest = steps[k:]
        path = next((o[1] for o in problem.mistakes.get(k, []) if o[1][: len(rest)] == rest), None)
        if path is None:
            raise ValueError(f"SimulatedPolicy: steps {k}.. of the prefix are no path of problem {problem.id}.")
        if len(rest) == len(path):
            return None
        return GeneratedStep(path[len(rest)], len(path[len(rest)]), len(rest) + 1 == len(path))


def _p(rng: random.Random, p_range: Sequence[float]) -> float:
    if len(p_range) != 2 or not 0.0 <= p_range[0] <= p_range[1] <= 1.0:
        raise ValueError(f"p_range={tuple(p_range)!r} must be (low, high) with 0 <= low <= high <= 1.")
    return rng.uniform(p_range[0], p_range[1])


def claimtrees_simulation(n: int = 200, p_range: Sequence[float] = (0.05, 0.3), length: int = 6, branches: int = 3,
                          branch_length: int = 2, seed: int = 0) -> SimulatedTask:
    """ClaimTrees problems (:func:`~ares_rerank.data.bon.claimtrees_layouts`) with the simulated policy."""
    problems = []
    for i, layout in enumerate(claimtrees_layouts(n, length, branches, branch_length, seed)):
        path = layout.path
        sound = [claimtrees_step(a, b) for a, b in zip(path, path[1:])]
        chains = [[claimtrees_step(a, b) for a, b in zip(branch, branch[1:])] for branch in layout.branches]
        mistakes = {k: [(w, [claimtrees_step(path[k], branch[0])] + chain)
                        for w, branch, chain in zip(MISTAKE_WEIGHTS, layout.branches, chains)] for k in range(length)}
        p = _p(random.Random(f"claimtrees-steps/{seed}/{i}"), p_range)
        problems.append(SimulatedProblem(f"claimtrees-steps-{i}", "\n".join(layout.base_claims), sound, mistakes,
                                         path[-1], p))
    return SimulatedTask("ClaimTrees-steps", problems, claimtrees_answer,
                         {"n": n, "p_range": list(p_range), "length": length, "seed": seed})


def recipes_simulation(n: int = 60, p_range: Sequence[float] = (0.05, 0.3), recipes: Sequence[str] | None = None,
                       seed: int = 0, data_dir: str | None = None) -> SimulatedTask:
    """Recipe problems (:func:`~ares_rerank.data.bon.recipe_layouts`) with the simulated policy; each cooking
    step has one common substitute per problem."""
    problems = []
    for i, layout in enumerate(recipe_layouts(n, recipes, seed, data_dir)):
        rng = random.Random(f"recipes-steps/{seed}/{i}/{layout.recipe}")
        sound = layout.steps
        mistakes = {j: [(1.0, [substitute_ingredient(sound[j], rng.choice(layout.absent))] + sound[j + 1:])]
                    for j in layout.cooking}
        problems.append(SimulatedProblem(f"recipes-steps-{layout.recipe}-{i}", "\n".join(layout.base_claims), sound,
                                         mistakes, recipe_answer("\n\n".join(sound)), _p(rng, p_range)))
    return SimulatedTask("Recipes-steps", problems, recipe_answer,
                         {"n": n, "p_range": list(p_range), "recipes": recipes, "seed": seed})
