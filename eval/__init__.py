"""The benchmark scripts and committed results of the source checkout; they run against the installed package
(the evaluation library itself is :mod:`ares_rerank.evaluation`, installed with ``pip install 'ares-rerank[eval]'``).

    python -m eval.make_results          # regenerates docs/RESULTS.md from eval/results/ and fresh oracle runs
    python -m eval.bench_perf --task claimtrees --length 10 --n 100 --backbone default
    python -m eval.bench_cost --backbone claimtrees-oracle --lengths 10,20,50
    python -m eval.bench_backbones

Scores are cached outside the checkout, under ``$XDG_CACHE_HOME/ares-rerank/eval`` (``~/.cache/ares-rerank/eval``;
``--cache-dir`` elsewhere). The shared data folder defaults to ``../shared/data`` beside the checkout when
``$ARES_DATA_DIR`` is not set.
"""

from __future__ import annotations

import os
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
# a run's outputs stay out of the source tree: the score cache goes where the user's caches go
CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ares-rerank" / "eval"
RESULTS_DIR = ROOT / "eval" / "results"

if "ARES_DATA_DIR" not in os.environ and (ROOT.parent / "shared" / "data").is_dir():
    os.environ["ARES_DATA_DIR"] = str(ROOT.parent / "shared" / "data")
