"""CaptainCookRecipes: recipe-graph chains with one missing ingredient (ARES paper, section 5 of ARES_SPEC).

Task metadata:
    name: CaptainCookRecipes (the research code's ``recipe_graph``), 24 CaptainCook4D recipe graphs.
    base claims: one rule per step with predecessors ("Only after the necessary preceding steps (...) ...") and
        ``We have <ingredient>.`` claims, one ingredient dropped, shuffled; ``We now START.`` last.
    steps: one claim per recipe step in topological order (START excluded, END included).
    labels: ``1`` = unsound: the steps that use the dropped ingredient and everything downstream of them.
    data: ``<data_dir>/recipe_graphs/*.json`` (``data_dir`` from the argument, else ``$ARES_DATA_DIR``; see
        :func:`ares_rerank.data.paths.shared_data_dir`).

The 24 graphs are repeated to 1000 entries and shuffled with ``random.Random(42)``; entry ``idx`` is example
``idx``. The dropped ingredient depends only on the recipe (a constant seed), so examples of one recipe share their
steps and labels and differ only in the order of the base claims.

For training, :func:`recipe_variant` writes chains of one graph with any ingredient, rule or the START claim missing
(same claim texts), and :func:`recipe_steps` gives each step's rule, predecessors and ingredients: what
:class:`~ares_rerank.backbones.oracle.RecipeOracle` checks.
"""

from __future__ import annotations

import json
import math
import os
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..chain import Chain
from .paths import shared_data_dir


__all__ = [
    "NUM_RECIPE_ENTRIES",
    "RECIPE_DELETIONS",
    "START_CLAIM",
    "RecipeStep",
    "ingredient_claim",
    "load_recipe_graphs",
    "load_recipes",
    "recipe_example",
    "recipe_steps",
    "recipe_variant",
]

NUM_RECIPE_ENTRIES = 1000
_SUBDIR = "recipe_graphs"
_SEED = 42
START_CLAIM = "We now START."
RECIPE_DELETIONS = ("ingredient", "rule", "start", "none")


def _recipe_dir(data_dir: str | os.PathLike[str] | None) -> Path:
    """``<data_dir>/recipe_graphs``; a ``data_dir`` that directly holds the JSON files is accepted as well."""
    if data_dir is not None and not (Path(data_dir) / _SUBDIR).is_dir() and any(Path(data_dir).glob("*.json")):
        return Path(data_dir)
    return shared_data_dir(_SUBDIR, data_dir)


