"""Step-level search against best-of-N on the simulated step generator: accuracy against N (mean +- SE over
problems, as :mod:`ares_rerank.evaluation.bon`), the steps and tokens each method generated, and the tokens early
rejection saves.

Data flow: a :class:`~ares_rerank.evaluation.simulated.SimulatedTask` -> for N = 1, 2, 4, ..., N_max, every method
runs once over all problems (:mod:`ares_rerank.search`, streaming ARES on the given backbone) -> the selected
candidate's answer against the gold one -> ``rows`` (accuracy) and ``cost`` (steps, tokens, backbone evaluations
per problem).

Methods (N candidates each, chain score = the final step's tau):

- ``best-of-n``: N samples to their end, the best by ARES;
- ``early-rejection``: the same samples (the policy keys them by candidate), each stopped at its first step with
  tau <= threshold (hard); the tokens it saves are exact: the plain run's tokens minus its own;
- ``beam-search`` / ``dvts``: search-and-learn's, ``beam_width = min(m, N)``, ``sort_completed=True``.

No-verifier rows come from the plain run's N samples: ``pass@N`` (any correct), ``majority`` and ``random`` (the
share of correct samples). Each N is its own draw of samples, so rows at different N are independent runs.
"""

from __future__ import annotations

import math
import platform
from dataclasses import asdict
from typing import Any, Sequence

import numpy as np

from ..rerank.answers import answer_matcher
from ..estimator.config import AresConfig
from ..rerank.reranker import AresReranker
from ..search import beam_search, dvts, step_generator, stepwise_best_of_n
from ..rerank.voting import order_by_vote

from .bon import n_values
from .report import markdown_table
from .simulated import SimulatedTask


__all__ = ["SEARCH_METHODS", "evaluate_search", "search_markdown"]

SEARCH_METHODS = ("best-of-n", "early-rejection", "beam-search", "dvts")
_LABELS = {"best-of-n": "ARES best-of-N", "early-rejection": "ARES best-of-N, early rejection",
           "beam-search": "ARES beam search", "dvts": "ARES DVTS"}


def _mean_se(values: Sequence[float]) -> list[float]:
    se = float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0
    return [float(np.mean(values)), se]


def _run(method: str, generator: Any, prompts: list[str], reranker: AresReranker, n: int, beam_width: int,
         seed: int) -> list:
    m = min(beam_width, n)
    if method == "best-of-n":
        return stepwise_best_of_n(generator, prompts, reranker, n, rejection="none", seed=seed)
    if method == "early-rejection":
        return stepwise_best_of_n(generator, prompts, reranker, n, rejection="hard", seed=seed)
    if method == "beam-search":
        return beam_search(generator, prompts, reranker, n, beam_width=m, sort_completed=True, seed=seed)
    return dvts(generator, prompts, reranker, n, beam_width=m, seed=seed)


