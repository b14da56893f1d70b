"""Evaluate a verifier with the paper's protocol (install the ``eval`` extra: scikit-learn, matplotlib).

Data flow: ``tasks/`` (one loader per benchmark -> :class:`TaskData` of labelled chains) -> :mod:`.runner` (scores
per method, cached on disk by :mod:`.cache`, backbone work counted by :mod:`.backbones`) -> :mod:`.protocol` (folds,
thresholds, macro-F1, best-of-2, sample efficiency) -> :mod:`.report` (markdown) / :mod:`.plots` (PNG).

    from .. import load_backbone
    from . import ScoreCache, evaluate, load_task, write_results

    task = load_task("claimtrees", length=10, n=100)
    results = evaluate(task, load_backbone("claimtrees-oracle"), ["ares", "entail-prev"], cache=ScoreCache("cache"),
                       backbone_name="claimtrees-oracle")  # the cache keys scores by it
    write_results(results, "results", "claimtrees-10")

The same from the shell: ``ares-rerank eval --task claimtrees --length 10 --n 100``. The benchmark scripts and the
committed results that reproduce docs/RESULTS.md live in the source checkout's ``eval/`` folder.
"""

from .backbones import CountingBackbone, backbone_cache_key, backbone_key
from .cache import ScoreCache, method_key
from .protocol import best_of_2, cross_validate, fold_prevalences, processbench_cv, sample_efficiency
from .report import METHOD_NAMES, markdown_table, results_markdown
from .runner import evaluate, score_cached, summarize, task_record, write_results
from .tasks import TASKS, TaskData, load_task


__all__ = [
    "METHOD_NAMES",
    "TASKS",
    "CountingBackbone",
    "ScoreCache",
    "TaskData",
    "backbone_cache_key",
    "backbone_key",
    "best_of_2",
    "cross_validate",
    "evaluate",
    "fold_prevalences",
    "load_task",
    "markdown_table",
    "method_key",
    "processbench_cv",
    "results_markdown",
    "sample_efficiency",
    "score_cached",
    "summarize",
    "task_record",
    "write_results",
]
