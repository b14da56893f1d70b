"""Alias of :mod:`ares_rerank.rewards.verl`, so verl configs that name ``pkg://ares_rerank.verl`` keep working:
importing it gives that very module."""

import sys

from .rewards import verl


sys.modules[__name__] = verl
