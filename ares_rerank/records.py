"""Score and rank records of the reranker, and reading prompts / completions that are strings or conversations.

A score record (one per candidate, in input order): ``index``, ``text``, ``steps``, ``step_scores``, ``score``,
``first_error``, ``certificate``, ``error``. A rank record (best first): ``corpus_id`` (``CrossEncoder.rank``'s key),
``index`` (its alias), ``score`` and, with ``return_documents``, ``text``.
"""

from __future__ import annotations

from typing import Any, Sequence

from .chain import ChainScores


__all__ = [
    "COMPLETION_ROLES",
    "NO_STEPS",
    "PROMPT_ROLES",
    "certificate",
    "check_candidate_lists",
    "empty_record",
    "message_text",
    "rank_record",
    "rank_records",
]


# The roles whose messages form the text of a conversational prompt / completion (AresReranker's defaults).
PROMPT_ROLES = ("user",)
COMPLETION_ROLES = ("assistant",)


def message_text(value: Any, roles: Sequence[str], what: str = "value") -> str:
    """The text of a string, or of a conversation (list of ``{"role", "content"}`` messages).

    Args:
        value: A string, or a list of messages whose ``content`` is a string or a list of ``{"type": "text",
            "text": ...}`` parts or strings (other parts, e.g. images, are skipped). A message's
            ``reasoning_content`` (the ``<think>`` part a reasoning model wrote, as TRL and vLLM parse it) comes
            before its content: it is the chain to score.
        roles: Messages with these roles contribute their content, joined by a blank line.
        what: Name used in error messages.

    Returns:
        The text (possibly empty).

    Raises:
        TypeError: ``value`` is neither a string nor a list of message dicts, a message has no role, or non-text
            content.
        ValueError: No message has one of ``roles``.
    """
    if isinstance(value, str):
        return value
    if not isinstance(value, (list, tuple)) or not all(isinstance(m, dict) for m in value):
        raise TypeError(
            f"{what} is {type(value).__name__}: pass a string or a list of {{'role', 'content'}} messages."
        )
    if any("role" not in m for m in value):
        keys = sorted({k for m in value for k in m})
        raise TypeError(f"{what} has a message without a 'role' (keys {keys}): pass {{'role', 'content'}} messages "
                        "(ShareGPT's {'from', 'value'} rows need converting).")
    if value and not any(m["role"] in roles for m in value):
        found = sorted({str(m["role"]) for m in value})
        raise ValueError(f"{what} has no message of the roles {list(roles)} (its roles: {found}), so no text to "
                         "score: name the roles that hold it (AresReranker(prompt_roles=..., completion_roles=...)).")
    parts = []
    for message in value:
        if message["role"] not in roles:
            continue
        reasoning = message.get("reasoning_content")  # a reasoning model's chain, as TRL and vLLM parse <think>
        if isinstance(reasoning, str) and reasoning.strip():
            parts.append(reasoning)
        content = message.get("content")
        if isinstance(content, list):  # content parts: keep the text ones (images and the like are skipped)
            content = "\n".join(p if isinstance(p, str) else p["text"] for p in content
                                if isinstance(p, str) or (isinstance(p, dict) and isinstance(p.get("text"), str)))
        if content is None and (message.get("tool_calls") or isinstance(reasoning, str)):
            continue  # a tool call, or reasoning alone, has no content text
        if not isinstance(content, str):
            raise TypeError(f"{what} has a {message.get('role')!r} message whose content is {type(content).__name__}.")
        parts.append(content)
    return "\n\n".join(parts)


def certificate(scores: ChainScores) -> dict[str, Any]:
    return {
        "method": scores.method,
        "mode": scores.mode,
        "eps": scores.eps,
        "delta": scores.delta,
        "num_samples": scores.num_samples,
        "error_bounds": scores.error_bounds,
        "evaluations": scores.evaluations,
    }


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
