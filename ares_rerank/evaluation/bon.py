"""Best-of-N accuracy against N, as search-and-learn and RLHFlow report it, for every verifier and selection rule.

Data flow: a :class:`~ares_rerank.evaluation.tasks.bon.BonTask` (problems, N candidates each, which are correct)
-> every method scores every distinct candidate chain once (:func:`~ares_rerank.evaluation.runner.score_cached`,
cached) -> chain scores (``aggregate``, default the final step's) and sound flags (no step at or below the
threshold) -> for N = 1, 2, 4, ..., N_max, the N candidates of each problem that the ``subsets`` protocol takes ->
each selection rule (:mod:`ares_rerank.rerank.voting`) picks one -> accuracy@N.

Which N candidates (``subsets``, named in the table's caption):

- ``"random"`` (default): ``subset_count`` seeded random subsets of N per problem, averaged: accuracy@N of N
  samples drawn from the N_max, whatever order the file lists them in.
- ``"first"``: the first N candidates of each problem, one subset: search-and-learn's protocol (its
  ``subsample_completions`` keeps ``completions[:n]``, because beam search and DVTS write a problem's completions in
  groups that a random subset would break up). Its ``pred_naive@n`` / ``pred_weighted@n`` / ``pred_maj@n`` are the
  rows ``given | best`` / ``given | weighted`` / ``majority`` with ``aggregate="final"`` (its ``agg_strategy``
  ``"last"``), answers grouped by ``answer_fn`` where it groups them by a latex2sympy canonical form. One more
  difference: a completion without an answer joins no group here, where search-and-learn groups its empty answers
  together. Its N are the powers of two; here N_max is added when it is not one.

The two agree at N = N_max; below it they differ by how the file is ordered (and by the random subsets' noise).

Rows of the result:

- ``<method> | <selection>``: a verifier with a rule (``best`` = search-and-learn's naive, ``weighted``,
  ``sound-weighted``);
- ``majority``: the most frequent answer, no verifier (search-and-learn's ``pred_maj``);
- ``random``: one of the N drawn at random (the expected accuracy of a single sample);
- ``pass@N``: at least one of the N is correct: the ceiling every rule is measured against (with random subsets
  the exact unbiased estimate over all N-subsets, OpenAI's ``pass@k``; with the first N, whether one of them is).

Each cell is the mean over problems of the per-problem accuracy averaged over its subsets, with the standard error
over problems (``std / sqrt(P)``): it measures how much the number would move on another draw of problems. At
N = N_max every subset is the whole set.
"""

from __future__ import annotations

import math
import platform
import random
import warnings
from dataclasses import asdict
from typing import Any, Sequence

import numpy as np

from ..aggregate import Aggregate, aggregate_name, aggregate_scores
from ..rerank.answers import answer_matcher
from ..estimator.config import AresConfig, flag_threshold
from ..backbones.demo import DemoBackboneWarning, demo_warning_message, is_demo_backbone, off_domain_reason
from ..scoring import METHODS, check_batch_size
from ..utils.http import redact
from ..rerank.voting import check_selection, order_by_vote

from .backbones import backbone_cache_key
from .cache import ScoreCache
from .report import markdown_table
from .runner import score_cached
from .tasks.bon import BonTask


__all__ = ["BON_SELECTIONS", "GIVEN", "SUBSET_COUNT", "SUBSETS", "bon_markdown", "evaluate_bon", "n_values",
           "pass_at_k", "subsets_caption"]

#: The selection rules reported per verifier by default.
BON_SELECTIONS = ("best", "weighted", "sound-weighted")
#: The method name of the per-step scores shipped with a data set (search-and-learn's ``scores``).
GIVEN = "given"
#: Which N candidates accuracy@N reads (see the module docstring).
SUBSETS = ("random", "first")
#: Random subsets per problem and N < N_max (``subsets="random"``), unless told.
SUBSET_COUNT = 32


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that ``k`` of ``n`` candidates drawn without replacement include one of the ``c`` correct ones."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def n_values(max_n: int) -> list[int]:
    """1, 2, 4, ... up to ``max_n``, and ``max_n`` itself."""
    out = [1 << i for i in range(max_n.bit_length()) if 1 << i <= max_n]
    return out if out[-1] == max_n else out + [max_n]


