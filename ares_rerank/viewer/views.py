"""Output records turned into view objects, one function per record kind, each checking the fields it shows.

Every error names the file and line (``where``), the field, what it holds and what was expected, so a file that is
not what ``ares-rerank view`` reads fails with one line, never with a wrong picture.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..chain import COMPLETION_ROLES, ChainScores, split_steps
from .records import (BonView, CandidateView, ChainView, PromptView, StepsView, first_flag, flag_list, number,
                      taus, text_of)


__all__ = ["bon_view", "join_chains", "rank_views", "ranking_view", "score_views", "search_views"]

SCORE_FIELDS = ("step_scores", "evaluations", "evaluations_per_step", "method", "mode", "eps", "delta",
                "num_samples", "error_bounds", "chain_id")


def chain_scores(record: dict[str, Any], where: str) -> ChainScores:
    """The :class:`ChainScores` a ``score`` output line holds (its certificate fields checked)."""
    scores = taus(record.get("step_scores"), f"{where}: 'step_scores'")
    evaluations = record.get("evaluations")
    if isinstance(evaluations, bool) or not isinstance(evaluations, int) or evaluations < 0:
        raise ValueError(f"{where}: 'evaluations' is {evaluations!r}: expected a count (an int >= 0).")
    bounds = record.get("error_bounds")
    if bounds is not None:
        if not isinstance(bounds, list) or len(bounds) != len(scores):
            raise ValueError(f"{where}: 'error_bounds' must be null or one bound per step score ({len(scores)}).")
        bounds = [number(b, f"{where}: 'error_bounds'[{i}]", high=1.0) for i, b in enumerate(bounds)]
    per_step = record.get("evaluations_per_step") or []
    mode, method = record.get("mode", "direct"), record.get("method", "ares")
    if not isinstance(mode, str) or not isinstance(method, str):
        raise ValueError(f"{where}: 'mode' and 'method' must be strings (e.g. \"exact\", \"ares\").")
    samples = record.get("num_samples")
    if samples is not None and (isinstance(samples, bool) or not isinstance(samples, int)):
        raise ValueError(f"{where}: 'num_samples' is {samples!r}: expected an int or null.")
    chain_id = record.get("chain_id", record.get("id"))
    return ChainScores(
        step_scores=scores, evaluations=evaluations, evaluations_per_step=per_step if isinstance(per_step, list)
        else [], method=method, mode=mode, eps=number(record.get("eps"), f"{where}: 'eps'", optional=True),
        delta=number(record.get("delta"), f"{where}: 'delta'", optional=True), num_samples=samples,
        error_bounds=bounds, chain_id=None if chain_id is None else str(chain_id))


def score_views(records: Sequence[tuple[int, Any]], path: str, threshold: float,
                chains: Sequence[Any] | None = None, chains_path: str = "--chains") -> list[ChainView]:
    """``score``'s lines as chains; ``chains`` (the scored input, :func:`~ares_rerank.chain.read_chains`) gives each
    its steps' text, base claims and gold labels (see :func:`join_chains`)."""
    views = []
    matched = join_chains(records, chains, chains_path, path) if chains is not None else [None] * len(records)
    for (lineno, record), chain in zip(records, matched):
        where = f"{path}:{lineno}"
        scores = chain_scores(record, where)
        count = len(scores.step_scores)
        flags = (flag_list(record["flags"], count, f"{where}: 'flags'") if "flags" in record
                 else scores.flags(threshold))
        texts: list[str | None] = [None] * count
        labels, base = None, []
        if chain is not None:
            if chain.num_steps != count:
                raise ValueError(f"{where}: {count} step scores, but chain {chain.id!r} of {chains_path} splits into "
                                 f"{chain.num_steps} steps: pass the --step-separator / --prompt-split that score "
                                 "used.")
            texts, labels, base = list(chain.steps), None if chain.labels is None else list(chain.labels), list(
                chain.base_claims)
        key = str(record.get("id", scores.chain_id if scores.chain_id is not None else f"line {lineno}"))
        views.append(ChainView(key, base, StepsView(texts, scores.step_scores, flags, first_flag(flags), labels,
                                                    scores.error_bounds), scores))
    return views


def join_chains(records: Sequence[tuple[int, Any]], chains: Sequence[Any], chains_path: str,
                path: str) -> list[Any]:
    """The chain of each score line: by ``id`` (score writes the input's id, or its line number), in order when the
    ids repeat. A line with no chain is an error naming both files."""
    ids = [c.id for c in chains]
    by_id = {c.id: c for c in chains} if len(set(ids)) == len(ids) else None
    out = []
    for k, (lineno, record) in enumerate(records):
        key = None if not isinstance(record, dict) or record.get("id") is None else str(record["id"])
        chain = by_id.get(key) if by_id is not None else (chains[k] if k < len(chains) else None)
        if chain is None or (key is not None and chain.id != key):
            raise ValueError(f"{path}:{lineno}: id {key!r} is not a chain of {chains_path} (or not at the same line): "
                             "pass the file that ares-rerank score read.")
        out.append(chain)
    return out


