"""Run methods on a benchmark with one backbone: score (cached), then the paper's protocol; JSON + markdown out.

From the shell: ``ares-rerank eval`` (:mod:`ares_rerank.commands.eval`). From Python::

    from .. import load_backbone
    from . import ScoreCache, evaluate, load_task
    task = load_task("claimtrees", length=10, n=100)
    results = evaluate(task, load_backbone("claimtrees-oracle"), ["ares", "entail-prev"], cache=ScoreCache("cache"),
                       backbone_name="claimtrees-oracle")
"""

from __future__ import annotations

import json
import platform
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from ..chain import ARES_MODES, Chain, ChainScores
from ..estimator.config import AresConfig
from ..backbones.demo import DemoBackboneWarning, demo_warning_message, is_demo_backbone, off_domain_reason
from ..utils.http import redact
from ..utils.io import check_output_dir, write_atomic
from ..scoring import METHODS, check_batch_size, score_chains

from .backbones import CountingBackbone, backbone_cache_key
from .cache import ScoreCache, method_key
from .protocol import best_of_2, cross_validate, fold_prevalences, processbench_cv, sample_efficiency
from .report import results_markdown
from .tasks import TaskData


__all__ = ["evaluate", "score_cached", "summarize", "task_record", "write_results"]


def score_cached(
    chains: Sequence[Chain],
    backbone: Any,
    method: str,
    config: AresConfig,
    *,
    cache: ScoreCache | None = None,
    cache_path: tuple[str, str] = ("task", "backbone"),
    refresh: bool = False,
    batch_size: int = 32,
    progress: bool = True,
) -> tuple[list[ChainScores], dict[str, float]]:
    """Score ``chains`` with ``method``, reusing cached chains and caching new ones batch by batch.

    Args:
        chains: The chains (duplicates by text are scored once).
        backbone: The backbone.
        method: ``"ares"`` or a baseline name.
        config: ARES settings (part of the cache key for ARES).
        cache: Where scores are cached; ``None`` = no cache.
        cache_path: ``(task_key, backbone_key)`` naming the cache file together with the method.
        refresh: Ignore cached scores (and overwrite them).
        batch_size: Chains per :func:`score_chains` call; all chains of a batch share backbone waves.
        progress: Show a tqdm bar.

    Returns:
        ``(scores in chain order, stats)``; stats: ``cached`` / ``scored`` chains, backbone ``calls`` / ``pairs``,
        scoring ``seconds`` (backbone included, cache reads excluded).
    """
    from tqdm.auto import tqdm

    mkey = method_key(method, config)
    entries = {} if cache is None or refresh else cache.load(*cache_path, mkey)
    found: dict[str, ChainScores] = {}
    todo: dict[str, Chain] = {}
    for chain in chains:
        fp = chain.fingerprint()
        hit = cache.lookup(entries, chain) if cache is not None and not refresh else None
        if hit is not None:
            found[fp] = hit
        elif fp not in todo:
            todo[fp] = chain
    counter = CountingBackbone(backbone)
    pending = list(todo.items())
    start = time.perf_counter()
    bar = tqdm(total=len(pending), desc=f"{method}", unit="chain", disable=not progress or not pending, leave=False)
    for i in range(0, len(pending), batch_size):
        batch = pending[i:i + batch_size]
        new = dict(zip((fp for fp, _ in batch), score_chains([c for _, c in batch], counter, method, config)))
        found.update(new)
        if cache is not None:
            cache.save(*cache_path, mkey, new)
        bar.update(len(batch))
    bar.close()
    seconds = time.perf_counter() - start
    out = [_with_id(found[chain.fingerprint()], chain) for chain in chains]
    stats = {"cached": len(chains) - len(pending), "scored": len(pending), "calls": counter.calls,
             "pairs": counter.pairs, "seconds": seconds}
    return out, stats


def _with_id(scores: ChainScores, chain: Chain) -> ChainScores:
    return scores if scores.chain_id == chain.id else ChainScores(**{**scores.to_dict(), "chain_id": chain.id})


def summarize(task: TaskData, method: str, scores: list[ChainScores], twin_scores: list[ChainScores] | None,
              config: AresConfig) -> dict[str, Any]:
    """Every metric the task supports for one method's scores."""
    steps = [s.step_scores for s in scores]
    out: dict[str, Any] = {"method": method, "macro": cross_validate(steps, [c.labels for c in task.chains]).to_dict()}
    out["evaluations_per_chain"] = sum(s.evaluations for s in scores) / len(scores)
    if task.first_errors is not None and -1 in task.first_errors and any(e != -1 for e in task.first_errors):
        out["processbench"] = processbench_cv(steps, task.first_errors)  # needs correct and erroneous chains
    if twin_scores is not None:
        sound = [s.step_scores for s in twin_scores]
        out["best_of_2"] = {"step_avg": best_of_2(sound, steps, "mean"), "final_step": best_of_2(sound, steps, "final")}
    if method == "ares":
        out["efficiency"] = sample_efficiency(scores, config.eps, config.delta)
        out["modes"] = {m: sum(s.mode == m for s in scores) for m in ARES_MODES}
    return out