@lru_cache(maxsize=8)
def _read_graphs(folder: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    files = sorted(Path(folder).glob("*.json"), key=lambda p: p.name)
    if not files:
        raise FileNotFoundError(
            f"data_dir: the folder {folder} holds no *.json recipe graphs; point data_dir (or $ARES_DATA_DIR) at the "
            "folder that contains recipe_graphs/ with the CaptainCook4D graph files."
        )
    return tuple((f.stem, json.loads(f.read_text(encoding="utf-8"))) for f in files)


def load_recipe_graphs(data_dir: str | os.PathLike[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """The raw recipe graphs as ``(name, graph)`` pairs in sorted file-name order.

    Args:
        data_dir: The folder that contains ``recipe_graphs/``; ``None`` reads ``$ARES_DATA_DIR``.

    Returns:
        One ``(file stem, parsed JSON)`` pair per file (cached per folder; do not mutate the graphs).

    Raises:
        FileNotFoundError: The folder is missing or holds no JSON files.
    """
    return list(_read_graphs(str(_recipe_dir(data_dir).resolve())))


def _entries(graphs: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """Repeat the graphs to 1000 entries and shuffle with ``Random(42)`` (the research code's dataset order)."""
    entries = (graphs * math.ceil(NUM_RECIPE_ENTRIES / len(graphs)))[:NUM_RECIPE_ENTRIES]
    random.Random(_SEED).shuffle(entries)
    return entries


def _step_lists(graph: dict[str, Any], key: str) -> dict[int, list[str] | None]:
    """Per-step ingredient lists keyed by step id (lists are aligned with ascending ids; ``['None']`` = no list)."""
    ids = sorted(int(k) for k in graph["steps"])
    return {sid: (lst if lst and lst[0] != "None" else None) for sid, lst in zip(ids, graph[key])}


def _predecessors(edges: list[list[int]]) -> dict[int, list[int]]:
    """Sources per target, targets in order of first appearance in ``edges``, sources in edge order."""
    preds: dict[int, list[int]] = {}
    for src, dst in edges:
        preds.setdefault(dst, []).append(src)
    return preds


def _step_claim(text: dict[int, str], preds: list[int], ingredients: list[str] | None, step: int) -> str:
    before = ", and ".join(text[p] for p in preds)
    having = f"and have all necessary ingredients ({', and '.join(ingredients)})," if ingredients else ""
    return (
        f"Because we have completed all previous steps ({before}), {having} we can now do the step {text[step]}. "
        f"And now we have completed this step {text[step]}."
    )


def _rule_claim(text: dict[int, str], sources: list[int], target: int) -> str:
    return (
        f"Only after the necessary preceding steps ({', and '.join(text[p] for p in sources)}), And if we have all "
        f"the ingredients, we can then {text[target]}."
    )


def ingredient_claim(ingredient: str) -> str:
    """The base claim that an ingredient is at hand: ``We have <ingredient>.``"""
    return f"We have {ingredient}."


@dataclass(frozen=True)
class RecipeStep:
    """One step of a recipe graph as the chains write it (the graph access a recipe oracle needs).

    Attributes:
        id: The step id in the graph.
        text: The step's own text (``Peel-Peel 1 garlic clove``).
        claim: The derived claim that does this step.
        rule: The base claim of its rule, ``None`` for a step without predecessors.
        predecessors: The texts of its predecessor steps (``START`` for the start node), in edge order.
        ingredients: The canonical ingredients it needs (empty when it has no raw ingredient list).
    """

    id: int
    text: str
    claim: str
    rule: str | None
    predecessors: tuple[str, ...]
    ingredients: tuple[str, ...]


def recipe_steps(graph: dict[str, Any]) -> list[RecipeStep]:
    """The steps of a recipe graph in topological order (START excluded, END included), as the chains write them."""
    text = {int(k): v for k, v in graph["steps"].items()}
    preds = _predecessors(graph["edges"])
    raw, mapped = _step_lists(graph, "ingredients"), _step_lists(graph, "step_mapped_ingredients")
    out = []
    for s in [int(x) for x in graph["topo_order"]][1:]:
        needs = tuple(mapped.get(s) or []) if raw.get(s) is not None else ()
        rule = _rule_claim(text, preds[s], s) if s in preds else None
        out.append(RecipeStep(s, text[s], _step_claim(text, preds.get(s, []), raw.get(s), s), rule,
                              tuple(text[p] for p in preds.get(s, [])), needs))
    return out


def _recipe_chain(name: str, graph: dict[str, Any], dropped: set[str], shuffle: random.Random, cid: str,
                  meta: dict[str, Any]) -> Chain:
    """Rules + ingredient claims minus ``dropped``, shuffled, ``We now START.`` last (unless dropped); the steps in
    topological order, labelled unsound when a needed claim is missing or a predecessor is unsound."""
    text = {int(k): v for k, v in graph["steps"].items()}
    preds = _predecessors(graph["edges"])
    rules = [_rule_claim(text, sources, target) for target, sources in preds.items()]
    ingredients = [x for x in graph["all_mapped_ingredients_unique"] if x != "None"]
    base = [c for c in rules + [ingredient_claim(x) for x in ingredients] if c not in dropped]
    shuffle.shuffle(base)
    base += [] if START_CLAIM in dropped else [START_CLAIM]
    steps = recipe_steps(graph)
    unsound: set[int] = set()
    for step in steps:
        blocked = [p for p in preds.get(step.id, []) if p in unsound or (text[p] == "START" and START_CLAIM in dropped)]
        missing = [x for x in step.ingredients if ingredient_claim(x) in dropped]
        if blocked or missing or (step.rule is not None and step.rule in dropped):
            unsound.add(step.id)
    labels = [int(s.id in unsound) for s in steps]
    return Chain(base, [s.claim for s in steps], labels=labels, id=cid,
                 meta={"task": "captaincook_recipes", "recipe": name, **meta, "step_ids": [s.id for s in steps]})


def _build_chain(name: str, graph: dict[str, Any], idx: int) -> Chain:
    ingredients = [x for x in graph["all_mapped_ingredients_unique"] if x != "None"]
    dropped = ingredients[random.Random(_SEED).randint(0, len(ingredients) - 1)]
    meta = {"dropped_ingredient": dropped, "dropped_claim": ingredient_claim(dropped)}
    return _recipe_chain(name, graph, {ingredient_claim(dropped)}, random.Random(idx + 1), f"captaincook-{idx}", meta)


def recipe_variant(name: str, graph: dict[str, Any], seed: int, delete: str = "ingredient") -> Chain:
    """A CaptainCookRecipes-style chain of one graph with a random base claim deleted (training data).

    The evaluation set deletes one fixed ingredient per recipe (:func:`recipe_example`); training chains vary what
    is missing and the order of the base claims, so a head sees each recipe's dependencies from several sides.

    Args:
        name: The recipe (file stem), recorded in ``meta["recipe"]``.
        graph: Its graph (from :func:`load_recipe_graphs`).
        seed: Seeds the deleted claim and the shuffle.
        delete: ``"ingredient"`` (one ``We have`` claim), ``"rule"`` (one rule claim), ``"start"`` (``We now START.``)
            or ``"none"`` (every step sound).

    Returns:
        A labelled :class:`Chain` with id ``recipe-<name>-<delete>-<seed>``; ``meta["deleted_claim"]`` names what
        is missing (``None`` for ``"none"``). Step ``i`` is unsound iff a claim it needs (its rule, an ingredient,
        ``We now START.`` for a first step) is missing or one of its predecessors is unsound.
    """
    if delete not in RECIPE_DELETIONS:
        raise ValueError(f"delete={delete!r} is not a recipe deletion: use one of {RECIPE_DELETIONS}.")
    rng = random.Random(seed)
    steps = recipe_steps(graph)
    pool = {
        "ingredient": [ingredient_claim(x) for x in graph["all_mapped_ingredients_unique"] if x != "None"],
        "rule": sorted({s.rule for s in steps if s.rule is not None}),
        "start": [START_CLAIM],
        "none": [None],
    }[delete]
    deleted = rng.choice(pool)
    return _recipe_chain(name, graph, {deleted} - {None}, rng, f"recipe-{name}-{delete}-{seed}",
                         {"deleted": delete, "deleted_claim": deleted})


def recipe_example(idx: int, data_dir: str | os.PathLike[str] | None = None) -> Chain:
    """CaptainCookRecipes example ``idx`` (0 <= idx < 1000).

    Args:
        idx: Entry of the shuffled 1000-entry list; it also seeds the base-claim shuffle (``Random(idx + 1)``).
        data_dir: The folder that contains ``recipe_graphs/`` (see :func:`load_recipe_graphs`).

    Returns:
        A labelled :class:`Chain` with id ``captaincook-{idx}``; ``meta`` names the recipe and the dropped ingredient.
    """
    if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < NUM_RECIPE_ENTRIES:
        raise ValueError(f"idx={idx!r} must be an int in [0, {NUM_RECIPE_ENTRIES}) (the dataset has 1000 entries).")
    name, graph = _entries(load_recipe_graphs(data_dir))[idx]
    return _build_chain(name, graph, idx)


def load_recipes(
    n: int | None = None, start: int = 0, data_dir: str | os.PathLike[str] | None = None
) -> list[Chain]:
    """Examples ``start .. start + n - 1`` of CaptainCookRecipes (there is no label flaw to switch here).

    Args:
        n: Number of examples; ``None`` = all entries from ``start`` to 1000.
        start: First entry.
        data_dir: The folder that contains ``recipe_graphs/``; ``None`` reads ``$ARES_DATA_DIR``.

    Returns:
        Labelled chains in entry order.

    Raises:
        FileNotFoundError: No recipe graphs were found (the message says where it looked and how to fix it).
    """
    if not isinstance(start, int) or isinstance(start, bool) or not 0 <= start <= NUM_RECIPE_ENTRIES:
        raise ValueError(f"start={start!r} must be an int in [0, {NUM_RECIPE_ENTRIES}].")
    if n is None:
        n = NUM_RECIPE_ENTRIES - start
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= NUM_RECIPE_ENTRIES - start:
        raise ValueError(
            f"n={n!r} must be an int in [0, {NUM_RECIPE_ENTRIES - start}] for start={start} (the dataset has "
            f"{NUM_RECIPE_ENTRIES} entries); use n=None for all of them."
        )
    entries = _entries(load_recipe_graphs(data_dir))
    return [_build_chain(name, graph, i) for i, (name, graph) in enumerate(entries[start:start + n], start)]