def evaluate_search(
    task: SimulatedTask,
    backbone: Any,
    config: AresConfig | None = None,
    *,
    methods: Sequence[str] = SEARCH_METHODS,
    max_n: int = 16,
    beam_width: int = 4,
    seed: int = 0,
    backbone_name: str | None = None,
) -> dict[str, Any]:
    """Accuracy and cost against N for each search method (see the module docstring).

    Args:
        task: The simulated problems and policy.
        backbone: ARES's backbone (the rule oracle, the default head, ...).
        config: ARES settings. Early rejection stops a candidate at tau <= 0.5 (the reranker's default threshold;
            a deprecated ``AresConfig(threshold=)`` is forwarded).
        methods: Some of :data:`SEARCH_METHODS`; ``best-of-n`` always runs (the no-verifier rows and the savings
            come from it).
        max_n: The largest N.
        beam_width: ``m`` of beam search and DVTS (``min(m, N)`` at small N).
        seed: Keys the policy's samples.
        backbone_name: Shown in the report (default: the backbone's repr).

    Returns:
        A JSON-ready dict: ``rows`` (``{row: {N: [mean, se]}}``, the layout of
        :func:`~ares_rerank.evaluation.bon.bon_markdown`), ``cost`` (``{method: {N: {"steps", "tokens",
        "evaluations"}}}``, means per problem), ``savings`` (per N: early rejection's tokens and steps against
        plain best-of-N), task, backbone, config, environment.
    """
    unknown = [m for m in methods if m not in SEARCH_METHODS]
    if isinstance(methods, str) or unknown:
        raise ValueError(f"methods={methods!r}: use a list of {list(SEARCH_METHODS)}.")
    if not isinstance(max_n, int) or isinstance(max_n, bool) or max_n < 1:
        raise ValueError(f"max_n={max_n!r} must be a positive int.")
    config = AresConfig() if config is None else config
    matcher = answer_matcher(task.answer_fn)
    reranker = AresReranker(backbone, config, step_separator="\n\n", prompt_split="lines", aggregate="final",
                            answer_fn=matcher, show_progress_bar=False)
    generator = step_generator(task.policy)
    prompts = [p.prompt for p in task.problems]
    gold = [p.answer for p in task.problems]
    ns = n_values(max_n)
    order = ["best-of-n"] + [m for m in SEARCH_METHODS if m in methods and m != "best-of-n"]
    rows: dict[str, dict[str, list[float]]] = {}
    cost: dict[str, dict[str, dict[str, float]]] = {m: {} for m in order}
    savings: dict[str, dict[str, float]] = {}
    for n in ns:
        outcomes = {m: _run(m, generator, prompts, reranker, n, beam_width, seed) for m in order}
        for method, results in outcomes.items():
            hits = [float(matcher.parse(r.best) == g) for r, g in zip(results, gold)]
            rows.setdefault(f"{_LABELS[method]} | best", {})[str(n)] = _mean_se(hits)
            cost[method][str(n)] = {k: float(np.mean([getattr(r.stats, k) for r in results]))
                                    for k in ("steps", "tokens", "evaluations")}
        plain = outcomes["best-of-n"]
        correct = [[matcher.parse(t) == g for t in r.completions] for r, g in zip(plain, gold)]
        rows.setdefault("pass@N", {})[str(n)] = _mean_se([float(any(c)) for c in correct])
        rows.setdefault("random", {})[str(n)] = _mean_se([sum(c) / len(c) for c in correct])
        majority = []
        for r, c in zip(plain, correct):
            groups, answers = matcher.group(r.completions)
            majority.append(float(c[order_by_vote([None] * len(c), groups, answers, "majority")[0][0]]))
        rows.setdefault("majority", {})[str(n)] = _mean_se(majority)
        if "early-rejection" in outcomes:
            cut = outcomes["early-rejection"]
            tokens = sum(r.stats.tokens for r in plain), sum(r.stats.tokens for r in cut)
            steps = sum(r.stats.steps for r in plain), sum(r.stats.steps for r in cut)
            savings[str(n)] = {"tokens_plain": tokens[0] / len(plain), "tokens_rejection": tokens[1] / len(plain),
                               "tokens_saved": 1.0 - tokens[1] / tokens[0], "steps_saved": 1.0 - steps[1] / steps[0],
                               "stopped": float(np.mean([r.stats.stopped for r in cut]))}
    return {
        "kind": "search",
        "task": {"name": task.name, "key": f"search-{task.name.lower()}-n{len(prompts)}-s{seed}", "info": task.info,
                 "num_problems": len(prompts), "candidates": max_n, "answer_fn": matcher.name},
        "backbone": repr(backbone) if backbone_name is None else backbone_name,
        "config": asdict(config),
        "aggregate": "final",
        "beam_width": beam_width,
        "seed": seed,
        "n_values": ns,
        "rows": rows,
        "cost": cost,
        "savings": savings,
        "environment": {"python": platform.python_version(), "machine": platform.machine()},
    }


def search_markdown(results: dict[str, Any]) -> str:
    """Accuracy against N (mean ± SE), the steps / tokens generated per problem, and early rejection's savings."""
    ns, task = results["n_values"], results["task"]
    order = ["pass@N"] + [r for r in results["rows"] if r not in ("pass@N", "majority", "random")]
    body = []
    for row in order + ["majority", "random"]:
        label = {"pass@N": ["pass@N (ceiling)", "any correct"], "majority": ["no verifier", "majority"],
                 "random": ["no verifier", "one sample"]}.get(row) or row.split(" | ")
        cells = results["rows"][row]
        body.append(label + [f"{100 * cells[str(n)][0]:.1f} ± {100 * cells[str(n)][1]:.1f}" for n in ns])
    head = (f"**{task['name']}** (simulated step generator): {task['num_problems']} problems, backbone "
            f"`{results['backbone']}`, beam width m = {results['beam_width']} (min(m, N)); accuracy % (mean ± SE "
            "over problems); chain score = final step.")
    out = [head, "", markdown_table(["method", "selection"] + [f"N={n}" for n in ns], body), ""]
    cost = [[_LABELS[m]] + [f"{c[str(n)]['steps']:.1f} / {c[str(n)]['tokens']:.0f}" for n in ns]
            for m, c in results["cost"].items()]
    out += ["Generated steps / tokens (characters) per problem:", "",
            markdown_table(["method"] + [f"N={n}" for n in ns], cost)]
    if results["savings"]:
        rows = [[f"N={n}", f"{s['tokens_plain']:.0f}", f"{s['tokens_rejection']:.0f}",
                 f"{100 * s['tokens_saved']:.1f}%", f"{100 * s['steps_saved']:.1f}%", f"{s['stopped']:.2f}"]
                for n, s in results["savings"].items()]
        out += ["", "Early rejection (hard, threshold = the config's) against plain best-of-N, the same samples:", "",
                markdown_table(["N", "tokens plain", "tokens with rejection", "tokens saved", "steps saved",
                                "stopped / problem"], rows)]
    return "\n".join(out)