def evaluate(
    task: TaskData,
    backbone: Any,
    methods: Sequence[str],
    config: AresConfig | None = None,
    *,
    backbone_name: str | None = None,
    backbone_kind: str | None = None,
    backbone_options: dict[str, Any] | None = None,
    cache: ScoreCache | None = None,
    refresh: bool = False,
    batch_size: int = 32,
    progress: bool = True,
) -> dict[str, Any]:
    """Score ``task`` with every method and apply the protocol.

    Args:
        task: Labelled chains (and twins for best-of-2).
        backbone: The backbone object.
        methods: ``"ares"`` and/or baseline names.
        config: ARES settings (default ``AresConfig()``: p = 1, eps = delta = 0.1, auto mode).
        backbone_name: Names the backbone in the results and the cache (with a fingerprint of the files when it
            is ``"default"`` or a local folder, see :func:`ares_rerank.evaluation.backbones.backbone_cache_key`);
            required with ``cache``, which would otherwise hand one backbone's scores to another. Default: the
            backbone's ``repr``.
        backbone_kind, backbone_options: The ``kind`` and load options it was loaded with (part of the cache key).
        cache, refresh, batch_size, progress: See :func:`score_cached`.

    Returns:
        A JSON-ready dict: task, backbone, config, fold prevalences, and per method the macro P/R/F1 with
        bootstrap SEs and folds, ProcessBench's metric, best-of-2 (when the task has twins), ARES's sample
        efficiency, and the scoring stats (cached / scored chains, backbone calls, seconds).
    """
    config = AresConfig() if config is None else config
    if not isinstance(config, AresConfig):
        raise TypeError(f"evaluate(config=...) must be an AresConfig, got {type(config).__name__}: e.g. "
                        "AresConfig(eps=0.1).")
    if isinstance(methods, str):
        raise TypeError(f"evaluate(methods={methods!r}) must be a list of method names, e.g. [{methods!r}].")
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ValueError(f"methods={list(methods)!r}: unknown {unknown}; use some of {list(METHODS)}.")
    check_batch_size(batch_size, "evaluate")
    if cache is not None and backbone_name is None:
        raise ValueError("evaluate(cache=...) keys its scores by backbone_name: pass backbone_name= naming this "
                         "backbone (its folder or hub id, as load_backbone got it), or cache=None; unnamed, a cache "
                         "would hand one backbone's scores to another.")
    backbone_name = repr(backbone) if backbone_name is None else backbone_name
    chains = list(task.chains) + list(task.twins or [])
    results: dict[str, Any] = {
        "task": task_record(task),
        "backbone": redact(backbone_name),  # written to results files: no URL password, no api_key
        "backbone_options": redact(backbone_options or {}),
        "config": asdict(config),
        "fold_prevalence": fold_prevalences([c.labels for c in task.chains]),
        "methods": {},
        "environment": {"python": platform.python_version(), "machine": platform.machine()},
    }
    cache_key = backbone_cache_key(backbone_name, backbone_kind, backbone_options)
    warned = not is_demo_backbone(backbone)
    for method in methods:
        scores, stats = score_cached(
            chains, backbone, method, config, cache=cache, cache_path=(task.key, cache_key),
            refresh=refresh, batch_size=batch_size, progress=progress,
        )
        main_scores, twin_scores = scores[: len(task.chains)], scores[len(task.chains):] or None
        results["methods"][method] = {**summarize(task, method, main_scores, twin_scores, config), "stats": stats}
        if not warned:  # the demo head on text outside its domain: said once per call, as the reranker does
            reason = off_domain_reason([c.steps for c in task.chains], [s.step_scores for s in main_scores])
            if reason is not None:
                warned = True
                warnings.warn(demo_warning_message(f"evaluate on {task.name}", reason), DemoBackboneWarning,
                              stacklevel=2)
    return results


def task_record(task: TaskData) -> dict[str, Any]:
    """What a results file records of its task (``results["task"]``): name, key, loader info and size."""
    return {"name": task.name, "key": task.key, "info": task.info, "num_chains": len(task.chains),
            "num_steps": sum(c.num_steps for c in task.chains)}


def write_results(results: dict[str, Any], out_dir: str | Path, stem: str) -> Path:
    """Write ``<out_dir>/<stem>.json`` (the results) and ``.md`` (their table), each atomically; returns the JSON
    path."""
    out_dir = check_output_dir(out_dir, flag="write_results(out_dir=...)")
    write_atomic(out_dir / f"{stem}.json", json.dumps(results, indent=1))
    write_atomic(out_dir / f"{stem}.md", results_markdown(results) + "\n")
    return out_dir / f"{stem}.json"