def _method_scores(task: BonTask, method: str, backbone: Any, config: AresConfig, threshold: float,
                   aggregate: Aggregate, cache_args: dict[str, Any],
                   ) -> tuple[list[list[float | None]], list[list[bool]], dict]:
    """Per problem, per candidate: chain score and sound flag (``None`` / ``False`` for a candidate with no step)."""
    if method == GIVEN:
        scores, sound = [], []
        for problem in task.problems:
            if problem.given_scores is None:
                raise ValueError(f"method {GIVEN!r} needs per-step scores in the data ('scores'); problem "
                                 f"{problem.id} has none.")
            scores.append([aggregate_scores(s, aggregate) if s else None for s in problem.given_scores])
            sound.append([bool(s) and min(s) > threshold for s in problem.given_scores])
        return scores, sound, {"source": "the data set's own per-step scores"}
    chains = [c for p in task.problems for c in p.chains if c is not None]
    results, stats = score_cached(chains, backbone, method, config, **cache_args)
    if is_demo_backbone(backbone) and method == "ares":  # the demo head outside its domain: said, as evaluate does
        reason = off_domain_reason([c.steps for c in chains], [r.step_scores for r in results])
        if reason is not None:
            warnings.warn(demo_warning_message(f"evaluate_bon on {task.name}", reason), DemoBackboneWarning,
                          stacklevel=3)
    found = iter(results)
    scores, sound = [], []
    for problem in task.problems:
        row_scores, row_sound = [], []
        for chain in problem.chains:
            if chain is None:
                row_scores.append(None)
                row_sound.append(False)
                continue
            result = next(found)
            row_scores.append(aggregate_scores(result.step_scores, aggregate))
            row_sound.append(result.first_error(threshold) == -1)
        scores.append(row_scores)
        sound.append(row_sound)
    return scores, sound, stats


def _renumber(groups: Sequence[int | None]) -> list[int | None]:
    """Groups numbered by first appearance within a subset (the votes' tie rule)."""
    seen: dict[int, int] = {}
    return [None if g is None else seen.setdefault(g, len(seen)) for g in groups]


def evaluate_bon(
    task: BonTask,
    backbone: Any,
    methods: Sequence[str],
    config: AresConfig | None = None,
    *,
    selections: Sequence[str] = BON_SELECTIONS,
    aggregate: Aggregate = "final",
    max_n: int | None = None,
    subsets: str = "random",
    subset_count: int = SUBSET_COUNT,
    seed: int = 0,
    backbone_name: str | None = None,
    backbone_kind: str | None = None,
    backbone_options: dict[str, Any] | None = None,
    cache: ScoreCache | None = None,
    refresh: bool = False,
    batch_size: int = 32,
    progress: bool = True,
    threshold: float | None = None,
) -> dict[str, Any]:
    """Accuracy against N for every method and selection (see the module docstring).

    Args:
        task: The candidate sets.
        backbone: Scores the chains (unused when ``methods`` is only ``["given"]``).
        methods: ``"ares"``, baselines of :data:`~ares_rerank.scoring.METHODS`, and/or ``"given"`` (the data
            set's own step scores); the no-verifier rows are always reported.
        config: ARES settings.
        selections: Rules per method (:data:`~ares_rerank.rerank.voting.SELECTIONS` without ``majority``, which needs no
            verifier and is its own row).
        aggregate: Chain score from step scores (search-and-learn uses the last step's).
        max_n: Largest N (default: the smallest candidate count of any problem).
        subsets: ``"random"`` (``subset_count`` seeded random subsets per problem and N < N_max) or ``"first"``
            (the first N candidates: search-and-learn's protocol).
        subset_count: Random subsets per problem and N (``subsets="random"`` only).
        seed: Seeds the random subsets.
        backbone_name, backbone_kind, backbone_options, cache, refresh, batch_size, progress: As
            :func:`~ares_rerank.evaluation.runner.evaluate`.
        threshold: A chain is sound when no step has tau <= threshold (the sound-weighted vote); default 0.5, or a
            deprecated ``AresConfig(threshold=)``'s.

    Returns:
        A JSON-ready dict: task, backbone, config, ``n_values``, ``rows`` (``{row: {N: [mean, se]}}``), per-method
        scoring ``stats``, and ``environment``.
    """
    config = AresConfig() if config is None else config
    if isinstance(methods, str):
        raise TypeError(f"evaluate_bon(methods={methods!r}) must be a list of method names, e.g. [{methods!r}].")
    unknown = [m for m in methods if m not in METHODS and m != GIVEN]
    if unknown:
        raise ValueError(f"methods={list(methods)!r}: unknown {unknown}; use some of {list(METHODS) + [GIVEN]}.")
    selections = [check_selection(s, "selections") for s in selections]
    if "majority" in selections:
        raise ValueError("selections: 'majority' needs no verifier and is always reported as its own row; drop it.")
    check_batch_size(batch_size, "evaluate_bon")
    if isinstance(subsets, int) and not isinstance(subsets, bool):
        raise ValueError(f"subsets={subsets!r}: subsets names the protocol, {' or '.join(map(repr, SUBSETS))}; the "
                         f"number of random subsets is subset_count={subsets!r}.")
    if subsets not in SUBSETS:
        raise ValueError(f"subsets={subsets!r} is unknown: use 'random' (seeded random subsets of N) or 'first' (the "
                         "first N candidates of each problem, search-and-learn's protocol).")
    if isinstance(subset_count, bool) or not isinstance(subset_count, int) or subset_count < 1:
        raise ValueError(f"subset_count={subset_count!r} must be a positive int (random subsets per problem and N).")
    top = task.max_n if max_n is None else max_n
    if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= task.max_n:
        raise ValueError(f"max_n={max_n!r} must be an int in [1, {task.max_n}] (the fewest candidates of a problem).")
    if cache is not None and backbone_name is None:
        raise ValueError("evaluate_bon(cache=...) keys scores by backbone_name: pass backbone_name= or cache=None.")
    backbone_name = repr(backbone) if backbone_name is None else backbone_name
    cache_args = {"cache": cache, "cache_path": (task.key, backbone_cache_key(backbone_name, backbone_kind,
                                                                                backbone_options)),
                  "refresh": refresh, "batch_size": batch_size, "progress": progress}
    matcher = answer_matcher(task.answer_fn)
    grouped = [matcher.group(p.texts) for p in task.problems]
    threshold = flag_threshold(config, threshold, "evaluate_bon(threshold")
    per_method = {m: _method_scores(task, m, backbone, config, threshold, aggregate, cache_args) for m in methods}
    ns = n_values(top)
    rows: dict[str, list[list[float]]] = {}  # row -> per N, per problem accuracy

    def add(row: str, k: int, values: list[float]) -> None:
        rows.setdefault(row, [[] for _ in ns])[k].extend(values)

    for p, problem in enumerate(task.problems):
        total, correct = len(problem.texts), problem.correct
        groups, answers = grouped[p]
        for k, n in enumerate(ns):
            if subsets == "first" or n == total:
                draws = [list(range(n))]
            else:
                rng = random.Random(f"{seed}/{p}/{n}")
                draws = [sorted(rng.sample(range(total), n)) for _ in range(subset_count)]
            hits: dict[str, float] = {}
            for subset in draws:
                sub_groups, sub_answers = _renumber([groups[i] for i in subset]), [answers[i] for i in subset]
                pick = order_by_vote([None] * n, sub_groups, sub_answers, "majority")[0][0]
                hits["majority"] = hits.get("majority", 0.0) + correct[subset[pick]]
                for method, (scores, sound, _) in per_method.items():
                    sub_scores, sub_sound = [scores[p][i] for i in subset], [sound[p][i] for i in subset]
                    for selection in selections:
                        order, _ = order_by_vote(sub_scores, sub_groups, sub_answers, selection, sub_sound)
                        row = f"{method} | {selection}"
                        hits[row] = hits.get(row, 0.0) + correct[subset[order[0]]]
            for row, value in hits.items():
                add(row, k, [value / len(draws)])
            if subsets == "first":
                add("pass@N", k, [float(any(correct[:n]))])
                add("random", k, [sum(correct[:n]) / n])
            else:  # exact over every N-subset, so neither depends on the draws
                add("pass@N", k, [pass_at_k(total, sum(correct), n)])
                add("random", k, [sum(correct) / total])
    table = {row: {str(n): [float(np.mean(v)), float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0]
                   for n, v in zip(ns, values)} for row, values in rows.items()}
    return {
        "kind": "best-of-n",
        "task": {"name": task.name, "key": task.key, "info": task.info, "num_problems": len(task.problems),
                 "candidates": task.max_n, "answer_fn": matcher.name},
        "backbone": redact(backbone_name),
        "backbone_options": redact(backbone_options or {}),  # written to results files: no api_key
        "config": asdict(config),
        "threshold": threshold,
        "aggregate": aggregate_name(aggregate),
        "selections": list(selections),
        "subsets": subsets,
        "subset_count": subset_count if subsets == "random" else None,
        "seed": seed if subsets == "random" else None,
        "n_values": ns,
        "rows": table,
        "stats": {m: v[2] for m, v in per_method.items()},
        "environment": {"python": platform.python_version(), "machine": platform.machine()},
    }


