"""The ares-rerank evaluation harness: benchmarks, the paper's protocol, the runner, plots and benchmarks.

Run from a source checkout (this folder is not installed with the package):

    python -m eval.runner --task claimtrees --length 10 --n 100 --backbone claimtrees-oracle --methods ares,entail-prev
    python -m eval.make_results          # regenerates docs/RESULTS.md
    python -m eval.bench_perf --backbone claimtrees-oracle

Layout: ``tasks/`` (one loader per benchmark) -> ``runner.py`` (scores, cached) -> ``protocol.py`` (folds,
thresholds, metrics) -> ``report.py`` (markdown) / ``plots.py`` (PNG).
"""
