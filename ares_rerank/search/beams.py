"""Beam search and diverse verifier tree search (DVTS) over steps, as huggingface/search-and-learn defines them
(``src/sal/search/beam_search.py``, ``diverse_verifier_tree_search.py``, options of ``src/sal/config.py``), scored
by streaming ARES instead of a PRM: each new step costs its own backbone evaluations only, and the states of the
beams fork with them.

Beam search (``n``, ``beam_width`` = m): each iteration expands the active beams to ``n`` partial solutions (the
survivors cycled: each gets about m continuations), generates one step for each, scores them, moves the ones that
ended to the completed set, optionally drops duplicates (``filter_duplicates``), and keeps the ``n // m`` best
(chain score under the aggregate) as the next active beams. The answer is the best completed candidate
(``sort_completed``: the ``n`` best are returned, otherwise the first ``n`` to complete).

DVTS: ``n // m`` independent subtrees; each iteration every live subtree generates ``m`` candidate next steps and
keeps its best (greedy within the subtree, so the subtrees stay diverse); a subtree ends when its chosen step ends
the solution. The output is, per subtree, the ``m`` candidates of its last expansion (``n`` in all); the answer is
the best of them.

``lookahead`` = k: each candidate is scored after a greedy rollout of k more steps on a forked state (the rollout's
steps are counted, then discarded), except at the last iteration. Search-and-learn's DVTS scores the rollout this
way; its beam search generates the rollout but scores without it: here both use it.

Differences from search-and-learn, deliberate: a candidate still running after ``num_iterations`` is returned cut
(search-and-learn lets the last iteration run to the end of sequence, one unscored chunk); beam search does not
pad the completed set to ``n`` by duplicating candidates; DVTS ends a subtree when the model ends the solution (the
search's ``\\boxed{`` test is math-specific: an answer-aware stop belongs to the generator).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..aggregate import Aggregate
from ..rerank.answers import AnswerFn
from ..rerank.reranker import AresReranker
from .common import Partial, SearchResult, SearchRun, check_positive
from .generators import GeneratedStep, StepGenerator


__all__ = ["beam_search", "dvts"]


def _check_search(where: str, n: int, beam_width: int, num_iterations: int, lookahead: int) -> None:
    check_positive(where, n=n, beam_width=beam_width, num_iterations=num_iterations)
    if beam_width > n:
        raise ValueError(f"{where}(n={n}, beam_width={beam_width}): beam_width (expansions per beam) must be at most "
                         "n, which keeps n // beam_width beams.")
    if isinstance(lookahead, bool) or not isinstance(lookahead, int) or lookahead < 0:
        raise ValueError(f"{where}(lookahead={lookahead!r}) must be an int >= 0.")


def _take(run: SearchRun, items: list[tuple[int, Partial]], steps: list[GeneratedStep]) -> None:
    """Each partial solution takes its generated step (its cost, end flag, and state: one backbone call)."""
    extended = []
    for (p, c), step in zip(items, steps):
        c.tokens += step.tokens
        c.finished = step.finished
        if step.text:
            extended.append(((p, c), step.text))
    run.extend([item for item, _ in extended], [text for _, text in extended])


def _ranking_scores(run: SearchRun, items: list[tuple[int, Partial]], lookahead: int) -> list[float]:
    """Each item's chain score; with a lookahead, after a greedy rollout of that many steps on a fork."""
    forks = [(p, c.fork(c.key + "/look")) for p, c in items]
    for _ in range(lookahead):
        live = [item for item in forks if not item[1].finished]
        if not live:
            break
        _take(run, live, [steps[0] for steps in run.generate(live, 1, greedy=True)])
    return [_value(run, c) for _, c in forks]


def _value(run: SearchRun, c: Partial) -> float:
    score = run.score(c.state.step_scores)
    return float("-inf") if score is None else score