def subsets_caption(results: dict[str, Any]) -> str:
    """Which N candidates a result's accuracy@N read, in words (results written before ``subsets`` named the
    protocol hold the count of random subsets there)."""
    protocol = results.get("subsets")
    if protocol == "first":
        return "the first N candidates of each problem (search-and-learn's protocol)"
    count = protocol if isinstance(protocol, int) else results.get("subset_count")
    return f"{count} random subsets per N < N_max (seed {results.get('seed')})"


def bon_markdown(results: dict[str, Any]) -> str:
    """The accuracy-against-N table (percent, mean +- SE over problems), pass@N first and no-verifier rows last."""
    ns = results["n_values"]
    order = ["pass@N"] + [r for r in results["rows"] if r not in ("pass@N", "majority", "random")]
    order += ["majority", "random"]
    body = []
    for row in order:
        cells = results["rows"][row]
        label = {"pass@N": ["pass@N (ceiling)", "any correct"], "majority": ["no verifier", "majority"],
                 "random": ["no verifier", "one sample"]}.get(row) or row.split(" | ")
        body.append(label + [f"{100 * cells[str(n)][0]:.1f} ± {100 * cells[str(n)][1]:.1f}" for n in ns])
    task = results["task"]
    head = (f"**{task['name']}**: {task['num_problems']} problems, N up to {task['candidates']}, answers by "
            f"{task['answer_fn']}; backbone `{results['backbone']}`; chain score = {results['aggregate']} step; "
            f"{subsets_caption(results)}; accuracy % (mean ± SE over problems).")
    return head + "\n\n" + markdown_table(["method", "selection"] + [f"N={n}" for n in ns], body)