def _steps_of(text: str, count: int, separator: str | None) -> tuple[list[str | None], str | None]:
    """A candidate's text split as the reranker splits it, when that gives one step per score."""
    from ..chat_templates import response_text

    for candidate in (text, response_text(text, None, COMPLETION_ROLES)):
        steps = split_steps(candidate, separator)
        if len(steps) == count:
            return list(steps), None
    shown = "sentences" if separator is None else repr(separator)
    found = len(split_steps(text, separator))
    return [None] * count, (f"its text splits into {found} step{'' if found == 1 else 's'} at --step-separator "
                            f"{shown}, but {count} were scored: pass the separator the command used to see each "
                            "step's text.")


def _candidate(index: int, raw: Any, step_scores: Any, where: str, separator: str | None, threshold: float,
               first_error: Any = None, steps: Any = None) -> CandidateView:
    values = taus(step_scores if step_scores is not None else [], f"{where}: 'step_scores'[{index}]")
    text = text_of(raw, f"{where}: candidate {index}")
    if steps is not None:  # search writes each candidate's steps
        if not isinstance(steps, list) or len(steps) != len(values) or any(not isinstance(s, str) for s in steps):
            raise ValueError(f"{where}: 'steps'[{index}] must be a list of {len(values)} strings, one per step "
                             "score.")
        texts, note = list(steps), None
    else:
        texts, note = _steps_of(text, len(values), separator) if values else ([], None)
    flags = [t <= threshold for t in values]
    first = first_error if isinstance(first_error, int) and not isinstance(first_error, bool) and \
        -1 <= first_error < len(values) else first_flag(flags)
    return CandidateView(index, text, StepsView(texts, values, flags, first, note=note), None)


def rank_views(records: Sequence[tuple[int, Any]], path: str, threshold: float, separator: str | None,
               prompt_key: str = "prompt", candidates_key: str = "candidates") -> list[PromptView]:
    """``rank``'s lines: each prompt's candidates with their position, answer, group and votes, the chosen one."""
    views = []
    for lineno, record in records:
        where = f"{path}:{lineno}"
        if prompt_key not in record or not isinstance(record.get(candidates_key), list):
            raise ValueError(f"{where} has no {prompt_key!r} or no list {candidates_key!r}: name the keys rank read "
                             "with --prompt-key / --candidates-key.")
        candidates, step_scores = record[candidates_key], record.get("step_scores")
        if not isinstance(step_scores, list) or len(step_scores) != len(candidates):
            raise ValueError(f"{where}: 'step_scores' must hold one list per candidate ({len(candidates)}).")
        scores, errors = record.get("scores"), record.get("first_errors") or [None] * len(candidates)
        if not isinstance(scores, list) or len(scores) != len(candidates):
            raise ValueError(f"{where}: 'scores' must hold one score (or null) per candidate ({len(candidates)}).")
        views.append(_prompt_view(record, where, _key(record, lineno), candidates, step_scores, scores, errors,
                                  separator, threshold, record[prompt_key]))
    return views


def _key(record: dict[str, Any], lineno: int) -> str:
    return f"line {lineno}" if record.get("id") is None else str(record["id"])


def _prompt_view(record: dict[str, Any], where: str, key: str, candidates: list, step_scores: list, scores: list,
                 errors: list, separator: str | None, threshold: float, prompt: Any,
                 steps: list | None = None) -> PromptView:
    shown = []
    for i, raw in enumerate(candidates):
        view = _candidate(i, raw, step_scores[i], where, separator, threshold,
                          errors[i] if i < len(errors) else None, None if steps is None else steps[i])
        view.score = number(scores[i], f"{where}: 'scores'[{i}]", optional=True)
        shown.append(view)
    ranking = record.get("ranking") or []
    if not isinstance(ranking, list):
        raise ValueError(f"{where}: 'ranking' must be a list of {{\"index\", \"score\", ...}} entries.")
    for position, entry in enumerate(ranking, 1):
        index = entry.get("index", entry.get("corpus_id")) if isinstance(entry, dict) else None
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(shown):
            raise ValueError(f"{where}: 'ranking'[{position - 1}] names candidate {index!r}, which is not one of the "
                             f"{len(shown)} candidates.")
        shown[index].position = position
        for name in ("answer", "group", "votes"):
            if name in entry:
                setattr(shown[index], name, entry[name])
    answers = record.get("answers")
    if isinstance(answers, list) and len(answers) == len(shown):
        for view, answer in zip(shown, answers):
            view.answer = answer if view.answer is None else view.answer
    best = record.get("best_index")
    if best is not None and (isinstance(best, bool) or not isinstance(best, int) or not 0 <= best < len(shown)):
        raise ValueError(f"{where}: 'best_index' is {best!r}: expected a candidate index or null.")
    if best is not None:
        shown[best].chosen = True
    groups = record.get("groups") or []
    facts = [(name, str(record[name])) for name in ("method", "selection") if isinstance(record.get(name), str)]
    return PromptView(key, text_of(prompt, f"{where}: prompt"), shown,
                      [g for g in groups if isinstance(g, dict)] if isinstance(groups, list) else [], facts)


