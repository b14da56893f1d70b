"""CaptainCookRecipes: recipe task graphs as chains; a dropped ingredient makes its steps and their descendants unsound.

Task metadata:
    name: CaptainCookRecipes (the paper's ``recipe_graph3``).
    source: the 24 CaptainCook4D recipe graphs of the ARES release (``<data>/recipe_graphs``), built by
        :mod:`ares_rerank.data.recipes` (ARES_SPEC section 5; 1000 shuffled entries, 24 distinct recipes).
    labels: per step, 1 = unsound (uses the dropped ingredient, or comes after such a step along the graph).
    protocol: the first N = 100 entries (Table 1). There is no label flaw to switch here.
"""

from __future__ import annotations

import os

from ...data.recipes import load_recipes

from .base import TaskData


__all__ = ["load_task"]


def load_task(n: int = 100, *, start: int = 0, data_dir: str | os.PathLike[str] | None = None) -> TaskData:
    """Entries ``start .. start + n - 1`` of CaptainCookRecipes.

    Args:
        n: Number of entries (at most 1000 - start).
        start: First entry.
        data_dir: The folder holding ``recipe_graphs/``; ``None`` = ``$ARES_DATA_DIR`` or ``../shared/data``.

    Returns:
        A :class:`TaskData` (no ``first_errors``: every chain has an error, so ProcessBench's metric says nothing).
    """
    chains = load_recipes(n, start=start, data_dir=data_dir)
    return TaskData(
        name="CaptainCookRecipes", key=f"recipes-start{start}", chains=chains,
        info={"start": start, "n": n},
    )
