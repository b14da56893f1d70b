"""The recipe and configs that reproduce the shipped default head, and the script that measures it; they run against
the installed package (the trainer itself is :mod:`ares_rerank.training`).

    python -m training.train_default_head
    python -m training.evaluate_head --head default --threads 1

The shared data folder (CaptainCookRecipes for evaluate_head) defaults to ``../shared/data`` beside the checkout when
``$ARES_DATA_DIR`` is not set.
"""

from __future__ import annotations

import os
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]

if "ARES_DATA_DIR" not in os.environ and (ROOT.parent / "shared" / "data").is_dir():
    os.environ["ARES_DATA_DIR"] = str(ROOT.parent / "shared" / "data")
