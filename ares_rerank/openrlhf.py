"""OpenRLHF's remote reward protocol, as ``ares-rerank serve`` (:mod:`ares_rerank.server`) speaks it.

OpenRLHF (``--remote_rm_url http://host:port/get_reward``) POSTs ``{"query": [...], "prompts": [...], "labels":
[...]}``: each query is the whole decoded sequence, prompt then response (``tokenizer.decode(prompt + response ids,
skip_special_tokens=False)``), and its prompt is the text the query starts with. It reads back ``rewards`` (one float
per query, for the advantages), ``scores`` (one float per query, for dynamic filtering) and ``extra_logs`` (a dict of
lists aligned to the queries, each turned into a float tensor and logged). The answer built here::

    {"rewards": [0.93, 0.0], "scores": [0.93, 0.0],
     "extra_logs": {"ares_scored": [1.0, 0.0], "ares_num_steps": [3.0, 0.0], "ares_first_error": [-1.0, -1.0],
                    "ares_flagged_frac": [0.0, 0.0]},
     "step_scores": [[0.99, 0.97, 0.93], []], "step_ends": [[12, 40, 71], []]}

- the response scored is ``query[len(prompt):]`` without the end-of-sequence markers at its end
  (:data:`DEFAULT_END_MARKERS`: ``<|im_end|>``, ``</s>``, ... that the decoded query keeps);
- ``rewards`` equal ``AresReward(reranker, unscorable_value=...)(prompts, responses)``: the aggregated ARES score in
  [0, 1], and ``unscorable_value`` for a response that cannot be scored (empty or blank, text that cannot be encoded,
  a backbone error on it); ``ares_scored`` says which;
- ``step_scores`` (tau per step) and ``step_ends`` (the character offset in the response where each step ends) are
  extra fields for dense rewards (:class:`ares_rerank.verl.AresDenseRewardManager`); OpenRLHF ignores them.

A body that breaks the protocol is a :class:`RequestError` (400 / 413) naming the field, the value and the fix.
"""

from __future__ import annotations

from typing import Any, Sequence

from .batching import completion_logs, reward_values, step_ends


__all__ = [
    "DEFAULT_END_MARKERS",
    "REWARD_PATH",
    "RequestError",
    "parse_reward_request",
    "reward_answer",
    "strip_end_markers",
]

#: End-of-sequence markers a decoded query keeps (``skip_special_tokens=False``), removed from a response's end.
DEFAULT_END_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|end|>", "<|return|>",
                       "</s>", "<end_of_turn>", "<eos>")
REWARD_PATH = "/get_reward"


class RequestError(Exception):
    """A request the server refuses: the HTTP ``status``, the message for ``{"error": ...}`` and extra headers."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def _text_list(payload: dict[str, Any], key: str, hint: str) -> list[str]:
    if key not in payload or payload[key] is None:
        raise RequestError(400, f"'{key}' is missing: {hint}")
    value = payload[key]
    if isinstance(value, str):
        raise RequestError(400, f"'{key}' is a string: send a list with one entry per completion (wrap a single "
                                f"one in a list). {hint}")
    if not isinstance(value, list):
        raise RequestError(400, f"'{key}' is a JSON {_json_type(value)}: send a list of strings. {hint}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise RequestError(400, f"'{key}[{i}]' is a JSON {_json_type(item)}, not a string: send text.")
    return value


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def _difference(query: str, prompt: str) -> str:
    at = next((i for i, (a, b) in enumerate(zip(query, prompt)) if a != b), min(len(query), len(prompt)))
    if at == len(query):
        return f"the query ({len(query)} characters) is shorter than its prompt ({len(prompt)})"
    return f"they differ at character {at}: query has {query[at:at + 20]!r}, prompt has {prompt[at:at + 20]!r}"


def parse_reward_request(payload: Any, max_items: int) -> tuple[list[str], list[str]]:
    """The prompts and responses of an OpenRLHF ``/get_reward`` body, or a :class:`RequestError` (400 / 413) naming
    the field, the value and the fix. ``labels`` is optional and unused (ARES needs no reference answer), but when
    given it must have one entry per query."""
    if not isinstance(payload, dict):
        raise RequestError(400, f"the body is a JSON {_json_type(payload)}, not an object: send "
                                '{"query": [...], "prompts": [...], "labels": [...]} (OpenRLHF\'s remote reward '
                                "protocol).")
    queries = _text_list(payload, "query", "each query is a prompt followed by its response.")
    if len(queries) > max_items:
        raise RequestError(413, f"'query' has {len(queries)} entries, more than max_items={max_items} "
                                "(--max-items): split the batch into smaller requests, or raise --max-items.")
    prompts = _text_list(payload, "prompts", "send the prompt each query starts with (one per query); the "
                                             "response scored is what follows it.")
    if len(prompts) != len(queries):
        raise RequestError(400, f"'prompts' has {len(prompts)} entries for {len(queries)} queries: send one "
                                "prompt per query (repeat a prompt for each of its samples).")
    labels = payload.get("labels")
    if labels is not None and (not isinstance(labels, list) or len(labels) != len(queries)):
        size = f"{len(labels)} entries" if isinstance(labels, list) else f"a JSON {_json_type(labels)}"
        raise RequestError(400, f"'labels' is {size} for {len(queries)} queries: send one label per query, or "
                                "leave 'labels' out (ARES does not use them).")
    for i, (query, prompt) in enumerate(zip(queries, prompts)):
        if not query.startswith(prompt):
            raise RequestError(400, f"query[{i}] does not start with prompts[{i}] ({_difference(query, prompt)}): "
                                    "each query must be its prompt followed by the response; send the prompt text "
                                    "exactly as the query begins.")
    return prompts, [query[len(prompt):] for query, prompt in zip(queries, prompts)]


def strip_end_markers(text: str, markers: Sequence[str]) -> str:
    """``text`` without the ``markers`` (and the whitespace around them) at its end, removed repeatedly; unchanged
    when it ends with none."""
    end = len(text)
    while True:
        trimmed = text[:end].rstrip()
        marker = next((m for m in markers if m and trimmed.endswith(m)), None)
        if marker is None:
            return text[:end]
        end = len(trimmed) - len(marker)


def reward_answer(records: Sequence[dict[str, Any]], responses: Sequence[str], threshold: float,
                  unscorable_value: float) -> dict[str, Any]:
    """The ``/get_reward`` answer for scored records (see the module docstring)."""
    rewards = reward_values(records, unscorable_value)
    scored = [r["score"] is not None for r in records]
    return {
        "rewards": rewards,
        "scores": list(rewards),
        "extra_logs": completion_logs(records, threshold),
        "step_scores": [list(r["step_scores"]) if ok else [] for r, ok in zip(records, scored)],
        "step_ends": [step_ends(text, r["steps"]) if ok else [] for r, text, ok in zip(records, responses, scored)],
    }
