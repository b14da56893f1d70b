"""Score and rank records of the reranker (reading prompts / completions that are strings or conversations is
:func:`~ares_rerank.chain.message_text`, re-exported here).

A score record (one per candidate, in input order): ``index``, ``text``, ``steps``, ``step_scores``, ``score``,
``first_error``, ``certificate``, ``error``. A rank record (best first): ``corpus_id`` (``CrossEncoder.rank``'s key),
``index`` (its alias), ``score`` and, with ``return_documents``, ``text``.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..chain import COMPLETION_ROLES, OPTIONAL_SCORE_FIELDS, PROMPT_ROLES, ChainScores, message_text


__all__ = [
    "COMPLETION_ROLES",
    "NO_STEPS",
    "PROMPT_ROLES",
    "Ranking",
    "certificate",
    "check_candidate_lists",
    "empty_record",
    "message_text",
    "rank_record",
    "rank_records",
]


def certificate(scores: ChainScores) -> dict[str, Any]:
    """A record's certificate: the estimator's settings and bounds, and, where the chain has them, the stopping rule
    and a sampled backbone's costs (verdicts, generated tokens, requests), as ``ChainScores.to_dict`` writes them."""
    out = {
        "method": scores.method,
        "mode": scores.mode,
        "eps": scores.eps,
        "delta": scores.delta,
        "num_samples": scores.num_samples,
        "error_bounds": scores.error_bounds,
        "evaluations": scores.evaluations,
    }
    out.update({name: getattr(scores, name) for name in OPTIONAL_SCORE_FIELDS if getattr(scores, name) is not None})
    return out


def check_candidate_lists(prompts: Any, completions: Any) -> None:
    """P prompts and P lists of candidates (``score_batch`` / ``rank_batch`` / ``select_batch``), or a TypeError /
    ValueError naming the argument."""
    if isinstance(prompts, str):
        raise TypeError("score_batch(prompts=...) got a string: pass a list of prompts (or use score()).")
    if not isinstance(prompts, Sequence):
        raise TypeError(f"prompts is {type(prompts).__name__}: pass a list of prompts (one prompt: use score()).")
    if isinstance(completions, str) or not isinstance(completions, Sequence):
        raise TypeError(f"completions is {type(completions).__name__}: pass one list of candidates per prompt.")
    if len(prompts) != len(completions):
        raise ValueError(f"score_batch got {len(prompts)} prompts but {len(completions)} candidate lists.")
    for i, candidates in enumerate(completions):
        if isinstance(candidates, str) or not isinstance(candidates, Sequence):
            raise TypeError(
                f"completions[{i}] is {type(candidates).__name__}: pass a list of candidate completions per prompt."
            )
        if candidates and all(isinstance(c, dict) and "role" in c for c in candidates):
            raise TypeError(
                f"completions[{i}] is one conversation (a list of messages), not a list of candidates: wrap it, "
                "e.g. [conversation]."
            )


#: The ``"error"`` of a record whose completion is empty or blank: nothing to score, and nothing went wrong.
NO_STEPS = "no steps: the completion is empty or blank"


def empty_record(index: int, completion: Any) -> dict[str, Any]:
    return {
        "index": index,
        "text": completion,
        "steps": [],
        "step_scores": [],
        "score": None,
        "first_error": None,
        "certificate": None,
        "error": None,
    }


def _rank_key(record: dict[str, Any]) -> tuple[bool, float, int]:
    score = record["score"]
    return (score is None, -score if score is not None else 0.0, record["index"])


def rank_records(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Score records sorted best first: higher ``score`` first, ties by lower ``index``, ``score=None`` last."""
    return sorted(records, key=_rank_key)


def rank_record(record: dict[str, Any], return_documents: bool) -> dict[str, Any]:
    """A rank record: ``corpus_id`` as in ``CrossEncoder.rank``, ``index`` kept as its alias."""
    out = {"corpus_id": record["index"], "index": record["index"], "score": record["score"]}
    if return_documents:
        out["text"] = record["text"]
    if record.get("error"):  # on_error="none": why this candidate has no score
        out["error"] = record["error"]
    return out


class Ranking(list):
    """What :meth:`AresReranker.rank <ares_rerank.rerank.reranker.AresReranker.rank>` returns: its rank records,
    best first, as a plain list (compared, indexed and serialized as one), that a notebook draws as the prompt's
    candidates side by side (scores, answers, groups and votes, the chosen one marked; :func:`ares_rerank.viewer.view`)
    and keeps the ``prompt`` it ranked for."""

    def __init__(self, records: Sequence[dict[str, Any]] = (), prompt: Any = "") -> None:
        super().__init__(records)
        self.prompt = prompt

    def _repr_html_(self) -> str:
        from ..viewer import view  # imported only when a notebook displays one

        if not self:
            return "<p>An empty ranking (no candidates).</p>"
        return view(list(self), self.prompt)._repr_html_()
