"""Best-of-N generated step by step, with early rejection: a candidate whose new step's ARES score falls to or below
the threshold stops generating.

Data flow, per wave: every running candidate of every problem -> one generated step each (one generator call) ->
every new step into its candidate's streaming ARES state (one backbone call) -> tau of the new step -> rejection
-> the next wave, until every candidate has ended, been stopped, or reached ``num_iterations``.

- ``rejection="none"``: plain best-of-N (every candidate runs to its end), scored by the same streaming states:
  the baseline the savings are measured against.
- ``"hard"``: every candidate whose new step has tau <= threshold stops (it is excluded from the selection while
  an unstopped candidate exists).
- ``"soft"``: the same, except that the ``keep`` best unstopped candidates of a problem (by chain score so far)
  always survive, so no problem loses all its candidates.

A candidate's samples do not depend on the others (its continuations are keyed by its own index), so with a seeded
policy the rejection run generates exactly the prefixes of the plain run's candidates; the tokens it saves are
then the difference (what :mod:`ares_rerank.evaluation.search` reports). With a model the saving is estimated
(:class:`~ares_rerank.search.common.SearchStats`).
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

from ..aggregate import Aggregate
from ..rerank.answers import AnswerFn
from ..rerank.reranker import AresReranker
from ..utils.checks import is_number
from .common import Partial, SearchResult, SearchRun, check_positive
from .generators import StepGenerator


__all__ = ["REJECTIONS", "stepwise_best_of_n"]

REJECTIONS = ("none", "hard", "soft")


def stepwise_best_of_n(
    generator: StepGenerator,
    prompts: Sequence[Any],
    reranker: AresReranker,
    n: int = 4,
    *,
    rejection: str = "hard",
    threshold: float | None = None,
    keep: int = 1,
    num_iterations: int = 64,
    aggregate: Aggregate | None = None,
    selection: str | None = None,
    answer_fn: AnswerFn | None = None,
    seed: int | None = 0,
    max_steps: int | None = None,
) -> list[SearchResult]:
    """Best-of-N with the candidates generated step by step and (optionally) stopped early (module docstring).

    Args:
        generator: A :class:`~ares_rerank.search.generators.StepGenerator` (``step_generator(model, tokenizer)``,
            a vLLM ``LLM``, or a policy callable).
        prompts: Strings or conversations.
        reranker: ARES settings, backbone, aggregate, selection and answer_fn (method ``"ares"``).
        n: Candidates per prompt.
        rejection: ``"hard"``, ``"soft"`` or ``"none"`` (plain best-of-N).
        threshold: A step with tau <= threshold stops its candidate (default: the reranker's ``threshold``).
        keep: ``"soft"``: the unstopped candidates a problem always keeps.
        num_iterations: Steps per candidate at most (also the streaming horizon); a candidate still running then is
            cut. The name beam search and DVTS use (and ``--num-iterations``).
        aggregate, selection, answer_fn: Overrides of the reranker's.
        seed: Seeds the generator and keys each candidate's continuations.
        max_steps: The old name of ``num_iterations`` (deprecated: ``AresConfig.max_steps`` is the longest chain
            ARES scores, another thing); warns.

    Returns:
        One :class:`~ares_rerank.search.common.SearchResult` per prompt (method ``"best-of-n"`` or
        ``"early-rejection"``), with every candidate (stopped ones as far as they got).
    """
    where = "stepwise_best_of_n"
    if max_steps is not None:
        warnings.warn(f"{where}(max_steps=...) is deprecated: pass num_iterations={max_steps} (max_steps is "
                      "AresConfig's longest chain).", DeprecationWarning, stacklevel=2)
        num_iterations = max_steps
    check_positive(where, n=n, keep=keep, num_iterations=num_iterations)
    if rejection not in REJECTIONS:
        raise ValueError(f"{where}(rejection={rejection!r}) must be one of {list(REJECTIONS)}.")
    threshold = reranker.threshold if threshold is None and isinstance(reranker, AresReranker) else threshold
    if not is_number(threshold) or not 0.0 <= float(threshold) <= 1.0:
        raise ValueError(f"{where}(threshold={threshold!r}) must be a number in [0, 1], or None for the reranker's.")
    run = SearchRun(where, generator, prompts, reranker, num_iterations, aggregate, selection, answer_fn, seed)
    candidates = [[run.start(p, f"c{c}") for c in range(n)] for p in range(len(run.prompts))]
    for _ in range(num_iterations):
        live = [(p, c) for p, group in enumerate(candidates) for c in group if not (c.finished or c.stopped)]
        if not live:
            break
        extended = []
        for (p, c), (step,) in zip(live, run.generate(live)):
            c.tokens += step.tokens
            c.finished = step.finished
            if step.text:
                extended.append(((p, c), step.text))
        taus = run.extend([item for item, _ in extended], [text for _, text in extended])
        if rejection != "none":
            flagged = [item for (item, _), tau in zip(extended, taus) if tau <= threshold]
            _reject(run, candidates, flagged, keep if rejection == "soft" else 0)
    method = "best-of-n" if rejection == "none" else "early-rejection"
    for p, group in enumerate(candidates):
        run.stats[p].stopped = sum(c.stopped for c in group)
        run.stats[p].tokens_saved = _saved_estimate(group)
    return [run.result(p, method, group) for p, group in enumerate(candidates)]


def _reject(run: SearchRun, candidates: list[list[Partial]], flagged: list[tuple[int, Partial]], keep: int) -> None:
    """Stop the flagged candidates, lowest chain score first, while more than ``keep`` of the problem's remain."""
    by_problem: dict[int, list[Partial]] = {}
    for p, c in flagged:
        by_problem.setdefault(p, []).append(c)
    for p, group in by_problem.items():
        remaining = sum(not c.stopped for c in candidates[p])
        for c in sorted(group, key=lambda c: run.score(c.state.step_scores) or 0.0):
            if remaining <= keep:
                break
            c.stopped, remaining = True, remaining - 1


def _saved_estimate(group: list[Partial]) -> float:
    lengths = [c.tokens for c in group if c.finished and not c.stopped]
    if not lengths:
        return 0.0
    mean = sum(lengths) / len(lengths)
    return float(sum(max(0.0, mean - c.tokens) for c in group if c.stopped and not c.finished))
