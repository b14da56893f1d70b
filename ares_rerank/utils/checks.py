"""Argument checks shared by every module: what counts as a number, a finite number, an integer, a positive one.

numpy scalars count (``np.float32(0.1)`` or ``np.int64(8)`` read from a config), bools never do.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np


__all__ = ["check_positive_int", "is_finite_number", "is_int", "is_number"]


def is_number(value: Any) -> bool:
    """A real number, numpy scalars included (``np.float32(0.1)`` from a config), but not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def is_finite_number(value: Any) -> bool:
    """A real number (:func:`is_number`) that is finite: NaN, infinities and integers too large for a float are not."""
    if not is_number(value):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # math.isfinite(10**400)
        return False


def is_int(value: Any) -> bool:
    """An integer, numpy integers included (``np.int64(8)`` from a config), but not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def check_positive_int(value: Any, name: str, example: int | None = None, allow_none: bool = False) -> Any:
    """``value`` if it is a positive integer (or ``None`` with ``allow_none``), else a ValueError naming it.

    Args:
        value: What was given.
        name: The parameter as the caller names it: ``"batch_size"`` (``batch_size=0 must be ...``) or
            ``"AresFilter(top_k"`` (``AresFilter(top_k=0) must be ...``).
        example: A value to suggest.
        allow_none: ``None`` is accepted (no limit).
    """
    if (allow_none and value is None) or (is_int(value) and value >= 1):
        return value
    shown = f"{name}={value!r}" + (")" if "(" in name else "")
    none = " or None (no limit)" if allow_none else ""
    hint = f", e.g. {example}" if example is not None else ""
    raise ValueError(f"{shown} must be a positive integer{none}{hint}.")