def search_views(records: Sequence[tuple[int, Any]], path: str, threshold: float,
                 prompt_key: str = "prompt") -> list[PromptView]:
    """``search``'s lines: the final candidates side by side (finished, stopped by rejection, or cut at the
    iteration limit), the chosen one, and the candidates round by round."""
    views = []
    for lineno, record in records:
        where = f"{path}:{lineno}"
        steps, step_scores = record.get("steps"), record.get("step_scores")
        completions = record.get("completions")
        if not (isinstance(steps, list) and isinstance(step_scores, list) and isinstance(completions, list)
                and len(steps) == len(step_scores) == len(completions)):
            raise ValueError(f"{where}: 'completions', 'steps' and 'step_scores' must be lists with one entry per "
                             "candidate: is this ares-rerank search's output?")
        scores = record.get("scores") or [None] * len(steps)
        view = _prompt_view({**record, "ranking": []}, where, _key(record, lineno), completions, step_scores,
                            scores if isinstance(scores, list) and len(scores) == len(steps) else [None] * len(steps),
                            [None] * len(steps), None, threshold, record.get(prompt_key, ""), steps)
        finished, stopped = record.get("finished") or [], record.get("stopped") or []
        for i, candidate in enumerate(view.candidates):
            candidate.status = ("stopped" if i < len(stopped) and stopped[i] else
                                "finished" if i < len(finished) and finished[i] else "cut")
        order = sorted((c for c in view.candidates if c.score is not None), key=lambda c: -c.score)
        for position, candidate in enumerate(order, 1):
            candidate.position = position
        stats = record.get("stats") if isinstance(record.get("stats"), dict) else {}
        view.facts += [(name, _fact(stats[name])) for name in ("tokens", "steps", "evaluations", "seconds",
                                                              "stopped", "tokens_saved") if name in stats]
        view.rounds = True
        views.append(view)
    return views


def _fact(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def bon_view(records: Sequence[tuple[int, Any]], path: str) -> BonView:
    """``eval --task bon``'s results (one object): the accuracy@N table checked."""
    (lineno, results), *rest = records
    if rest:
        raise ValueError(f"{path} holds {len(records)} records: eval --task bon writes one results object per file.")
    rows, ns = results.get("rows"), results.get("n_values")
    if not isinstance(ns, list) or not ns or not isinstance(rows, dict):
        raise ValueError(f"{path}:{lineno}: 'n_values' (a list of N) and 'rows' ({{row: {{N: [mean, se]}}}}) are "
                         "needed: view the .json that eval --task bon wrote.")
    for row, cells in rows.items():
        if not isinstance(cells, dict):
            raise ValueError(f"{path}:{lineno}: rows[{row!r}] must map each N to [mean, se].")
        for n, cell in cells.items():
            if not isinstance(cell, list) or len(cell) != 2:
                raise ValueError(f"{path}:{lineno}: rows[{row!r}][{n!r}] is {cell!r}: expected [mean, se].")
            for part, value in zip(("mean", "se"), cell):
                number(value, f"{path}:{lineno}: rows[{row!r}][{n!r}] {part}")
    return BonView(results)


def ranking_view(ranked: Sequence[dict[str, Any]], prompt: Any = "", threshold: float = 0.5,
                 separator: str | None = "\n\n") -> PromptView:
    """A Python ranking (``AresReranker.rank`` / ``score_batch`` records) as one prompt's candidates, the first
    ranked chosen (``rank``'s records carry no steps: their text is shown whole, with the chain score)."""
    records = list(ranked)
    shown, ranked_order = [], "corpus_id" in (records[0] if records else {})
    for position, record in enumerate(records, 1):
        if not isinstance(record, dict):
            raise TypeError(f"ranking[{position - 1}] is {type(record).__name__}: expected the dicts that "
                            "AresReranker.rank / score_batch return.")
        index = record.get("index", record.get("corpus_id", position - 1))
        where = f"ranking[{position - 1}]"
        values = taus(record.get("step_scores") or [], f"{where}: 'step_scores'")
        texts = record.get("steps") if isinstance(record.get("steps"), list) and len(record["steps"]) == len(
            values) else _steps_of(text_of(record.get("text", ""), where), len(values), separator)[0]
        flags = [t <= threshold for t in values]
        view = CandidateView(index, text_of(record.get("text", ""), where),
                             StepsView(texts, values, flags, first_flag(flags)),
                             number(record.get("score"), f"{where}: 'score'", optional=True),
                             position if ranked_order else None, record.get("answer"), record.get("group"),
                             record.get("votes"), chosen=ranked_order and position == 1)
        shown.append(view)
    return PromptView("ranking", text_of(prompt, "prompt"), shown)