def beam_search(
    generator: StepGenerator,
    prompts: Sequence[Any],
    reranker: AresReranker,
    n: int = 4,
    *,
    beam_width: int = 4,
    num_iterations: int = 40,
    lookahead: int = 0,
    filter_duplicates: bool = False,
    sort_completed: bool = False,
    aggregate: Aggregate | None = None,
    selection: str | None = None,
    answer_fn: AnswerFn | None = None,
    seed: int | None = 0,
) -> list[SearchResult]:
    """Step-level beam search scored by streaming ARES (module docstring); every prompt's waves share each
    generator and backbone call.

    Args:
        generator: A :class:`~ares_rerank.search.generators.StepGenerator`.
        prompts: Strings or conversations.
        reranker: ARES settings, backbone, aggregate, selection and answer_fn (method ``"ares"``).
        n: Partial solutions generated per iteration (search-and-learn's ``n``).
        beam_width: Expansions per kept beam (``m``); ``n // m`` beams are kept.
        num_iterations: Steps at most.
        lookahead: Greedy rollout steps before scoring (0: none).
        filter_duplicates: Drop active beams whose text repeats another's before keeping the best.
        sort_completed: Return the ``n`` best completed candidates, not the first ``n``.
        aggregate, selection, answer_fn: Overrides of the reranker's (search-and-learn: ``agg_strategy``).
        seed: Seeds the generator and keys every continuation.

    Returns:
        One :class:`~ares_rerank.search.common.SearchResult` per prompt (method ``"beam-search"``).
    """
    _check_search("beam_search", n, beam_width, num_iterations, lookahead)
    run = SearchRun("beam_search", generator, prompts, reranker, num_iterations + lookahead, aggregate, selection,
                    answer_fn, seed)
    active = [[run.start(p, "b")] for p in range(len(run.prompts))]
    completed: list[list[Partial]] = [[] for _ in run.prompts]
    for it in range(num_iterations):
        last = it == num_iterations - 1
        slots = [(p, beams[j % len(beams)].fork(f"{run.seed}/{p}/i{it}s{j}"))
                 for p, beams in enumerate(active) if beams for j in range(n)]
        if not slots:
            break
        _take(run, slots, [steps[0] for steps in run.generate(slots, 1)])
        running = [(p, c) for p, c in slots if not (c.finished or last)]
        values = dict(zip(map(id, (c for _, c in running)), _ranking_scores(run, running, 0 if last else lookahead)))
        for p in range(len(active)):
            mine = [c for q, c in slots if q == p]
            completed[p] += [c for c in mine if c.finished or last]
            alive = [c for c in mine if id(c) in values]
            if filter_duplicates:  # the first beam of each text
                firsts: dict[tuple[str, ...], Partial] = {}
                alive = [firsts.setdefault(tuple(c.steps), c) for c in alive if tuple(c.steps) not in firsts]
            ranked = sorted(range(len(alive)), key=lambda i: (-values[id(alive[i])], i))
            active[p] = [alive[i] for i in sorted(ranked[: n // beam_width])]
    results = []
    for p, done in enumerate(completed):
        if sort_completed:
            done = sorted(done, key=lambda c: -_value(run, c))
        results.append(run.result(p, "beam-search", done[:n]))
    return results


def dvts(
    generator: StepGenerator,
    prompts: Sequence[Any],
    reranker: AresReranker,
    n: int = 4,
    *,
    beam_width: int = 4,
    num_iterations: int = 40,
    lookahead: int = 0,
    aggregate: Aggregate | None = None,
    selection: str | None = None,
    answer_fn: AnswerFn | None = None,
    seed: int | None = 0,
) -> list[SearchResult]:
    """Diverse verifier tree search scored by streaming ARES (module docstring).

    Args:
        generator, prompts, reranker, num_iterations, lookahead, aggregate, selection, answer_fn, seed: As
            :func:`beam_search`.
        n: Candidates in all: ``n // beam_width`` subtrees of ``beam_width`` expansions (``n`` must be a multiple
            of ``beam_width``, as search-and-learn requires).
        beam_width: Candidate next steps per subtree and iteration (``m``).

    Returns:
        One :class:`~ares_rerank.search.common.SearchResult` per prompt (method ``"dvts"``): ``n`` candidates,
        each subtree's last ``beam_width`` expansions.
    """
    _check_search("dvts", n, beam_width, num_iterations, lookahead)
    if n % beam_width:
        raise ValueError(f"dvts(n={n}, beam_width={beam_width}): n must be a multiple of beam_width (n // beam_width "
                         "subtrees of beam_width expansions each).")
    run = SearchRun("dvts", generator, prompts, reranker, num_iterations + lookahead, aggregate, selection,
                    answer_fn, seed)
    trees = [[run.start(p, f"t{t}") for t in range(n // beam_width)] for p in range(len(run.prompts))]
    expansions: list[list[list[Partial]]] = [[[tree] for tree in group] for group in trees]
    for it in range(num_iterations):
        last = it == num_iterations - 1
        live = [(p, t) for p, group in enumerate(trees) for t, tree in enumerate(group) if not tree.finished]
        if not live:
            break
        generated = run.generate([(p, trees[p][t]) for p, t in live], beam_width)
        children = [[trees[p][t].fork(f"{trees[p][t].key}/i{it}c{j}") for j in range(beam_width)] for p, t in live]
        _take(run, [(p, c) for (p, _), kids in zip(live, children) for c in kids],
              [step for steps in generated for step in steps])
        flat = [(p, c) for (p, _), kids in zip(live, children) for c in kids]
        values = _ranking_scores(run, flat, 0 if last else lookahead)
        for i, ((p, t), kids) in enumerate(zip(live, children)):
            mine = values[i * beam_width : (i + 1) * beam_width]
            best = max(range(beam_width), key=lambda j: (mine[j], -j))
            trees[p][t], expansions[p][t] = kids[best], kids
    return [run.result(p, "dvts", [c for kids in expansions[p] for c in kids]) for p in range(len(run.prompts))]
