"""The benchmark scripts and committed results of the source checkout; they run against the installed package
(the evaluation library itself is :mod:`ares_rerank.evaluation`, installed with ``pip install 'ares-rerank[eval]'``).

    python -m eval.make_results          # regenerates docs/RESULTS.md from eval/results/ and fresh oracle runs
    python -m eval.bench_perf --task claimtrees --length 10 --n 100 --backbone default
    python -m eval.bench_cost --backbone claimtrees-oracle --lengths 10,20,50
    python -m eval.bench_backbones

Scores are cached under ``eval/cache/`` (git-ignored). The shared data folder defaults to ``../shared/data`` beside
the checkout when ``$ARES_DATA_DIR`` is not set.
"""

from __future__ import annotations

import os
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = ROOT / "eval" / "cache"
RESULTS_DIR = ROOT / "eval" / "results"

if "ARES_DATA_DIR" not in os.environ and (ROOT.parent / "shared" / "data").is_dir():
    os.environ["ARES_DATA_DIR"] = str(ROOT.parent / "shared" / "data")
