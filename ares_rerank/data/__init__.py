"""Data sets as labelled :class:`~ares_rerank.chain.Chain` lists: ClaimTrees (synthetic) and CaptainCookRecipes.

``shared_data_dir`` locates the folder with the benchmark files (the argument, else ``$ARES_DATA_DIR``) for every
loader that reads files.
"""

from __future__ import annotations

from .claimtrees import (
    VARIANTS,
    ClaimTreesTemplates,
    claimtrees_example,
    claimtrees_insertion,
    claimtrees_multi_source,
    claimtrees_names,
    claimtrees_vanilla,
    load_claimtrees,
)
from .paths import DATA_DIR_ENV, default_data_dir, shared_data_dir
from .recipes import NUM_RECIPE_ENTRIES, load_recipe_graphs, load_recipes, recipe_example


__all__ = [
    "ClaimTreesTemplates",
    "DATA_DIR_ENV",
    "NUM_RECIPE_ENTRIES",
    "VARIANTS",
    "claimtrees_example",
    "claimtrees_insertion",
    "claimtrees_multi_source",
    "claimtrees_names",
    "claimtrees_vanilla",
    "default_data_dir",
    "load_claimtrees",
    "load_recipe_graphs",
    "load_recipes",
    "recipe_example",
    "shared_data_dir",
]
